"""The exact rounds' time budget: a round's predicted cost, and the heads of it that fit."""

from __future__ import annotations

import time

import pandas as pd
import pytest

from interp.ablate.batches import EvalCorpus
from interp.ablate.evaluation import build_corpus
from interp.ablate.round_budget import RoundCost, head_units, layer_units, urgency
from interp.ablate.sequential import rounds, sequential_sweep

A, B = (0, 0), (0, 1)


def _known(rate: float = 1.0, units=head_units, overhead: float = 0.0) -> RoundCost:
    """A RoundCost that has timed ``rate`` seconds per unit on eval set ``e``."""
    return RoundCost(units, {"e": [(10.0 * rate, 10.0)]}, overhead)


def test_units_count_the_clean_pass_and_each_head_from_its_layer_on():
    assert layer_units(4)([(1, 0), (3, 2)]) == 4 + 3 + 1
    assert layer_units(4)([]) == 4
    assert head_units([A, B]) == 3


def test_timed_records_seconds_and_units_per_eval_set(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    cost = RoundCost(layer_units(4))

    def sweep() -> None:
        clock[0] += 6.0

    assert cost.rate("e") is None
    cost.timed("e", sweep, [(2, 0)])  # 4 + 2 units in 6 s
    assert cost.calls == {"e": [(6.0, 6.0)]} and cost.rate("e") == 1.0
    cost.round_took(8.5)  # 2.5 s besides its one sweep
    assert cost.overhead == 2.5


def test_the_rate_is_the_slower_of_all_sweeps_and_those_after_the_first():
    cost = RoundCost(head_units, {"e": [(10.0, 20.0), (3.0, 2.0), (1.0, 2.0)]})
    assert cost.rate("e") == 1.0  # 4 s over 4 units after the first; 14 s over 24 in all
    cost = RoundCost(head_units, {"e": [(30.0, 20.0), (1.0, 2.0)]})
    assert cost.rate("e") == pytest.approx(31.0 / 22.0)


def test_a_round_that_fits_runs_whole():
    todo = {"e": [A, B]}
    assert _known().fit(todo, {}, {}, 3.0) == todo  # one clean pass + 2 heads: 3 s


def test_a_round_that_would_overrun_keeps_the_most_urgent_heads_that_fit():
    heads = [(0, h) for h in range(3)]
    order = {"e": {(0, 2): 1.0, (0, 0): 2.0}}  # (0, 1): no projection, last
    # 3 s: the clean pass and (0, 2), then (0, 0); (0, 1) would make 4
    assert _known().fit({"e": heads}, {}, order, 3.0) == {"e": [(0, 0), (0, 2)]}
    # the round's bookkeeping counts: 1 s of it leaves room for one head
    assert _known(overhead=1.0).fit({"e": heads}, {}, order, 3.0) == {"e": [(0, 2)]}
    assert _known().fit({"e": heads}, {}, order, 1.5) == {"e": []}


def test_a_head_too_dear_is_skipped_for_a_cheaper_one_behind_it():
    """Layer 0's head costs the whole model again; layer 9's one layer: with room for the clean
    pass and 5 layers, the urgent layer-0 head waits and the layer-9 head runs."""
    order = {"e": {(0, 0): 1.0, (9, 0): 2.0}}
    cost = _known(units=layer_units(10))
    assert cost.fit({"e": [(0, 0), (9, 0)]}, {}, order, 15.0) == {"e": [(9, 0)]}


def test_heads_at_different_slices_pay_a_clean_pass_each():
    cursors = {"e": {A: 0, B: 1}}
    assert _known().fit({"e": [A, B]}, cursors, {}, 4.0) == {"e": [A, B]}  # 2 + 2
    assert _known().fit({"e": [A, B]}, cursors, {"e": {B: 1.0}}, 3.9) == {"e": [B]}


def test_an_eval_set_with_no_timed_sweep_runs_whole():
    todo = {"e": [A, B], "f": [A]}
    assert _known().fit(todo, {}, {}, 0.5) == todo


def _effects(rows: list[tuple[str, tuple[int, int], float, float, str]]) -> pd.DataFrame:
    """Effects rows: (metric, head, delta, half-width, vs_tolerance)."""
    return pd.DataFrame(
        {
            "metric": [m for m, *_ in rows],
            "layer": [h[0] for _, h, *_ in rows],
            "head": [h[1] for _, h, *_ in rows],
            "delta": [d for _, _, d, _, _ in rows],
            "ci_low": [d - w for _, _, d, w, _ in rows],
            "ci_high": [d + w for _, _, d, w, _ in rows],
            "vs_tolerance": [v for *_, v in rows],
            "ablation": "mean",
        }
    )


def test_urgency_is_a_heads_least_need_on_the_eval_sets_metrics():
    table = _effects(
        [
            ("loss_prose", A, 1.0, 0.2, "above"),  # (0.2 / 0.1)^2 = 4
            ("kl_prose", A, 1.0, 0.15, "above"),  # 2.25: the least of A's
            ("loss_prose", B, 1.0, 0.5, "undecided"),  # no projection
            ("loss_repeated", B, 1.0, 0.3, "above"),  # another eval set's
        ]
    )
    got = urgency(table, {"loss_prose": [A, B], "loss_repeated": [B]}, 0.1)
    assert got["loss_prose"][A] == pytest.approx(2.25)
    assert got["loss_prose"][B] == float("inf")
    assert got["loss_repeated"][B] == pytest.approx(9.0)


@pytest.mark.usefixtures("one_thread")
def test_a_round_that_would_end_after_the_deadline_runs_the_heads_that_fit(
    llama, monkeypatch, capsys
):
    """Every sweep takes 1 s per unit on a fake clock. Round 0: three eval sets, 3 units each
    (9 s). With 2.5 s left, both heads on loss_repeated's next slice would take 3 s: the round
    runs head B (the nearer the rule) alone, and with 0.5 s left none fits: the budget stops the
    rounds before the deadline, not after it."""
    clock = [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    corpus = build_corpus(llama, 6, 6, (6,), 8, 0, 512)
    parts = rounds(corpus, 3, 512, 0)
    script = iter(
        [
            _effects(
                [  # both within reach of the rule: A needs 2.25 times, B 1.44
                    ("loss_repeated", A, 10.0, 1.5, "above"),
                    ("loss_repeated", B, 5.0, 0.6, "above"),
                ]
            ),
            _effects(
                [
                    ("loss_repeated", A, 10.0, 1.5, "above"),
                    ("loss_repeated", B, 5.0, 0.1, "above"),
                ]
            ),
        ]
    )
    calls = []

    def sweep(part: EvalCorpus, heads: list) -> None:
        calls.append((part.batches[0].eval_set, heads))
        clock[0] += head_units(heads)

    state, stopped_by = sequential_sweep(parts, [A, B], sweep, lambda: next(script), 11.5)
    assert calls == [(f, [A, B]) for f in corpus.sizes] + [("loss_repeated", [B])]
    assert stopped_by == "budget" and clock[0] == 11.0
    assert state.cursors["loss_repeated"] == {A: 1, B: 2}
    assert "loss_repeated 1 open, time budget spent" in capsys.readouterr().err

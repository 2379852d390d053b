"""The sequential exact sweep: rounds of the same make-up, the stopping rule, and effects on the tokens each head used."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest
from small_sweep import SMALL_SWEEP

from interp.ablate.batches import EvalCorpus, make_batches
from interp.ablate.config import REACH
from interp.ablate.evaluation import build_corpus
from interp.ablate.sequential import (
    Rounds,
    ended_heads,
    next_heads,
    open_heads,
    precision,
    rounds,
    sequential_sweep,
    settled,
    slices_of,
)
from interp.ablate.settle import contending, positions_needed, rank_open
from interp.ablate.stage import ablate

pytestmark = pytest.mark.usefixtures("one_thread")
BASE = SMALL_SWEEP


def test_rounds_slice_every_eval_set_evenly(llama):
    corpus = build_corpus(llama, 6, 6, (6,), 8, 0, 512)
    parts = rounds(corpus, 2, 512, 0)
    assert len(parts) == 2 and rounds(corpus, 1, 512, 0) == [corpus]
    seen = set()
    for r, part in enumerate(parts):
        assert set(part.sizes) == set(corpus.sizes)
        for item in part.items:
            assert item.index * 2 // corpus.sizes[item.eval_set] == r
            seen.add((item.eval_set, item.index))
        assert {b.eval_set for b in part.batches} == set(corpus.sizes)
    assert seen == {(it.eval_set, it.index) for it in corpus.items}


def test_a_generated_set_fills_every_round_though_it_lost_a_few(llama):
    # 5 agreement prefixes left of those made for 4 rounds (the model could not score the rest):
    # slices of 2 would leave the last round without any, and call the set spent
    corpus = build_corpus(llama, 6, 6, (6,), 8, 0, 512)
    kept = [it for it in corpus.items if it.eval_set != "sv_logit_diff" or it.index < 5]
    five = EvalCorpus(kept, make_batches(kept, 512, 0), {**corpus.sizes, "sv_logit_diff": 5})
    parts = rounds(five, 4, 512, 0)
    held = [sum(it.eval_set == "sv_logit_diff" for it in part.items) for part in parts]
    assert held == [2, 1, 1, 1]
    assert slices_of(parts)["sv_logit_diff"] == [0, 1, 2, 3]


def test_the_users_own_sequences_stay_whole_in_round_zero(llama):
    corpus = build_corpus(llama, 6, 6, (6,), 8, 0, 512)
    parts = rounds(corpus, 3, 512, 0, whole=frozenset({"loss_prose"}))
    prose = [[it.index for it in part.items if it.eval_set == "loss_prose"] for part in parts]
    assert sorted(prose[0]) == list(range(corpus.sizes["loss_prose"])) and not any(prose[1:])
    assert all(
        any(it.eval_set == "loss_repeated" for it in part.items) for part in parts
    )  # the rest still sliced


def test_settled_needs_a_decision_and_precision_where_the_head_matters():
    rows = pd.DataFrame(
        {
            "delta": [1.0, 1.0, 0.001, 0.02, 0.3],
            "ci_low": [0.95, 0.5, -0.002, 0.005, -0.1],
            "ci_high": [1.05, 1.5, 0.004, 0.03, 0.7],
            "vs_tolerance": ["above", "above", "within", "undecided", "undecided"],
            "metric": "loss_prose",
            "ablation": "mean",
            "layer": 0,
            "head": [0, 1, 2, 3, 4],
        }
    )
    assert settled(rows).tolist() == [True, False, True, False, False]
    assert open_heads(rows, "loss_prose") == {(0, 1), (0, 3), (0, 4)}
    assert open_heads(rows, "sv_logit_diff") == set()
    # only the decided head that is not yet precise has a need: (0.5 / 0.1)^2 its positions
    need = positions_needed(rows)
    assert need[1] == pytest.approx(25.0) and need.drop(1).isna().all()
    assert positions_needed(rows, 0.25)[1] == pytest.approx(4.0)  # (0.5 / 0.25)^2


def test_the_largest_effects_of_a_metric_must_be_precise_whatever_their_decision():
    """25 heads whose removal helps (below the tolerance), each interval decided but wide: the
    20 largest of each metric and kind go on, the 5 smallest stop; a tighter --precision holds
    a head that the default 10% lets stop."""
    delta = -np.arange(1.0, 26.0)  # -1 .. -25
    rows = pd.DataFrame(
        {
            "delta": delta,
            "ci_low": delta - 0.5,
            "ci_high": delta + 0.5,
            "vs_tolerance": "below",
            "metric": "loss_repeated",
            "ablation": "mean",
            "layer": 0,
            "head": range(25),
        }
    )
    # half-width 0.5: within 10% of |delta| from 5 on, so every one of the top 20 is precise
    assert settled(rows).tolist() == [True] * 5 + [True] * 20
    wide = rows.assign(ci_low=delta - 3.0, ci_high=delta + 3.0)  # within 10% from 30 on: never
    assert settled(wide).tolist() == [True] * 5 + [False] * 20
    zero = rows.assign(ablation="zero")  # each kind has its own top 20
    assert settled(pd.concat([wide, zero])).tolist() == [True] * 5 + [False] * 20 + [True] * 25
    # 0.5 <= 0.02 x |delta| from |delta| = 25 on: at 2%, only the largest is precise
    assert settled(rows, 0.02).tolist() == [True] * 5 + [False] * 19 + [True]


def test_sequential_sweep_spends_tokens_on_open_heads_only(llama):
    seq = ablate(llama, dataclasses.replace(BASE, max_rounds=3), progress=False)
    flat = ablate(
        llama,
        dataclasses.replace(BASE, n_prose=9, n_repeated=9, n_syntax=12, max_rounds=1),
        progress=False,
    )
    a = seq.effects.set_index(["layer", "head", "metric"]).sort_index()
    b = flat.effects.set_index(["layer", "head", "metric"]).sort_index()
    assert (a["n_tokens"] <= b["n_tokens"]).all()
    full = a["n_tokens"] == b["n_tokens"]
    assert full.any()
    # a head that saw every round has the effect of one sweep over the whole pool
    np.testing.assert_allclose(a.loc[full, "delta"], b.loc[full, "delta"], rtol=1e-4, atol=1e-7)
    # a head stops only once its effects are settled and their rank among the few largest too
    table = seq.effects
    done = table.set_index(["layer", "head", "metric"]).index.isin(a.index[~full])
    assert (settled(table) & ~rank_open(table))[done].all()
    log = seq.summary["rounds"]
    assert log[0] == {f: len(a.reset_index()[["layer", "head"]].drop_duplicates()) for f in log[0]}
    # the rounds after the first run only the heads still open: fewer than every head
    assert any(sum(r.values()) < sum(log[0].values()) for r in log[1:])


def test_the_time_budget_stops_the_rounds_and_the_table_says_so(llama):
    # a budget already spent when round 0 ends: no further round, open heads say "budget"
    out = ablate(llama, dataclasses.replace(BASE, max_rounds=3, time_budget=1e-9), progress=False)
    assert len(out.summary["rounds"]) == 1
    exact = out.effects
    ok = settled(exact)
    assert (
        (~ok).any()
        and (exact.loc[ok, "precision"] == "met").all()
        and (exact.loc[~ok, "precision"] == "budget").all()
    )
    # without a budget the rounds go on, and heads still open after the last say "rounds"
    free = ablate(
        llama, dataclasses.replace(BASE, max_rounds=2, time_budget=None), progress=False
    ).effects
    assert len(free) and set(free["precision"]) <= {"met", "rounds"}
    assert (free.loc[~settled(free), "precision"] == "rounds").all()


def test_precision_marks_settled_rows_met():
    from interp.ablate.sequential import precision

    rows = pd.DataFrame(
        {
            "delta": [1.0, 1.0],
            "ci_low": [0.95, 0.5],
            "ci_high": [1.05, 1.5],
            "vs_tolerance": ["above", "above"],
            "metric": "loss_prose",
            "ablation": "mean",
        }
    )
    assert precision(rows, "budget")["precision"].tolist() == ["met", "budget"]
    assert precision(rows, "rounds", 0.01)["precision"].tolist() == ["rounds", "rounds"]


def _below(widen: float) -> pd.DataFrame:
    """25 heads (layer 0) whose removal helps loss_repeated by 1 .. 25, intervals +-``widen``."""
    delta = -np.arange(1.0, 26.0)
    return pd.DataFrame(
        {
            "delta": delta,
            "ci_low": delta - widen,
            "ci_high": delta + widen,
            "vs_tolerance": "below",
            "metric": "loss_repeated",
            "ablation": "mean",
            "layer": 0,
            "head": range(25),
        }
    )


def _agreement() -> pd.DataFrame:
    """21 heads (layer 1) on sv_logit_diff: 20 large and precise, one tiny and undecided."""
    delta = np.r_[np.arange(1.0, 21.0), 0.001]
    return pd.DataFrame(
        {
            "delta": delta,
            "ci_low": np.r_[delta[:20] - 0.01, -0.02],
            "ci_high": np.r_[delta[:20] + 0.01, 0.02],
            "vs_tolerance": ["above"] * 20 + ["undecided"],
            "metric": "sv_logit_diff",
            "ablation": "mean",
            "layer": 1,
            "head": range(21),
        }
    )


def test_an_effect_contends_where_its_interval_reaches_the_twentieth_largest():
    # the 20th largest |delta| is 6; an interval of +-3 reaches it from |delta| = 3 on
    assert contending(_below(3.0)).tolist() == [False, False] + [True] * 23
    assert contending(_below(0.5)).tolist() == [False] * 5 + [True] * 20
    # the tiny undecided head cannot reach the 20th largest (1.0); fewer than 20: all contend
    assert contending(_agreement()).tolist() == [True] * 20 + [False]
    assert contending(_agreement().head(3)).all()


def test_the_next_round_runs_the_contending_open_heads_first():
    repeated, agreement = [(0, h) for h in range(25)], [(1, h) for h in range(21)]
    heads = {"loss_repeated": repeated, "sv_logit_diff": agreement}
    # half-width 6: none of the top 20 within REACH of the rule ((6 / 2.5)^2 = 5.76 at best)
    assert (6 / 2.5) ** 2 > REACH
    wide = pd.concat([_below(6.0), _agreement()], ignore_index=True)
    # the top 20 of loss_repeated are open and contend: the undecided sv head waits
    assert next_heads(wide, heads, 0.1) == {
        "loss_repeated": [(0, h) for h in range(5, 25)],
        "sv_logit_diff": [],
    }
    # with no time budget to spend first on them, every open head goes on at once
    assert next_heads(wide, heads, 0.1, ordered=False) == {
        "loss_repeated": [(0, h) for h in range(5, 25)],
        "sv_logit_diff": [(1, 20)],
    }
    # once they are precise, every open head goes on
    tight = pd.concat([_below(0.5), _agreement()], ignore_index=True)
    assert next_heads(tight, heads, 0.1) == {"loss_repeated": [], "sv_logit_diff": [(1, 20)]}
    # a head with no sequence left holds no round back
    assert next_heads(wide, {"sv_logit_diff": agreement}, 0.1) == {"sv_logit_diff": [(1, 20)]}
    assert next_heads(wide, {**heads, "loss_repeated": []}, 0.1) == {
        "loss_repeated": [],
        "sv_logit_diff": [(1, 20)],
    }
    # only the chosen heads run
    assert next_heads(wide, {**heads, "loss_repeated": repeated[:6]}, 0.1) == {
        "loss_repeated": [(0, 5)],
        "sv_logit_diff": [],
    }


def test_an_effect_within_reach_of_the_rule_goes_first():
    """Shortest job first: of the open contending effects, those that would meet the rule with at
    most REACH times their positions run before the others, which lose no sequence by waiting."""
    # half-width 3: at 10%, |delta| d needs (3 / 0.1 d)^2 times its positions (head h: d = h + 1)
    rows = _below(3.0)
    heads = {"loss_repeated": [(0, h) for h in range(25)]}
    near = [(0, h) for h in range(5, 25) if (30 / (h + 1)) ** 2 <= REACH]
    assert 0 < len(near) < 20
    assert next_heads(rows, heads, 0.1) == {"loss_repeated": near}
    # 1.44 for |delta| 25, 1.56 for 24
    assert open_heads(rows, "loss_repeated", 0.1, first=True, reach=1.5) == {(0, 24)}
    # an undecided effect has no need it can state: all go on in the contending tier (|delta| 3
    # on: the interval reaches the 20th largest, 6)
    undecided = rows.assign(vs_tolerance="undecided")
    assert next_heads(undecided, heads, 0.1) == {"loss_repeated": [(0, h) for h in range(2, 25)]}


def _scripted(rows: list[tuple[int, float, float, str]]) -> pd.DataFrame:
    """loss_repeated effects of heads (0, h): (h, delta, half-width, vs_tolerance)."""
    return pd.DataFrame(
        {
            "layer": 0,
            "head": [h for h, *_ in rows],
            "delta": [d for _, d, _, _ in rows],
            "ci_low": [d - w for _, d, w, _ in rows],
            "ci_high": [d + w for _, d, w, _ in rows],
            "vs_tolerance": [v for *_, v in rows],
            "metric": "loss_repeated",
            "ablation": "mean",
        }
    )


def _script() -> Iterator[pd.DataFrame]:
    """The effects after each round of two heads on loss_repeated."""
    return iter(
        [
            # head 0 within REACH of the rule ((1.5 / 1.0)^2 = 2.25), head 1 undecided: 0 first
            _scripted([(0, 10.0, 1.5, "above"), (1, 5.0, 5.0, "undecided")]),
            # head 0 precise; head 1 still open
            _scripted([(0, 10.0, 0.5, "above"), (1, 5.0, 5.0, "undecided")]),
            _scripted([(0, 10.0, 0.5, "above"), (1, 5.0, 0.1, "above")]),  # both settled
        ]
    )


def _scripted_sweep(llama, deadline: float | None, decide: int | None = None):
    """Two heads' sequential sweep on the script's effects: (the sweep's calls as (eval set,
    sequence indices, heads), its rounds, what stopped them, the slices as index sets)."""
    corpus = build_corpus(llama, 6, 6, (6,), 8, 0, 512)
    parts = rounds(corpus, 3, 512, 0)
    script, calls = _script(), []

    def sweep(part: EvalCorpus, heads: list) -> None:
        calls.append((part.batches[0].eval_set, {it.index for it in part.items}, heads))

    state, stopped_by = sequential_sweep(
        parts, [(0, 0), (0, 1)], sweep, lambda: next(script), deadline, decide=decide
    )

    def slice_(r: int, eval_set: str = "loss_repeated") -> set[int]:
        return {it.index for it in parts[r].items if it.eval_set == eval_set}

    return calls, state, stopped_by, slice_, corpus


def test_a_head_that_waits_reads_the_slice_it_missed_later(llama):
    """Each head has its own read pointer: under a time budget, head 1 waits while head 0, near
    the rule, reads slice 1; then head 1 reads slice 1 too, not slice 2."""
    later = time.perf_counter() + 3600.0
    calls, state, stopped_by, slice_, corpus = _scripted_sweep(llama, deadline=later)
    assert calls == [(f, slice_(0, f), [(0, 0), (0, 1)]) for f in corpus.sizes] + [
        ("loss_repeated", slice_(1), [(0, 0)]),
        ("loss_repeated", slice_(1), [(0, 1)]),
    ]
    assert stopped_by == "rounds" and state.next_round == 3
    assert state.log == [dict.fromkeys(corpus.sizes, 2), {"loss_repeated": 1}, {"loss_repeated": 1}]
    assert state.cursors["loss_repeated"] == {(0, 0): 2, (0, 1): 2}
    assert state.cursors["loss_prose"] == {(0, 0): 1, (0, 1): 1}


def test_with_no_time_budget_every_open_head_reads_its_next_slice_at_once(llama):
    """No deadline (as under --precise): no head waits for another; the two share slice 1's
    sweep, and head 1, still open, reads slice 2 alone."""
    calls, state, stopped_by, slice_, corpus = _scripted_sweep(llama, deadline=None)
    assert calls == [(f, slice_(0, f), [(0, 0), (0, 1)]) for f in corpus.sizes] + [
        ("loss_repeated", slice_(1), [(0, 0), (0, 1)]),
        ("loss_repeated", slice_(2), [(0, 1)]),
    ]
    assert stopped_by == "rounds" and state.next_round == 3
    assert state.log == [dict.fromkeys(corpus.sizes, 2), {"loss_repeated": 2}, {"loss_repeated": 1}]
    assert state.cursors["loss_repeated"] == {(0, 0): 2, (0, 1): 3}


def test_past_the_decide_slices_only_a_decided_but_imprecise_effect_reads_on(llama, capsys):
    """decide = 1 (as --precise's 100): after slice 0, head 0 (above the tolerance, not yet
    precise: a finite need) reads slice 1; head 1, still undecided, stops, and its rows say
    ``rounds`` though it has slices left; the progress line says the cap stopped it."""
    calls, state, stopped_by, slice_, corpus = _scripted_sweep(llama, deadline=None, decide=1)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "loss_repeated 1 open, undecided ones stop at the cap" in last
    assert calls == [(f, slice_(0, f), [(0, 0), (0, 1)]) for f in corpus.sizes] + [
        ("loss_repeated", slice_(1), [(0, 0)]),
    ]
    assert stopped_by == "rounds" and state.next_round == 2
    assert state.cursors["loss_repeated"] == {(0, 0): 2, (0, 1): 1}
    parts = rounds(corpus, 3, 512, 0)
    assert ended_heads(parts, state.cursors) == {}  # neither read its eval set's last slice
    table = precision(
        _scripted([(0, 10.0, 0.5, "above"), (1, 5.0, 5.0, "undecided")]),
        stopped_by,
        0.1,
        ended_heads(parts, state.cursors),
    )
    assert table["precision"].tolist() == ["met", "rounds"]


def _reserve_sweep(llama, script, deadline, reserve, begun=None):
    """A sweep of head (0, 0) with ``reserve`` waiting: its calls as (eval set, sequence indices,
    heads), where it ended, and the first slice of each eval set as index sets."""
    corpus = build_corpus(llama, 6, 6, (6,), 8, 0, 512)
    parts = rounds(corpus, 3, 512, 0)
    calls = []

    def sweep(part: EvalCorpus, heads: list) -> None:
        calls.append((part.batches[0].eval_set, {it.index for it in part.items}, heads))

    effects = iter(script)
    state, stopped_by = sequential_sweep(
        parts, [(0, 0)], sweep, lambda: next(effects), deadline, begun=begun, reserve=reserve
    )
    first = {f: {it.index for it in parts[0].items if it.eval_set == f} for f in corpus.sizes}
    return calls, state, stopped_by, first


SETTLED = [(0, 10.0, 0.5, "above"), (1, 5.0, 0.1, "above"), (2, 4.0, 0.1, "above")]


def test_a_reserve_batch_joins_once_the_chosen_heads_have_nothing_left(llama):
    """Head 0 settles after round 0 with the budget not spent: the first reserve batch reads
    every eval set's first slice; the second would too, but every head is settled by then and
    the batches join one at a time."""
    script = [_scripted(SETTLED[:1]), _scripted(SETTLED[:2]), _scripted(SETTLED)]
    later = time.perf_counter() + 3600.0
    calls, state, stopped_by, first = _reserve_sweep(llama, script, later, [[(0, 1)], [(0, 2)]])
    assert calls == (
        [(f, first[f], [(0, 0)]) for f in first]
        + [(f, first[f], [(0, 1)]) for f in first]
        + [(f, first[f], [(0, 2)]) for f in first]
    )
    assert stopped_by == "rounds" and state.next_round == 3
    assert state.cursors["loss_repeated"] == {(0, 0): 1, (0, 1): 1, (0, 2): 1}


def test_no_reserve_joins_without_a_budget_or_after_it(llama):
    """With no deadline (nothing left unspent to fill) or one already passed, the reserve waits."""
    for deadline in (None, time.perf_counter() - 1.0):
        calls, state, _, first = _reserve_sweep(
            llama, [_scripted(SETTLED[:1])], deadline, [[(0, 1)]]
        )
        assert calls == [(f, first[f], [(0, 0)]) for f in first]
        assert state.cursors["loss_repeated"] == {(0, 0): 1}


def test_a_resumed_sweep_keeps_the_heads_that_joined_it(llama):
    """A sweep stopped after head 1 joined: resumed, head 1 is one of its heads (not offered
    again) and the next batch, head 2, joins."""
    read = {(0, 0): 1, (0, 1): 1}
    begun = Rounds(2, [{}, {}], {f: dict(read) for f in ("loss_prose", "loss_repeated")})
    script = [_scripted(SETTLED[:2]), _scripted(SETTLED)]
    later = time.perf_counter() + 3600.0
    calls, state, _, first = _reserve_sweep(llama, script, later, [[(0, 1), (0, 2)]], begun=begun)
    assert calls == [(f, first[f], [(0, 2)]) for f in first]
    assert state.cursors["loss_repeated"] == {(0, 0): 1, (0, 1): 1, (0, 2): 1}

"""--precise: exact rounds with no time budget until no effect is open, a line per round, and
effects whose eval set ran out of sequences saying so."""

from __future__ import annotations

import dataclasses
import re

import pandas as pd
import pytest
from small_sweep import SMALL_SWEEP

from interp.ablate.catalogue import eval_set_metrics
from interp.ablate.config import DEFAULT_BUDGET, DEFAULT_ROUNDS, PRECISE_ROUNDS
from interp.ablate.evaluation import build_corpus
from interp.ablate.sequential import (
    ended_heads,
    open_heads,
    precision,
    rounds,
    settled,
    slices_of,
)
from interp.ablate.stage import AblateConfig, ablate
from interp.pipeline.options import RunOptions

pytestmark = pytest.mark.usefixtures("one_thread")
BASE = SMALL_SWEEP
LINE = re.compile(r"ablate: round (\d+) after \d+ s: (.*)")


def sweep_of(config: AblateConfig) -> tuple[int, float | None]:
    used = config.resolved(270)
    return used.max_rounds, used.time_budget


def test_precise_lifts_the_budget_and_the_rounds_unless_the_user_set_them():
    assert sweep_of(AblateConfig()) == (DEFAULT_ROUNDS, DEFAULT_BUDGET)
    assert sweep_of(AblateConfig(precise=True)) == (PRECISE_ROUNDS, None)
    assert sweep_of(AblateConfig(precise=True, time_budget=5.0)) == (PRECISE_ROUNDS, 5.0)
    assert sweep_of(AblateConfig(precise=True, max_rounds=7)) == (7, None)
    # a budget equal to the default is the user's too
    assert sweep_of(AblateConfig(precise=True, time_budget=DEFAULT_BUDGET))[1] == DEFAULT_BUDGET
    # --quick sizes the rounds but leaves --precise without a budget; a budget given stays
    quick = RunOptions(quick=True, stages={"ablate": AblateConfig(precise=True)})
    assert sweep_of(quick.stage_config("ablate")) == (PRECISE_ROUNDS, None)
    given = RunOptions(
        quick=True,
        stages={"ablate": AblateConfig(precise=True, time_budget=90.0)},
        explicit=("ablate.precise", "ablate.time_budget"),
    )
    assert sweep_of(given.stage_config("ablate")) == (PRECISE_ROUNDS, 90.0)


def test_an_explicit_time_budget_stops_a_precise_sweep(llama):
    out = ablate(llama, dataclasses.replace(BASE, precise=True, time_budget=1e-9), progress=False)
    assert len(out.summary["rounds"]) == 1
    assert out.summary["resolved_config"]["max_rounds"] == PRECISE_ROUNDS
    exact = out.effects
    ok = settled(exact)
    assert (~ok).any() and (exact.loc[~ok, "precision"] == "budget").all()


def test_each_round_prints_the_heads_left_and_the_positions_read(llama, capsys):
    out = ablate(llama, dataclasses.replace(BASE, max_rounds=3), progress=True)
    lines = [m for m in map(LINE.match, capsys.readouterr().err.splitlines()) if m]
    assert [int(m[1]) for m in lines] == [r + 1 for r in range(len(out.summary["rounds"]))]
    each = r"(\w+) (\d+) open, (?:(\d+) next|no sequences left|undecided ones stop at the cap) \((\d+) positions\)"
    found = re.findall(each, lines[-1][2])
    assert {f for f, *_ in found} == set(out.summary["corpus"])
    exact = out.effects
    for eval_set, left, going, read in found:
        first = eval_set_metrics(eval_set)[0]
        assert int(left) == len(open_heads(exact, eval_set))
        assert int(going or 0) <= int(left)
        assert int(read) == exact.loc[exact["metric"] == first, "n_tokens"].max()


def test_a_precise_sweep_leaves_no_effect_open_without_saying_why(llama):
    out = ablate(llama, dataclasses.replace(BASE, precise=True), progress=False)
    exact = out.effects
    assert out.summary["resolved_config"]["time_budget"] is None
    assert set(exact["precision"]) <= {"met", "corpus", "rounds"}
    assert ((exact["precision"] == "met") == settled(exact)).all()
    # an effect stopped by the rounds read every slice: as many positions as any head of its metric
    most = exact.groupby("metric")["n_tokens"].transform("max")
    stopped = exact["precision"] == "rounds"
    assert (exact.loc[stopped, "n_tokens"] == most[stopped]).all()


def test_an_eval_set_that_runs_out_says_corpus(llama):
    corpus = build_corpus(llama, 6, 6, (6,), 8, 0, 512)
    # 18 prose lines asked over 3 rounds, 6 held: the prose is read in round 0 only
    parts = rounds(corpus, 3, 512, 0, asked={"loss_prose": 18})
    assert len(parts) == 3
    assert [any(it.eval_set == "loss_prose" for it in p.items) for p in parts] == [
        True,
        False,
        False,
    ]
    assert slices_of(parts) == {
        "loss_prose": [0],
        "loss_repeated": [0, 1, 2],
        "sv_logit_diff": [0, 1, 2],
    }
    # a head that read the prose's one slice ran out of corpus; one that read every slice of the
    # repeated tokens ran out of rounds; one with slices left has not ended
    cursors = {"loss_prose": {(0, 0): 1}, "loss_repeated": {(0, 0): 3, (0, 1): 2}}
    assert ended_heads(parts, cursors) == {
        ("loss_prose", (0, 0)): "corpus",
        ("loss_repeated", (0, 0)): "rounds",
    }
    rows = pd.DataFrame(
        {
            "delta": [1.0, 1.0, 1.0, 1.0],
            "ci_low": [0.95, 0.5, 0.5, 0.5],
            "ci_high": [1.05, 1.5, 1.5, 1.5],
            "vs_tolerance": "above",
            "metric": ["loss_prose", "loss_prose", "loss_repeated", "loss_repeated"],
            "ablation": "mean",
            "layer": 0,
            "head": [1, 0, 0, 1],
        }
    )
    marked = precision(rows, "budget", ended=ended_heads(parts, cursors))["precision"]
    assert marked.tolist() == ["met", "corpus", "rounds", "budget"]
    # an eval set that ran out before the rounds asked, with no other set to fill the later
    # rounds (an encoder's prose: those rounds are dropped), ran out of corpus, not of rounds
    assert ended_heads(parts, cursors, n_rounds=5) == {
        ("loss_prose", (0, 0)): "corpus",
        ("loss_repeated", (0, 0)): "corpus",
    }
    assert ended_heads(parts, cursors, n_rounds=3) == ended_heads(parts, cursors)


class Stop(KeyboardInterrupt):
    """Ctrl-C after a round: raised where the progress line is printed (the state is written)."""


def stop_after(monkeypatch, k: int) -> None:
    from interp.ablate import sequential

    line = sequential.round_line

    def interrupted(r, *args):
        if r + 1 == k:
            raise Stop
        return line(r, *args)

    monkeypatch.setattr(sequential, "round_line", interrupted)


RESUMED = dataclasses.replace(BASE, max_rounds=4, precision=0.02)


def test_a_stopped_sweep_resumed_gives_the_table_of_one_never_stopped(
    llama, tmp_path, monkeypatch, capsys
):
    from interp.ablate import round_state
    from interp.ablate.stage import run_stage
    from interp.pipeline import rundir

    (tmp_path / "whole").mkdir()
    whole = run_stage(tmp_path / "whole", llama, RESUMED, progress=False)
    assert len(whole.rounds) > 2  # the stop below falls inside the sweep
    tmp_path = tmp_path / "stopped"
    tmp_path.mkdir()
    with monkeypatch.context() as patch:
        stop_after(patch, 2)
        with pytest.raises(Stop):
            run_stage(tmp_path, llama, RESUMED, progress=False)
    assert (tmp_path / round_state.FILE).exists() and not (tmp_path / "effects.parquet").exists()
    capsys.readouterr()
    record = run_stage(tmp_path, llama, RESUMED, progress=False)
    lines = [m for m in map(LINE.match, capsys.readouterr().err.splitlines()) if m]
    assert int(lines[0][1]) == 3  # the resumed sweep starts at round 3, not again at 1
    assert not (tmp_path / round_state.FILE).exists()
    assert record.rounds == whole.rounds
    pd.testing.assert_frame_equal(
        rundir.read_table(tmp_path, "effects"),
        rundir.read_table(tmp_path.parent / "whole", "effects"),
        check_exact=True,
    )


def test_the_state_of_another_config_is_not_used(llama, tmp_path, monkeypatch, capsys):
    from interp.ablate import round_state
    from interp.ablate.stage import run_stage
    from interp.pipeline import rundir

    with monkeypatch.context() as patch:
        stop_after(patch, 1)
        with pytest.raises(Stop):
            run_stage(tmp_path, llama, RESUMED, progress=False)
    other = dataclasses.replace(RESUMED, n_bootstrap=RESUMED.n_bootstrap + 1)
    capsys.readouterr()
    record = run_stage(tmp_path, llama, other, progress=False)
    err = capsys.readouterr().err
    assert f"{round_state.FILE} is not used (another config, corpus or model)" in err
    (tmp_path / "fresh").mkdir()
    fresh = run_stage(tmp_path / "fresh", llama, other, progress=False)
    assert record.rounds == fresh.rounds
    pd.testing.assert_frame_equal(
        rundir.read_table(tmp_path, "effects"),
        rundir.read_table(tmp_path / "fresh", "effects"),
        check_exact=True,
    )


ESTIMATED = dataclasses.replace(RESUMED, attribution=True)


def test_a_resumed_sweep_keeps_the_estimate_of_the_stopped_run(
    llama, tmp_path, monkeypatch, capsys
):
    from interp.ablate import estimate, round_state
    from interp.ablate.stage import run_stage
    from interp.pipeline import rundir

    (tmp_path / "whole").mkdir()
    run_stage(tmp_path / "whole", llama, ESTIMATED, progress=False)
    stopped = tmp_path / "stopped"
    stopped.mkdir()
    with monkeypatch.context() as patch:
        stop_after(patch, 2)
        with pytest.raises(Stop):
            run_stage(stopped, llama, ESTIMATED, progress=False)
    assert (stopped / round_state.ESTIMATE_FILE).exists()
    capsys.readouterr()
    with monkeypatch.context() as patch:

        def again(*args, **kwargs):
            raise AssertionError("the kept estimate was computed again")

        patch.setattr(estimate, "estimator_rows", again)
        run_stage(stopped, llama, ESTIMATED, progress=False)
    err = capsys.readouterr().err
    assert (
        f"the attribution estimate of the stopped run is kept ({round_state.ESTIMATE_FILE})" in err
    )
    assert not (stopped / round_state.ESTIMATE_FILE).exists()
    assert not (stopped / round_state.FILE).exists()
    pd.testing.assert_frame_equal(
        rundir.read_table(stopped, "effects"),
        rundir.read_table(tmp_path / "whole", "effects"),
        check_exact=True,
    )


@pytest.mark.parametrize("damage", ["another config", "unreadable"])
def test_an_estimate_that_is_not_this_runs_is_estimated_again(
    llama, tmp_path, monkeypatch, capsys, damage
):
    from interp.ablate import round_state
    from interp.ablate.stage import run_stage
    from interp.pipeline import rundir

    with monkeypatch.context() as patch:
        stop_after(patch, 1)
        with pytest.raises(Stop):
            run_stage(tmp_path, llama, ESTIMATED, progress=False)
    config = ESTIMATED
    if damage == "another config":
        config = dataclasses.replace(ESTIMATED, n_bootstrap=ESTIMATED.n_bootstrap + 1)
    else:
        (tmp_path / round_state.ESTIMATE_FILE).write_bytes(b"not an archive")
    capsys.readouterr()
    run_stage(tmp_path, llama, config, progress=False)
    err = capsys.readouterr().err
    assert f"{round_state.ESTIMATE_FILE} is not used ({damage}" in err
    assert "the estimate runs again" in err
    (tmp_path / "fresh").mkdir()
    run_stage(tmp_path / "fresh", llama, config, progress=False)
    pd.testing.assert_frame_equal(
        rundir.read_table(tmp_path, "effects"),
        rundir.read_table(tmp_path / "fresh", "effects"),
        check_exact=True,
    )

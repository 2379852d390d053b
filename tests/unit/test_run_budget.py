"""A default ``interp run`` keeps to its 10 minutes on a slower machine: the exact rounds' budget
is counted from the run's start, and a budget the user gives stands."""

from __future__ import annotations

import dataclasses

import pytest
from small_sweep import SMALL_SWEEP
from tiny_models import tiny_llama

from interp.ablate.config import DEFAULT_BUDGET, exact_budget
from interp.pipeline import clock, rundir
from interp.pipeline.execute import run_pipeline
from interp.pipeline.options import RunOptions

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_budget_leaves_the_stages_after_the_rounds_their_share_of_the_target():
    assert exact_budget(300.0, None) == 300.0  # not a default run's rounds
    assert exact_budget(None, 100.0) is None  # no limit stays no limit
    assert exact_budget(300.0, 100.0) == 300.0  # 600 - 2.5 x 100 = 350 leaves the budget whole
    assert exact_budget(300.0, 150.0) == 225.0  # 600 - 2.5 x 150
    assert exact_budget(300.0, 400.0) == 0.0  # past the target: round 0 only


def test_the_clock_counts_each_run_from_its_own_start():
    assert clock.elapsed() is None
    with clock.run_started():
        outer = clock.elapsed()
        assert outer is not None and outer >= 0
        with clock.run_started():
            inner = clock.elapsed()
            assert inner is not None and inner <= clock.elapsed() + 1e-9
        assert clock.elapsed() >= outer
    assert clock.elapsed() is None


def _run(tmp_path, name: str, **ablate) -> dict:
    options = RunOptions(
        out_dir=str(tmp_path),
        run_name=name,
        skip=("collect", "weights", "classify", "report"),
        stages={"ablate": dataclasses.replace(SMALL_SWEEP, **ablate)},
    )
    run = run_pipeline(options, model=tiny_llama(), progress=False)
    return rundir.read_manifest(run)["stages"]["ablate"]


def test_a_run_late_on_its_clock_gives_the_rounds_what_is_left(tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(clock, "elapsed", lambda: 400.0)
    late = _run(tmp_path, "late")
    assert late["exact_budget"] == 0.0 and len(late["rounds"]) == 1
    assert late["resolved_config"]["time_budget"] == DEFAULT_BUDGET
    err = capfd.readouterr().err
    assert "ablate: the exact rounds get 0 s, not 300: the run has taken 400 s" in err
    given = _run(tmp_path, "given", time_budget=50.0)  # the user's budget is not shortened
    assert given["exact_budget"] == 50.0
    assert "exact rounds get" not in capfd.readouterr().err


def test_a_run_on_time_keeps_the_whole_budget(tmp_path):
    assert _run(tmp_path, "on-time")["exact_budget"] == DEFAULT_BUDGET

"""Same seed, model, corpus and thread count: identical tables, to the last bit (the whole default
run, twice); another thread count: within the stated tolerance; a run made again from its manifest
takes each stage's recorded thread count."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import torch
from tiny_models import save_tiny_llama, tiny_bert, tiny_llama

from interp import AblateConfig, CollectConfig, RunOptions
from interp.executors.threads import THREAD_ATOL, THREAD_RTOL
from interp.pipeline import rundir
from interp.pipeline.execute import options_from_manifest, run_pipeline

TABLES = ("features", "roles", "effects", "pruning")


@pytest.mark.parametrize("build", [tiny_llama, tiny_bert])
def test_two_runs_give_identical_tables(build, tmp_path, one_thread):
    options = RunOptions(
        out_dir=str(tmp_path), skip=("report",), stages={"ablate": AblateConfig(threads=1)}
    )
    runs = [
        run_pipeline(dataclasses.replace(options, run_name=name), model=build(), progress=False)
        for name in "ab"
    ]
    for table in TABLES:
        a, b = (pd.read_parquet(run / f"{table}.parquet") for run in runs)
        pd.testing.assert_frame_equal(a, b, check_exact=True, obj=table)
    assert torch.get_num_threads() == 1


def _run(build, out, name: str, threads: int | None, quick: bool = True):
    collect = CollectConfig(threads=threads, n_syntax=100, n_repeated=16, max_sentences=40)
    # 5 rounds end far within --quick's 35 s on a loaded machine: a time budget that ends the
    # rounds would make two runs read different slices, whatever their threads
    ablate = AblateConfig(
        threads=threads,
        n_prose=2,
        n_repeated=2,
        n_syntax=4,
        estimator_positions=0,
        max_rounds=5,
    )
    stages = {"collect": collect, "ablate": ablate}
    options = RunOptions(
        out_dir=str(out), run_name=name, quick=quick, skip=("report",), stages=stages
    )
    return run_pipeline(options, model=build(), progress=False)


def test_one_and_two_threads_agree_within_the_stated_tolerance(tmp_path):
    """The model's small matrix products round differently under 1 and 2 threads (in the 8th
    digit): the tables agree within THREAD_RTOL / THREAD_ATOL, and every label is the same."""
    one, two = (_run(tiny_llama, tmp_path, f"t{n}", n) for n in (1, 2))
    for table in TABLES:
        a, b = (pd.read_parquet(run / f"{table}.parquet") for run in (one, two))
        pd.testing.assert_frame_equal(a, b, rtol=THREAD_RTOL, atol=THREAD_ATOL, obj=table)
    records = [rundir.read_manifest(run)["stages"] for run in (one, two)]
    assert [r["collect"]["threads"] for r in records] == [r["ablate"]["threads"] for r in records]
    assert [r["ablate"]["threads"] for r in records] == [1, 2]


def test_a_run_made_again_from_its_manifest_takes_each_stages_thread_count(tmp_path):
    model_dir = save_tiny_llama(tmp_path / "tiny-llama")
    from interp.model.load import load_model

    run = _run(lambda: load_model(str(model_dir)), tmp_path / "runs", "auto", None)
    recorded = rundir.read_manifest(run)["stages"]
    again = options_from_manifest(run)
    for stage in ("collect", "ablate"):
        assert again.stages[stage].threads == recorded[stage]["threads"] >= 1

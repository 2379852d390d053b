"""Same seed, model and corpus: identical tables, to the last bit (the whole default run, twice)."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import torch
from tiny_models import tiny_bert, tiny_llama

from interp import AblateConfig, RunOptions
from interp.pipeline.execute import run_pipeline

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

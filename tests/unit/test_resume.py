"""What `interp run --resume` redoes: the registry-driven stage loop, with stand-in stages."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import interp.classify.stage
import interp.collect.stage
from interp import CollectConfig, RunOptions
from interp.pipeline import rundir
from interp.pipeline.contract import StageRecord
from interp.pipeline.execute import run_stages
from interp.pipeline.stages import stage
from interp.pipeline.tables import TABLES


@pytest.fixture
def calls(monkeypatch):
    """Replace collect and classify by stand-ins that write their outputs like the real ones."""
    made: list[str] = []

    def fake(name):
        def run_stage(run_dir, model, config, progress=True):
            made.append(name)
            for table in stage(name).tables:
                rundir.write_table(run_dir, table, one_row(table))
            if name == "collect":
                np.savez(
                    run_dir / "feature_replicates.npz",
                    values=np.zeros((2, 1, 1, 1)),
                    names=np.array(["x"]),
                )
                np.savez(run_dir / "exemplars.npz", values=np.zeros(1))
            return StageRecord()

        return run_stage

    monkeypatch.setattr(interp.collect.stage, "run_stage", fake("collect"))
    monkeypatch.setattr(interp.classify.stage, "run_stage", fake("classify"))
    return made


def one_row(table: str) -> pd.DataFrame:
    """A valid one-row table: every declared column, a value of its type."""
    sample = {"int": 0, "float": 0.5, "str": "x"}
    return pd.DataFrame({c.name: [sample[c.dtype]] for c in TABLES[table].columns})


MODEL = object()  # the stand-in collect is handed a model, as the real one is


def run(run_dir, resume, **options):
    return run_stages(
        run_dir,
        model=MODEL,
        progress=False,
        options=RunOptions(skip=("weights", "ablate", "report"), resume=resume, stages=options),
    )


def test_resume_skips_finished_stages(tmp_path, calls):
    rundir.write_manifest(tmp_path, {"stages": {}})
    assert run(tmp_path, resume=False) == ["collect", "classify"]
    assert run(tmp_path, resume=True) == []
    assert calls == ["collect", "classify"]


def test_resume_collects_again_under_another_features_version_and_then_reclassifies(
    tmp_path, calls
):
    rundir.write_manifest(tmp_path, {"stages": {}})
    run(tmp_path, resume=False)
    manifest = rundir.read_manifest(tmp_path)
    manifest["stages"]["collect"]["config"]["features_version"] = (
        1  # as a run made under older features
    )
    rundir.write_manifest(tmp_path, manifest)
    # classify's own config did not change, but the roles it wrote came from the old features
    assert run(tmp_path, resume=True) == ["collect", "classify"]


def test_resume_redoes_a_stage_whose_outputs_are_gone(tmp_path, calls):
    rundir.write_manifest(tmp_path, {"stages": {}})
    run(tmp_path, resume=False)
    (tmp_path / "roles.parquet").unlink()
    assert run(tmp_path, resume=True) == ["classify"]


def test_resume_redoes_a_stage_whose_config_changed(tmp_path, calls):
    rundir.write_manifest(tmp_path, {"stages": {}})
    run(tmp_path, resume=False)
    assert run(
        tmp_path, resume=True, collect=dataclasses.replace(CollectConfig(), n_syntax=10)
    ) == ["collect", "classify"]


def test_skip_leaves_a_stage_out(tmp_path, calls):
    rundir.write_manifest(tmp_path, {"stages": {}})
    run_stages(
        tmp_path,
        model=MODEL,
        progress=False,
        options=RunOptions(skip=("collect", "weights", "ablate", "report")),
    )
    assert calls == ["classify"]

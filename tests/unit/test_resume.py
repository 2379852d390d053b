"""What `interp run --resume` redoes: the stage logic of interp.pipeline, with stand-in stages."""

from __future__ import annotations

import pytest

import interp.classify
import interp.pipeline as pipeline
from interp import rundir
from interp.features import FEATURES_VERSION
from interp.pipeline import RunOptions, run_stages


@pytest.fixture
def calls(monkeypatch):
    """Replace collect and classify by stand-ins that record themselves like the real ones."""
    made: list[str] = []

    def collect_stage(run_dir, model, config, progress=True):
        made.append("collect")
        rundir.record_stage(run_dir, "collect", config, 0.0, features_version=FEATURES_VERSION)

    def classify_run(run_dir, config):
        made.append("classify")
        rundir.record_stage(run_dir, "classify", config, 0.0)

    monkeypatch.setattr(pipeline, "collect_stage", collect_stage)
    monkeypatch.setattr(interp.classify, "classify_run", classify_run)
    return made


def run(run_dir, resume):
    run_stages(run_dir, model=None, options=RunOptions(stages=("collect", "classify"), resume=resume), progress=False)


def test_resume_skips_finished_stages(tmp_path, calls):
    rundir.write_manifest(tmp_path, {"stages": {}})
    run(tmp_path, resume=False)
    run(tmp_path, resume=True)
    assert calls == ["collect", "classify"]


def test_resume_collects_again_under_another_features_version_and_then_reclassifies(tmp_path, calls):
    rundir.write_manifest(tmp_path, {"stages": {}})
    run(tmp_path, resume=False)
    manifest = rundir.read_manifest(tmp_path)
    del manifest["stages"]["collect"]["features_version"]  # as a run made before versions were recorded
    rundir.write_manifest(tmp_path, manifest)
    run(tmp_path, resume=True)
    # classify's own config did not change, but the roles it wrote came from the old features
    assert calls == ["collect", "classify", "collect", "classify"]
    assert rundir.read_manifest(tmp_path)["stages"]["collect"]["features_version"] == FEATURES_VERSION

"""The whole job: load -> collect -> classify -> ablate -> report, in one run directory.

Each stage writes its tables atomically and then records itself in the manifest, so an
interrupted run keeps every finished stage and ``--resume`` skips the stages whose config has
not changed. A run that fails before any stage finished leaves no directory behind.
"""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from interp import rundir
from interp.collect import CollectResult, collect
from interp.config import CollectConfig, ModelSpec
from interp.errors import RunError
from interp.features import FEATURES_VERSION
from interp.models import LoadedModel, load_model

QUICK_COLLECT = dict(n_repeated=32, n_syntax=300, max_sentences=120, n_bootstrap=100)


@dataclass(frozen=True)
class RunOptions:
    """What ``interp run`` does; each stage's own config is derived from it."""

    model: ModelSpec = field(default_factory=ModelSpec)
    collect: CollectConfig = field(default_factory=CollectConfig)
    out_dir: str = "reports"
    run_name: str | None = None
    quick: bool = False
    stages: tuple[str, ...] = ("collect", "classify", "ablate", "report")
    resume: bool = False

    def __post_init__(self) -> None:
        unknown = set(self.stages) - {"collect", "classify", "ablate", "report"}
        if unknown:
            raise ValueError(f"unknown stages {sorted(unknown)}")


def quick_collect(config: CollectConfig) -> CollectConfig:
    """A smaller probe set for --quick: the same features on fewer sequences."""
    return dataclasses.replace(config, **QUICK_COLLECT)


def collect_stage(run_dir: Path, model: LoadedModel, config: CollectConfig, progress: bool = True) -> CollectResult:
    """Collect features and write features, replicates, exemplars and corpus facts into the run."""
    from interp.exemplars import gather

    start = time.perf_counter()
    result = collect(model, config, progress=progress)
    rundir.write_table(run_dir, "features", result.features)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, values=result.replicates.astype(np.float32), names=np.array(result.names))
    rundir.write_bytes(run_dir / "feature_replicates.npz", buffer.getvalue())
    rundir.write_text(run_dir / "exemplars.json", json.dumps(gather(model, result.features, result.sequences)))
    manifest = rundir.read_manifest(run_dir)
    manifest["corpora"] = result.corpora
    rundir.write_manifest(run_dir, manifest)
    rundir.record_stage(run_dir, "collect", config, time.perf_counter() - start, features_version=FEATURES_VERSION)
    return result


def start_run(options: RunOptions, model: LoadedModel) -> tuple[Path, bool]:
    """Create the run directory and its manifest; returns (path, created_now)."""
    target = Path(options.out_dir).expanduser() / model.slug / (options.run_name or "")
    existed = options.run_name is not None and target.exists()
    if existed and not options.resume and (target / rundir.MANIFEST).exists():
        raise RunError(f"run {target} exists: pass --resume to continue it or --name for a new one")
    run_dir = rundir.prepare_run_dir(options.out_dir, model.slug, options.run_name)
    if not (options.resume and (run_dir / rundir.MANIFEST).exists()):
        rundir.write_manifest(run_dir, {
            "model": model.facts(), "provenance": rundir.provenance(options.collect.seed),
            "options": rundir._jsonable(options), "stages": {},
        })
    return run_dir, not existed


def run(options: RunOptions = RunOptions(), model: LoadedModel | None = None, progress: bool = True) -> Path:
    """Run every stage; return the run directory."""
    rundir.check_out_dir(options.out_dir)
    model = model or load_model(options.model)
    run_dir, created = start_run(options, model)
    try:
        run_stages(run_dir, model, options, progress)
    except BaseException:
        if created and not rundir.read_manifest(run_dir).get("stages"):
            shutil.rmtree(run_dir, ignore_errors=True)  # nothing finished: leave nothing behind
        raise
    return run_dir


def run_stages(run_dir: Path, model: LoadedModel, options: RunOptions, progress: bool) -> None:
    collect_cfg = quick_collect(options.collect) if options.quick else options.collect
    collected = False  # new features: roles from earlier ones are stale, even under --resume
    if "collect" in options.stages and not (
            options.resume and rundir.stage_done(run_dir, "collect", collect_cfg, features_version=FEATURES_VERSION)):
        collect_stage(run_dir, model, collect_cfg, progress)
        collected = True
    if "classify" in options.stages:
        from interp.classify import ClassifyConfig, classify_run

        cfg = ClassifyConfig()
        if collected or not (options.resume and rundir.stage_done(run_dir, "classify", cfg)):
            classify_run(run_dir, cfg)
    if "ablate" in options.stages:
        from interp.ablate import AblateConfig, ablate_run

        cfg = AblateConfig(quick=options.quick, seed=options.collect.seed)
        if not (options.resume and rundir.stage_done(run_dir, "ablate", cfg)):
            ablate_run(run_dir, model, cfg, progress=progress)
    if "report" in options.stages:
        from interp.report.html import build_report

        start = time.perf_counter()
        build_report(run_dir)
        rundir.record_stage(run_dir, "report", {}, time.perf_counter() - start)


def model_spec_of(run_dir: Path) -> ModelSpec:
    """The model a run was made with, to rerun one of its stages."""
    facts: dict[str, Any] = rundir.read_manifest(run_dir).get("model", {})
    if "name" not in facts:
        raise RunError(f"{run_dir}/manifest.json names no model; rerun `interp run`")
    return ModelSpec(name=facts["name"], device=facts.get("device", "cpu"), dtype=facts.get("dtype", "float32"))

"""The whole job, stage after stage from the registry (:mod:`interp.stages`), in one run directory.

Each stage writes its outputs atomically and then records itself in the manifest, so an
interrupted run keeps every finished stage, and ``--resume`` skips a stage whose recorded
config matches and whose outputs are on disk, unless a stage it reads from ran again. A run
that fails before any stage finished leaves no directory behind.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp import rundir
from interp.config import ModelSpec, RunOptions
from interp.errors import RunError
from interp.stages import STAGES, stage

if TYPE_CHECKING:  # the model stack loads only when a stage needs it (a report never does)
    from interp.models import LoadedModel


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
            "options": rundir.jsonable(options), "stages": {},
        })
    return run_dir, not existed


def run_pipeline(options: RunOptions = RunOptions(), model: LoadedModel | None = None, progress: bool = True) -> Path:
    """Run every stage the options ask for; return the run directory."""
    from interp.models import load_model

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


def run_stages(run_dir: Path, model: LoadedModel | None, options: RunOptions, progress: bool) -> list[str]:
    """Run the registry's stages in order (skipping ``options.skip``); return the names that ran.

    Under ``resume`` a finished stage is skipped unless a stage it reads from ran again now:
    roles classified from older features are stale even if classify's own config is unchanged.
    """
    ran: list[str] = []
    for st in STAGES:
        if st.name in options.skip:
            continue
        config = options.stage_config(st.name)
        if options.resume and st.done(run_dir, config) and not set(st.reads) & set(ran):
            continue
        st.run(run_dir, model, config, progress)
        ran.append(st.name)
    return ran


def rerun_stage(run_dir: str | Path, name: str, config: Any = None, model: LoadedModel | None = None,
                dtype: str | None = None, progress: bool = True) -> None:
    """Run one stage again on an existing run (``interp classify RUN_DIR`` and the like).

    A stage that needs the model loads the one the run recorded (``dtype`` overrides its dtype)
    unless ``model`` is given.
    """
    run_dir = Path(run_dir)
    rundir.read_manifest(run_dir)  # fail now, not after loading a model, if it is no run
    st = stage(name)
    config = st.config() if config is None else config
    if st.needs_model and model is None:
        from interp.models import load_model

        spec = model_spec_of(run_dir)
        model = load_model(dataclasses.replace(spec, dtype=dtype) if dtype else spec)
    st.run(run_dir, model, config, progress)


def model_spec_of(run_dir: Path) -> ModelSpec:
    """The model a run was made with, to rerun one of its stages."""
    facts: dict[str, Any] = rundir.read_manifest(run_dir).get("model", {})
    if "name" not in facts:
        raise RunError(f"{run_dir}/manifest.json names no model; rerun `interp run`")
    return ModelSpec(name=facts["name"], device=facts.get("device", "cpu"), dtype=facts.get("dtype", "float32"))

"""The ordered registry of pipeline stages: what ``interp run``, ``--skip``, ``--resume`` and the
stage commands (``interp collect|classify|ablate|report RUN_DIR``) all read.

A stage is one module with a config dataclass (in :mod:`interp.config`), a pure function on a
model and/or DataFrames, a ``write(run_dir, result)`` step, and ``run_stage(run_dir, model,
config, progress)``, which reads what it needs from the run directory, computes, writes, and
returns what the manifest should record beside its config. The registry names that entry
point as ``"module:function"`` and imports it only when the stage runs: building a report
from stored tables never imports torch, and ``interp --help`` starts in a fraction of a second.

Adding a stage is adding its module and one line to :data:`STAGES`.
"""

from __future__ import annotations

import importlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from interp import rundir
from interp.config import AblateConfig, ClassifyConfig, CollectConfig, ReportConfig


@dataclass(frozen=True)
class Stage:
    """One step of the pipeline.

    name: the command and the manifest key.
    summary: one line for ``--help``.
    config: its config dataclass.
    entry: ``"module:function"``, the stage's ``run_stage(run_dir, model, config, progress) -> dict``.
    needs_model: whether it runs the model (the others read tables only).
    reads: earlier stages whose outputs it reads: when one of them runs again, so does this one.
    outputs: files it writes that must exist (and be non-empty) for the stage to count as done.
    """

    name: str
    summary: str
    config: type
    entry: str
    needs_model: bool = False
    reads: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()

    def function(self) -> Callable[..., dict[str, Any]]:
        module, _, attr = self.entry.partition(":")
        return getattr(importlib.import_module(module), attr)

    def run(self, run_dir: Path, model: Any, config: Any, progress: bool = True) -> None:
        """Run the stage on a run directory, then record it (config, time, what it returned)."""
        start = time.perf_counter()
        recorded = self.function()(Path(run_dir), model, config, progress) or {}
        rundir.record_stage(run_dir, self.name, config, time.perf_counter() - start, **recorded)

    def done(self, run_dir: Path, config: Any) -> bool:
        """True when the manifest records this stage with the same config and its outputs are there."""
        try:
            entry = rundir.read_manifest(run_dir).get("stages", {}).get(self.name)
        except rundir.RunError:
            return False
        if not isinstance(entry, dict) or entry.get("config") != json.loads(json.dumps(rundir.jsonable(config))):
            return False
        return all(_present(Path(run_dir) / name) for name in self.outputs)


def _present(path: Path) -> bool:
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


STAGES: tuple[Stage, ...] = (
    Stage("collect", "Gather every head's attention features over the probe suites (writes features).",
          CollectConfig, "interp.collect:run_stage", needs_model=True,
          outputs=("features.parquet", "feature_replicates.npz", "exemplars.npz")),
    Stage("classify", "Label every head with a role (writes roles, clusters).",
          ClassifyConfig, "interp.classify:run_stage", reads=("collect",), outputs=("roles.parquet",)),
    Stage("ablate", "Measure each head's causal effect (writes effects, pruning).",
          AblateConfig, "interp.ablate:run_stage", needs_model=True, outputs=("effects.parquet", "pruning.parquet")),
    Stage("report", "Build figures, report.html and report.pdf from the run's tables.",
          ReportConfig, "interp.report.stage:run_stage", reads=("collect", "classify", "ablate"),
          outputs=("report.html",)),
)
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)


def stage(name: str) -> Stage:
    for s in STAGES:
        if s.name == name:
            return s
    raise ValueError(f"unknown stage {name!r}; stages are {', '.join(STAGE_NAMES)}")

"""The ordered registry of pipeline stages: what ``interp run``, ``--skip``, ``--resume`` and the
stage commands (``interp collect|classify|ablate|report RUN_DIR``) all read.

A stage is one package with a config (a :func:`interp.config.config` dataclass in its
``config.py``), a pure function on a model and/or DataFrames, a ``write(run_dir, result)`` step,
and ``run_stage(run_dir, model, config, progress)``, which reads what it needs from the run
directory, computes, writes, and returns what the manifest should record beside its config. The
registry holds the config class and names the entry point as ``"module:function"``, imported
only when the stage runs: building a report from stored tables never imports torch, and
``interp --help`` starts in a fraction of a second.

Adding a stage is adding its package and one :func:`register` line (below, or in your own code
before the CLI is built): ``interp run``, ``--skip``, ``--resume``, its stage command with an
option per config field, the manifest and :func:`interp.load_run` all read the registry.
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp.ablate.config import AblateConfig
from interp.classify.config import ClassifyConfig
from interp.collect.config import CollectConfig
from interp.config import StageConfig, file_fields, without_placement
from interp.pipeline import rundir
from interp.pipeline.provenance import file_hash
from interp.report.config import ReportConfig


@dataclass(frozen=True)
class Stage:
    """One step of the pipeline.

    name: the command and the manifest key.
    summary: one line for ``--help``.
    config: its config dataclass.
    entry: ``"module:function"``, the stage's ``run_stage(run_dir, model, config, progress) -> dict``.
    needs_model: whether it runs the model (the others read tables only).
    reads: earlier stages whose outputs it reads: when one of them runs again, so does this one.
    outputs: files it writes that must exist and read back for the stage to count as done.
    check: ``"module:function"`` reading the user files the config names, called with the config
        before the model loads, so that a bad file fails first (None: nothing to check).
    """

    name: str
    summary: str
    config: type
    entry: str
    needs_model: bool = False
    reads: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    check: str | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.config, type) and issubclass(self.config, StageConfig)):
            raise TypeError(
                f"stage {self.name!r}: its config must subclass interp.config.StageConfig"
            )

    def function(self) -> Callable[..., dict[str, Any]]:
        return _resolve(self.entry)

    def checker(self) -> Callable[[Any], None]:
        return _resolve(self.check) if self.check else (lambda config: None)

    def run(
        self,
        run_dir: Path,
        model: Any,
        config: Any,
        progress: bool = True,
        inputs: dict[str, Any] | None = None,
    ) -> None:
        """Run the stage on a run directory, then record it: config, time, what it returned, its
        ``inputs`` (content hashes, see :meth:`inputs`) and the ids of the records it read, taken
        at its start (the records it reads from, not whatever they are when it ends).

        Its old record goes at its first write (:func:`rundir.stage_writes`): a stage stopped
        half-way (a signal, a crash) never counts as done, although an older version of its
        outputs may still be on disk; a stage that fails before writing leaves the run as it was.
        """
        after = self._upstream_ids(run_dir)
        start = time.perf_counter()
        with rundir.stage_writes(run_dir, self.name):
            recorded = self.function()(Path(run_dir), model, config, progress) or {}
        rundir.record_stage(
            run_dir,
            self.name,
            config,
            time.perf_counter() - start,
            inputs=inputs or {},
            after=after,
            **recorded,
        )

    def done(self, run_dir: Path, config: Any, inputs: dict[str, Any] | None = None) -> bool:
        """True when the manifest records this stage with the same config (placement fields
        aside: where the work ran) and inputs (not compared when None), after the current runs
        of the stages it reads, and its outputs are on disk and readable."""
        try:
            entry = rundir.read_manifest(run_dir).get("stages", {}).get(self.name)
        except rundir.RunError:
            return False
        if not isinstance(entry, dict) or (
            without_placement(self.config, entry.get("config"))
            != without_placement(self.config, _json(config))
        ):
            return False
        if inputs is not None and entry.get("inputs", {}) != _json(inputs):
            return False
        if entry.get("after") != self._upstream_ids(run_dir):
            return False
        return all(_readable(Path(run_dir) / name) for name in self.outputs)

    def inputs(self, config: Any, model_hash: str | None) -> dict[str, Any]:
        """Content hashes of what the stage reads besides its config and earlier stages: the
        model's files (stages that run it) and the files the config names (corpora, a reference
        model). A path whose content changed makes the stage count as not done."""
        found: dict[str, Any] = {"model": model_hash} if self.needs_model else {}
        paths = file_fields(config)
        hashes = {}
        for path in paths:
            try:
                hashes[str(path)] = file_hash(path)
            except OSError:
                hashes[str(path)] = None  # missing now: reading it will say so
        if hashes:
            found["files"] = hashes
        return found

    def _upstream_ids(self, run_dir: Path) -> dict[str, str | None]:
        stages = rundir.read_manifest(run_dir).get("stages", {})
        return {name: (stages.get(name) or {}).get("id") for name in self.reads}


def _resolve(entry: str) -> Callable[..., Any]:
    module, _, attr = entry.partition(":")
    return getattr(importlib.import_module(module), attr)


def _json(obj: Any) -> Any:
    return json.loads(json.dumps(rundir.jsonable(obj)))


def _readable(path: Path) -> bool:
    """A stage output counts only if it can be read back: a declared table that validates, an
    array archive that opens, any other file non-empty."""
    try:
        if not (path.is_file() and path.stat().st_size > 0):
            return False
        if path.suffix == ".parquet":
            return rundir.read_table(path.parent, path.stem) is not None
        if path.suffix == ".npz":
            import numpy as np

            with np.load(path, allow_pickle=False) as archive:
                return len(archive.files) > 0 and all(
                    archive[k].dtype != object for k in archive.files
                )
        return True
    except Exception:  # noqa: BLE001  (whatever stops it from reading back: it is not done)
        return False


STAGES: list[Stage] = []


def register(new: Stage, after: str | None = None) -> Stage:
    """Add a stage to the registry: at the end, or right after the stage named ``after``."""
    if any(s.name == new.name for s in STAGES):
        raise ValueError(f"a stage named {new.name!r} is registered already")
    where = len(STAGES) if after is None else [s.name for s in STAGES].index(after) + 1
    STAGES.insert(where, new)
    return new


def unregister(name: str) -> None:
    STAGES.remove(stage(name))


def stage_names() -> tuple[str, ...]:
    return tuple(s.name for s in STAGES)


def stage(name: str) -> Stage:
    for s in STAGES:
        if s.name == name:
            return s
    raise ValueError(f"unknown stage {name!r}; stages are {', '.join(stage_names())}")


register(
    Stage(
        "collect",
        "Gather every head's attention features over the probe suites (writes features, syntax).",
        CollectConfig,
        "interp.collect.stage:run_stage",
        needs_model=True,
        check="interp.collect.stage:check_inputs",
        outputs=("features.parquet", "syntax.parquet", "feature_replicates.npz", "exemplars.npz"),
    )
)
register(
    Stage(
        "classify",
        "Label every head with a role (writes roles, clusters).",
        ClassifyConfig,
        "interp.classify.stage:run_stage",
        reads=("collect",),
        outputs=("roles.parquet",),
        check="interp.classify.stage:check_inputs",
    )
)
register(
    Stage(
        "ablate",
        "Measure each head's causal effect (writes effects, pruning).",
        AblateConfig,
        "interp.ablate.stage:run_stage",
        needs_model=True,
        check="interp.ablate.stage:check_inputs",
        outputs=("effects.parquet", "pruning.parquet"),
    )
)
register(
    Stage(
        "report",
        "Build figures, report.html and report.pdf from the run's tables.",
        ReportConfig,
        "interp.report.stage:run_stage",
        reads=("collect", "classify", "ablate"),
        outputs=("report.html",),
    )
)

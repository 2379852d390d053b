"""The stage contract: what a stage declares, what it returns, and how the pipeline runs and
records it.

A stage is one package. Its ``__init__.py`` declares ``STAGE = Stage(...)``: its name, its config
(a :class:`~interp.config.StageConfig`), its entry point, whether it runs the model, the stages
whose outputs it reads, the tables it writes (declared in the one schema,
``interp/pipeline/tables.tsv``), its other output files, and its sections of the report. The
entry point is ``run_stage(run_dir, model, config, progress) -> StageRecord``: it reads what it
needs from the run directory, calls the stage's pure function (a model and/or DataFrames in, a
result out), writes the result, and returns the record the manifest keeps beside what the
pipeline records itself (:data:`RESERVED`). The registry (:mod:`interp.pipeline.stages`) lists the
stage packages in order.

Entry points, checks and report sections are named as ``"module:function"`` and imported only
when used: building a report from stored tables never imports torch, and ``interp --help``
starts in a fraction of a second.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from interp.config import StageConfig, file_fields, without_placement
from interp.pipeline import rundir
from interp.pipeline.provenance import file_hash
from interp.pipeline.tables import TABLES, Table

if TYPE_CHECKING:  # the model stack loads only when a stage runs the model
    from interp.model.load import LoadedModel

# What the pipeline records about every stage run: a stage's own record cannot overwrite these.
RESERVED = ("config", "seconds", "id", "finished", "inputs", "after")
# ``reads`` of a stage that reads every other stage's outputs (the report): it runs again
# whenever any of them ran since.
EVERY_STAGE = ("*",)


@dataclass(frozen=True)
class StageRecord:
    """What a stage's run adds to its manifest record (``stages.<name>``), beside what the pipeline
    records itself (:data:`RESERVED`: its config, time, id, finish time, input hashes and the ids
    of the stages it read). A stage's record subclasses this with its own fields, each a value
    JSON can hold; a field named as one of the pipeline's is refused."""

    def __post_init__(self) -> None:
        taken = [f.name for f in dataclasses.fields(self) if f.name in RESERVED]
        if taken:
            raise TypeError(
                f"{type(self).__name__} has fields the pipeline records itself: {', '.join(taken)}"
            )

    def fields(self) -> dict[str, Any]:
        """The record's fields, in declaration order."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


class StageFunction(Protocol):
    """A stage's entry point. ``model`` is None for a stage that does not run the model (the
    pipeline loads one for every stage declared ``needs_model``)."""

    def __call__(
        self, run_dir: Path, model: LoadedModel | None, config: Any, progress: bool
    ) -> StageRecord: ...


def loaded(model: LoadedModel | None, stage: str) -> LoadedModel:
    """The model handed to a stage declared ``needs_model`` (refused when there is none)."""
    if model is None:
        raise TypeError(f"the {stage} stage runs the model: pass a loaded model")
    return model


@dataclass(frozen=True)
class ReportSection:
    """A section a stage adds to the report.

    id: the section's anchor (unique over the report).
    entry: ``"module:function"``, a function ``(run: RunTables, figures: Path) ->
        interp.report.content.Section | None`` that draws its figures into ``figures`` and
        returns the section (None: nothing to show for this run). Its module must not import
        torch: the report reads tables only.
    after: the id of the section it follows (the report's own first section is ``summary``);
        None: it follows the stage's previous section (the stage's first: the summary, after the
        sections that follow it already). The report's own ``heads`` and ``provenance`` close it.
    """

    id: str
    entry: str
    after: str | None = None

    def builder(self) -> Callable[..., Any]:
        return resolve(self.entry)


@dataclass(frozen=True)
class Stage:
    """One step of the pipeline.

    name: the command and the manifest key.
    summary: one line for ``--help`` (the tables and files it writes are added to it).
    config: its config class (a :class:`~interp.config.StageConfig`).
    entry: ``"module:function"``, its :class:`StageFunction`.
    needs_model: whether it runs the model (the others read tables only).
    reads: earlier stages whose outputs it reads: when one of them runs again, so does this one
        (:data:`EVERY_STAGE`: all the others).
    tables: the tables it writes on every run (declared in ``tables.tsv``); each must read back
        for the stage to count as done.
    optional_tables: the tables it writes only on some runs (declared there too).
    files: its other outputs (arrays, pages); each must read back for the stage to count as done.
    sections: its sections of the report.
    schema: the tables of a stage outside interp, which are not in ``tables.tsv`` (its own file
        in that form, read with :func:`~interp.pipeline.tables.read_schema`): declared when the
        stage is registered, dropped when it is unregistered.
    check: ``"module:function"`` reading the user files the config names, called with the config
        before the model loads, so that a bad file fails first (None: nothing to check).
    """

    name: str
    summary: str
    config: type[StageConfig]
    entry: str
    needs_model: bool = False
    reads: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    optional_tables: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    sections: tuple[ReportSection, ...] = ()
    schema: tuple[Table, ...] = ()
    check: str | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.config, type) and issubclass(self.config, StageConfig)):
            raise TypeError(
                f"stage {self.name!r}: its config must subclass interp.config.StageConfig"
            )
        own = {t.name for t in self.schema}
        unknown = [
            t for t in self.tables + self.optional_tables if t not in TABLES and t not in own
        ]
        if unknown:
            raise ValueError(
                f"stage {self.name!r} writes tables the schema does not declare: "
                f"{', '.join(unknown)} (add them to interp/pipeline/tables.tsv)"
            )

    @property
    def outputs(self) -> tuple[str, ...]:
        """The files that must read back for the stage to count as done."""
        return (*(f"{t}.parquet" for t in self.tables), *self.files)

    @property
    def writes(self) -> tuple[str, ...]:
        """Everything it may write, tables by name: for help texts and the docs."""
        return (*self.tables, *self.optional_tables, *self.files)

    def function(self) -> StageFunction:
        return resolve(self.entry)

    def checker(self) -> Callable[[Any], None]:
        return resolve(self.check) if self.check else (lambda config: None)

    def run(
        self,
        run_dir: Path,
        model: LoadedModel | None,
        config: StageConfig,
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
        if self.needs_model:
            loaded(model, self.name)
        after = self._upstream_ids(run_dir)
        start = time.perf_counter()
        with rundir.stage_writes(run_dir, self.name):
            record = self.function()(Path(run_dir), model, config, progress)
        if not isinstance(record, StageRecord):
            raise TypeError(f"{self.entry} returned a {type(record).__name__}, not a StageRecord")
        rundir.record_stage(
            run_dir,
            self.name,
            config,
            time.perf_counter() - start,
            inputs=inputs or {},
            after=after,
            **record.fields(),
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
        hashes: dict[str, str | None] = {}
        for path in file_fields(config):
            try:
                hashes[str(path)] = file_hash(path)
            except OSError:
                hashes[str(path)] = None  # missing now: reading it will say so
        if hashes:
            found["files"] = hashes
        return found

    def reads_stage(self, name: str) -> bool:
        """Whether this stage reads the outputs of the stage ``name``."""
        return name != self.name and (self.reads == EVERY_STAGE or name in self.reads)

    def _upstream_ids(self, run_dir: Path) -> dict[str, str | None]:
        stages = rundir.read_manifest(run_dir).get("stages", {})
        names = (
            [n for n in stages if self.reads_stage(n)] if self.reads == EVERY_STAGE else self.reads
        )
        return {name: (stages.get(name) or {}).get("id") for name in names}


def resolve(entry: str) -> Any:
    """The object an entry point names: ``"package.module:name"``."""
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
            with np.load(path, allow_pickle=False) as archive:
                return len(archive.files) > 0 and all(
                    archive[k].dtype != object for k in archive.files
                )
        return True
    except Exception:  # noqa: BLE001  (whatever stops it from reading back: it is not done)
        return False

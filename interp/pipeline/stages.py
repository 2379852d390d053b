"""The ordered registry of pipeline stages: what ``interp run``, ``--skip``, ``--resume``, the
stage commands (``interp collect|classify|ablate|report RUN_DIR``), the manifest,
:func:`interp.load_run`, the report and the docs all read.

Each stage declares itself in its package (``STAGE`` in its ``__init__.py``, see
:mod:`interp.pipeline.contract`); :data:`BUILT_IN` lists the packages in pipeline order. Adding a
built-in stage is its package and one line there; a stage of your own is its package and one
:func:`register` call (before the command line is built).
"""

from __future__ import annotations

import importlib

from interp.pipeline.contract import Stage
from interp.pipeline.tables import declare, undeclare

# The built-in stages' packages, in the order they run.
BUILT_IN = (
    "interp.collect",
    "interp.weights",
    "interp.ablate",
    "interp.classify",
    "interp.report",
)

STAGES: list[Stage] = []


def declared(package: str) -> Stage:
    """The stage a package declares (its ``STAGE``)."""
    found = getattr(importlib.import_module(package), "STAGE", None)
    if not isinstance(found, Stage):
        raise TypeError(f"package {package} declares no stage (STAGE = Stage(...) in its __init__)")
    return found


def register(new: Stage, after: str | None = None) -> Stage:
    """Add a stage to the registry: at the end, or right after the stage named ``after``."""
    if any(s.name == new.name for s in STAGES):
        raise ValueError(f"a stage named {new.name!r} is registered already")
    where = len(STAGES) if after is None else [s.name for s in STAGES].index(after) + 1
    declare(new.schema)
    STAGES.insert(where, new)
    return new


def unregister(name: str) -> None:
    """Remove a stage from the registry, and the tables it brought with it."""
    gone = stage(name)
    STAGES.remove(gone)
    undeclare(gone.schema)


def stage_names() -> tuple[str, ...]:
    return tuple(s.name for s in STAGES)


def stage(name: str) -> Stage:
    for s in STAGES:
        if s.name == name:
            return s
    raise ValueError(f"unknown stage {name!r}; stages are {', '.join(stage_names())}")


def writer_of(table: str) -> Stage | None:
    """The registered stage that writes a table, if any."""
    return next((s for s in STAGES if table in s.tables + s.optional_tables), None)


for _package in BUILT_IN:
    register(declared(_package))

"""A run's tables as DataFrames: ``interp.load_run(path)``.

A run's tables are the declared ones (:mod:`interp.pipeline.tables`: None until the stage that
writes them has run, validated against their schema when read) and every other ``.parquet`` file
a stage wrote into the run directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from interp.errors import RunError
from interp.pipeline.rundir import read_manifest, read_table
from interp.pipeline.tables import TABLES


class RunTables:
    """A run's tables (None where the stage has not run) and its manifest: ``run.roles``,
    ``run.effects``, ...; ``run.tables`` is the mapping from table name to DataFrame."""

    def __init__(
        self, path: Path, manifest: dict[str, Any], tables: dict[str, pd.DataFrame | None]
    ) -> None:
        self.path = path
        self.manifest = manifest
        self.tables = tables

    def __getattr__(self, name: str) -> pd.DataFrame | None:
        tables = self.__dict__.get("tables", {})
        if name in tables:
            return tables[name]
        raise AttributeError(f"a run has no table {name!r}; it has {', '.join(tables)}")

    def __repr__(self) -> str:
        have = [name for name, frame in self.tables.items() if frame is not None]
        return f"RunTables({str(self.path)!r}, tables: {', '.join(have) or 'none yet'})"


def table_names(run_dir: Path) -> tuple[str, ...]:
    """The declared tables, then every other parquet table of the run."""
    found = sorted(p.stem for p in Path(run_dir).glob("*.parquet") if p.stem not in TABLES)
    return (*TABLES, *found)


def load_run(path: str | Path) -> RunTables:
    """Load a run directory's tables: ``interp.load_run("reports/smollm2-135m/demo").roles``."""
    run_dir = Path(path)
    if not run_dir.is_dir():
        raise RunError(f"no run directory at {run_dir}")
    manifest = read_manifest(run_dir)
    tables = {name: read_table(run_dir, name) for name in table_names(run_dir)}
    return RunTables(path=run_dir, manifest=manifest, tables=tables)

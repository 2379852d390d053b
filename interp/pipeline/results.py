"""A run's tables as DataFrames: ``interp.load_run(path)``.

A run's tables are the declared ones (:mod:`interp.pipeline.tables`: None until the stage that
writes them has run, validated against their schema when read) and every other ``.parquet`` file
a stage wrote into the run directory.
"""

from __future__ import annotations

import html
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

    def _repr_html_(self) -> str:
        """A notebook shows a run as a short table: model, stages, roles, effects, tables."""
        rows = "".join(
            f'<tr><th style="text-align:left;padding-right:1em">{html.escape(key)}</th>'
            f'<td style="text-align:left">{html.escape(value)}</td></tr>'
            for key, value in summary_rows(self)
        )
        title = html.escape(f"Run {self.path.name}")
        return (
            f'<table class="interp-run"><caption style="text-align:left"><b>{title}</b>'
            f"</caption>{rows}</table>"
        )


def summary_rows(run: RunTables) -> list[tuple[str, str]]:
    """What a run holds, one (label, text) line each: the short summary a notebook shows."""
    model = run.manifest.get("model") or {}
    shape = (
        f" ({model['n_layers']} layers x {model['n_heads']} heads"
        f"{', causal' if model.get('causal') else ', bidirectional' if 'causal' in model else ''})"
        if model.get("n_layers") and model.get("n_heads")
        else ""
    )
    rows = [("model", f"{model.get('name', 'unknown')}{shape}"), ("path", str(run.path))]
    stages = run.manifest.get("stages") or {}
    done = [
        f"{name} {record['seconds']:.0f} s" if "seconds" in record else name
        for name, record in stages.items()
        if isinstance(record, dict)
    ]
    rows.append(("stages", ", ".join(done) or "none yet"))
    roles = run.tables.get("roles")
    if roles is not None and "role" in roles:
        counts = roles["role"].value_counts()
        rows.append(("roles", ", ".join(f"{role} {n}" for role, n in counts.items())))
    effects = run.tables.get("effects")
    if effects is not None and {"metric", "estimator"} <= set(effects.columns):
        exact = effects[effects["estimator"] == "exact"]
        heads = len(exact[["layer", "head"]].drop_duplicates()) if len(exact) else 0
        metrics = ", ".join(dict.fromkeys(effects["metric"]))
        rows.append(("effects", f"{metrics}; {heads} heads ablated exactly"))
    have = [
        f"{name} ({len(frame):,} rows)" for name, frame in run.tables.items() if frame is not None
    ]
    rows.append(("tables", ", ".join(have) or "none yet"))
    report = run.path / "report.html"
    if report.is_file():
        rows.append(("report", str(report)))
    return rows


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

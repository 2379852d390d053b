"""The toy stage's section of the report."""

from __future__ import annotations

from pathlib import Path

from interp.pipeline.results import RunTables
from interp.report import content as C


def section(run: RunTables, figures: Path) -> C.Section | None:
    """The toy table, as it is (None until the stage ran)."""
    table = run.tables.get("toy")
    if table is None:
        return None
    return C.section("toy", "Toy counts", C.Text("Features per head."), C.table(table, "toy-table"))

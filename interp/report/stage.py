"""The report stage: figures, ``report.html`` and ``report.pdf`` from a run's tables alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from interp.report.config import ReportConfig


def run_stage(
    run_dir: Path, model: Any = None, config: ReportConfig = ReportConfig(), progress: bool = True
) -> dict[str, Any]:
    """Build the report of a run (the model is not needed and never loaded)."""
    from interp.report.html import build_report

    build_report(run_dir, pdf=config.pdf)
    return {}

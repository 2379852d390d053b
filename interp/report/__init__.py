"""The report stage: from a run's files alone (never the model, never torch), its figures
(plots.py, effect_plots.py, exemplar_plots.py; several sections drawn at once by drawing.py), one
content model of what the report says (content.py, document.py), and two renderings of it: a
self-contained HTML page (html.py) and a PDF (pdf.py).

``build_report(run_dir)`` and ``compare_runs(run_a, run_b, out_path)`` are imported lazily, so
that importing a helper module (``interp.report.summary``) does not load matplotlib and seaborn.
"""

from __future__ import annotations

from typing import Any

from interp.pipeline.contract import EVERY_STAGE, ReportSection, Stage
from interp.report.config import ReportConfig

STAGE = Stage(
    "report",
    "Build figures, report.html and report.pdf from the run's tables.",
    ReportConfig,
    "interp.report.stage:run_stage",
    reads=EVERY_STAGE,
    files=("report.html",),
    sections=(
        ReportSection("heads", "interp.report.sections:heads"),
        ReportSection("provenance", "interp.report.sections:provenance"),
    ),
)

__all__ = ["build_report", "compare_runs"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from interp.report import html

        return getattr(html, name)
    raise AttributeError(f"module 'interp.report' has no attribute {name!r}")

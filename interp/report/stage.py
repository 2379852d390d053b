"""The report stage: figures, ``report.html`` and ``report.pdf`` from a run's tables alone."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from interp.pipeline.contract import StageRecord
from interp.report.config import ReportConfig

if TYPE_CHECKING:  # the report never runs the model
    from interp.model.load import LoadedModel


@dataclass(frozen=True)
class ReportRecord(StageRecord):
    """What the manifest records about a report run."""

    processes: int  # sections drawn at once (interp.report.drawing); 1: in the stage's process


def run_stage(
    run_dir: Path,
    model: LoadedModel | None = None,
    config: ReportConfig = ReportConfig(),
    progress: bool = True,
) -> ReportRecord:
    """Build the report of a run (the model is not needed and never loaded)."""
    from interp.executors.threads import choose_threads
    from interp.report.drawing import usable_processes
    from interp.report.html import build_report

    processes = usable_processes(choose_threads(config.processes).n)
    build_report(run_dir, pdf=config.pdf, processes=processes)
    return ReportRecord(processes)

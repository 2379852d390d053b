"""Drawing the report's sections in several processes at once.

A section builder is a function of the run's tables alone (pandas and matplotlib, no torch: the
contract of :class:`~interp.pipeline.contract.ReportSection`), and almost all of the report's time
is matplotlib laying out and rasterising text, in one thread. On SmolLM2 the sections took 47 s
of a 53 s report on a 2-core CPU, so drawing them in two processes halves most of the report.

The workers are forked from this process, so they start with its imports, its logging set-up and
the run's tables already in memory (nothing is pickled but each section's content model, which
holds file paths, not figures). Fork is used on Linux only: where the default start method is
not fork (macOS, Windows), the sections are drawn here, one after another. A section draws the
same figure bytes in a worker as here (a test compares them), so the process count is a
placement setting: it never changes what the report writes.
"""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from interp.pipeline.results import RunTables
from interp.report import content as C

Builder = Callable[[RunTables, Path], C.Section | None]

# What the forked workers draw: set before the pool forks them, read by index in each worker.
_JOBS: tuple[list[Builder], RunTables, Path] | None = None


def can_fork() -> bool:
    """Whether sections may be drawn in forked workers here (Linux: see the module docstring)."""
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


def usable_processes(asked: int) -> int:
    """How many processes draw the sections when ``asked`` are: all of them where
    :func:`can_fork`, else 1 (this process). The report stage records this count."""
    return asked if can_fork() else 1


def draw_sections(
    builders: list[Builder], run: RunTables, figures: Path, processes: int = 1
) -> list[C.Section | None]:
    """Each builder's section of ``run``, in the order given, its figures drawn into ``figures``;
    ``processes`` above 1 draws up to that many at once (:func:`usable_processes`). An error in a
    section is raised here, as it would be when drawn in this process."""
    processes = min(usable_processes(processes), len(builders))
    if processes <= 1:
        return [build(run, figures) for build in builders]
    global _JOBS
    _JOBS = (builders, run, figures)
    try:
        with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork")) as pool:
            return list(pool.map(_draw, range(len(builders))))
    finally:
        _JOBS = None


def _draw(index: int) -> C.Section | None:
    assert _JOBS is not None, "a drawing worker started without its jobs"
    builders, run, figures = _JOBS
    return builders[index](run, figures)

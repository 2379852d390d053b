"""When the current ``interp run`` started, for a stage whose default spends the time a run has
left (the ablate stage's exact rounds: :func:`interp.ablate.stage.exact_budget`).

The start is kept in a context variable that :func:`interp.pipeline.execute.run_pipeline` sets
for the length of one run, so two runs of one process (a study) each count from their own
start, and a stage run on its own (``interp ablate RUN_DIR``, or ``interp.ablate.ablate`` from
Python) sees no run at all.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar

_STARTED: ContextVar[float | None] = ContextVar("interp_run_started", default=None)


@contextlib.contextmanager
def run_started() -> Iterator[None]:
    """Count the block as one run: :func:`elapsed` reads from its start."""
    token = _STARTED.set(time.perf_counter())
    try:
        yield
    finally:
        _STARTED.reset(token)


def elapsed() -> float | None:
    """Seconds since the current run started; None outside a run."""
    started = _STARTED.get()
    return None if started is None else time.perf_counter() - started

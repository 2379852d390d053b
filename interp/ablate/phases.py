"""The ablate stage's phases: each one timed into the stage's timings, and a line on stderr as
it finishes when the progress bars are off."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator


def done(progress: bool, what: str, seconds: float) -> None:
    """With the progress bars off (``interp ... -q``), one line per finished phase on stderr,
    so that a long stage is not silent (with bars on, the bars say it)."""
    if not progress:
        print(f"ablate: {what} done in {seconds:.0f} s", file=sys.stderr, flush=True)


@contextlib.contextmanager
def timed(timings: dict[str, float], name: str) -> Iterator[None]:
    """Time the block into ``timings[name]`` (seconds), also when it raises."""
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = time.perf_counter() - start

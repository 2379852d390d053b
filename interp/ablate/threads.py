"""How many torch threads the ablate stage runs with.

On a machine with at most two cores neither choice is always right, so the stage measures:

- idle, two threads win: on the 2-core box a 68-replica SmolLM2 pass (2,040 tokens) took
  2.5-2.7 s with two threads and 4.4 s with one;
- when another process holds a core, every multi-threaded op waits at an OpenMP barrier for
  the descheduled thread: a tiny model's forward took 0.52 s with two threads and 0.016 s with
  one, SmolLM2 on 1 x 64 tokens 10 s vs 0.9 s.

:func:`fastest_threads` times a representative pass under each count (a few seconds, against
minutes of sweep) and the stage keeps the faster. On bigger machines torch's default stands.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from typing import Callable, Iterator

import torch

SMALL_MACHINE_CORES = 2


def fastest_threads(probe: Callable[[], object], candidates: tuple[int, ...] = (1, 2), rounds: int = 2) -> int:
    """The count in ``candidates`` under which ``probe()`` runs fastest (best of ``rounds``,
    interleaved so that a passing disturbance hits every count alike; ties go to fewer)."""
    best = {n: math.inf for n in candidates}
    old = torch.get_num_threads()
    try:
        for _ in range(rounds):
            for n in candidates:
                torch.set_num_threads(n)
                start = time.perf_counter()
                probe()
                best[n] = min(best[n], time.perf_counter() - start)
    finally:
        torch.set_num_threads(old)
    return min(candidates, key=lambda n: (best[n], n))


def choose_threads(requested: int | None, probe: Callable[[], object]) -> int | None:
    """``requested`` if set; else on a small machine the faster of one and two threads for
    ``probe``; else None (torch's default)."""
    if requested is not None:
        return requested
    cores = os.cpu_count() or 1
    if cores > SMALL_MACHINE_CORES:
        return None
    return fastest_threads(probe, tuple(range(1, cores + 1)))


@contextlib.contextmanager
def stage_threads(n: int | None) -> Iterator[None]:
    """torch's intra-op threads set to ``n`` for the block (None: left as they are)."""
    if n is None:
        yield
        return
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)

"""How many torch threads the ablate stage runs with.

On a machine with at most two cores neither choice is always right, so the stage measures:

- idle, two threads win: on the 2-core box a 68-replica SmolLM2 pass (2,040 tokens) took
  2.5-2.7 s with two threads and 4.4 s with one;
- when another process holds a core, every multi-threaded op waits at an OpenMP barrier for
  the descheduled thread: a tiny model's forward took 0.52 s with two threads and 0.016 s with
  one, SmolLM2 on 1 x 64 tokens 10 s vs 0.9 s.

:func:`fastest_threads` times a representative pass under each count and the stage keeps the
faster. The measurement is bounded, because the slow case is exactly the one to expect on a
busy machine: on the 2-core box under a load of 3, SmolLM2's probe pass took 0.9-2.3 s with one
thread and 8-11 s with two, and timing each count twice to the end took 19 s. So a pass is cut
short (:func:`deadline`) once it has run longer than the fastest count so far (its outcome is
then known), and a second round runs only if the first left room for it within
``PROBE_BUDGET_S``: the same machine now settles it in about twice the one-thread pass, a few
seconds. On bigger machines torch's default stands.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterator

import torch

SMALL_MACHINE_CORES = 2
PROBE_BUDGET_S = 4.0  # the thread measurement as a whole, about (see the module docstring)


class TooSlow(Exception):
    """A timed pass ran past its deadline (:func:`deadline`)."""


@contextlib.contextmanager
def deadline(module: torch.nn.Module | None, seconds: float) -> Iterator[None]:
    """Abort ``module``'s forward passes inside the block with :class:`TooSlow` once ``seconds``
    have passed (checked as each submodule starts; inf or no module: never)."""
    if module is None or math.isinf(seconds):
        yield
        return
    end = time.perf_counter() + seconds

    def check(*_: object) -> None:
        if time.perf_counter() > end:
            raise TooSlow

    handles = [m.register_forward_pre_hook(check) for m in module.modules()]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def fastest_threads(
    probe: Callable[[], object],
    candidates: tuple[int, ...] = (1, 2),
    rounds: int = 2,
    module: torch.nn.Module | None = None,
    budget: float = PROBE_BUDGET_S,
) -> int:
    """The count in ``candidates`` under which ``probe()`` runs fastest (best of up to
    ``rounds``, interleaved so that a passing disturbance hits every count alike; ties go to
    fewer). ``module``: the model ``probe`` runs, whose pass is cut short once slower than the
    best so far; a round starts only if the rounds so far, once more, fit in ``budget`` seconds."""
    best = {n: math.inf for n in candidates}
    old = torch.get_num_threads()
    began = time.perf_counter()
    try:
        for r in range(rounds):
            spent = time.perf_counter() - began
            if r and spent * (r + 1) / r > budget:
                break
            for n in candidates:
                torch.set_num_threads(n)
                start = time.perf_counter()
                try:
                    with deadline(module, min(best.values())):
                        probe()
                except TooSlow:
                    continue  # slower than another count: the rest of the pass would not change the choice
                best[n] = min(best[n], time.perf_counter() - start)
    finally:
        torch.set_num_threads(old)
    return min(candidates, key=lambda n: (best[n], n))


def choose_threads(
    requested: int | None, probe: Callable[[], object], module: torch.nn.Module | None = None
) -> int | None:
    """``requested`` if set; else on a small machine the faster of one and two threads for
    ``probe`` (a pass of ``module``, cut short where it is the slower); else None (torch's default)."""
    if requested is not None:
        return requested
    cores = os.cpu_count() or 1
    if cores > SMALL_MACHINE_CORES:
        return None
    return fastest_threads(probe, tuple(range(1, cores + 1)), module=module)


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

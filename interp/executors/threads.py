"""How many torch threads a stage runs with: the CPUs this process may use that nothing else is using.

torch's default is one thread per core of the machine, which is right only on an idle machine
that the process has to itself. When another process holds a core, every multi-threaded op
waits at an OpenMP barrier for the thread that was descheduled: on a 2-core CPU, collecting 200
prose sentences took 5.9 s alone and 30.5 s beside two single-thread busy loops at 2 threads
(5.1x), 16.1 s at 1 thread (2.7x); a tiny model's forward took 0.52 s with two threads and
0.016 s with one. And in a container, the machine's cores are not the process's: a CPU quota
of 4 on a 64-core host leaves 4.

So a stage that runs the model counts (:func:`choose_threads`):

- the CPUs it may use (:func:`usable_cpus`): those ``os.sched_getaffinity`` allows (taskset, a
  scheduler's pinning), capped by the cgroup's CPU quota (``cpu.max``, or ``cpu.cfs_quota_us``
  under cgroup v1), rounded up;
- of those, how much other processes are using now (:func:`busy_elsewhere`): ``/proc/stat``
  sampled over ``SAMPLE_S`` on those CPUs, less this process' own time;
- and runs with the rest, rounded to the nearest whole CPU, at least one.

``--threads N`` (a stage's ``threads``) or ``OMP_NUM_THREADS`` fixes the count instead. The
count goes into the stage's manifest record (``threads``), and ``--from-manifest`` replays it:
the model's small matrix products round differently under different thread counts (a
product of 5 to 11 rows, in the 8th digit on this CPU's BLAS), so two runs give the same tables
bit for bit only with the same count, and within ``THREAD_RTOL`` otherwise (a test holds it).
Where ``/proc`` is missing (macOS, Windows) every usable CPU counts as free.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

SAMPLE_S = 0.3  # how long other processes' CPU use is sampled
# Tables of runs that chose different thread counts agree to this relative tolerance (and
# THREAD_ATOL absolute): the golden tables' tolerance (tests/golden/compare.py).
THREAD_RTOL, THREAD_ATOL = 1e-5, 1e-6
PROC_STAT = Path("/proc/stat")
CGROUP = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Threads:
    """The count a stage runs with, and why (the stage says it when it starts)."""

    n: int
    why: str  # "--threads", "OMP_NUM_THREADS", or "N of M CPUs free"

    def __str__(self) -> str:
        return f"{self.n} thread{'s' if self.n > 1 else ''}, {self.why}"


def choose_threads(requested: int | None, sample: float = SAMPLE_S) -> Threads:
    """``requested`` if set; else what ``OMP_NUM_THREADS`` pins; else the usable CPUs that no
    other process is using now (see the module docstring)."""
    if requested is not None:
        return Threads(requested, "--threads")
    pinned = pinned_threads()
    if pinned is not None:
        return Threads(pinned, "OMP_NUM_THREADS")
    usable = usable_cpus()
    free = max(0.0, usable - busy_elsewhere(sorted(_affinity()), sample))
    n = min(usable, max(1, math.floor(free + 0.5)))
    return Threads(n, f"{free:.1f} of {usable} CPUs free")


def pinned_threads() -> int | None:
    """The count ``OMP_NUM_THREADS`` pins, if it is a whole number of at least one."""
    try:
        value = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return None
    return value if value >= 1 else None


def usable_cpus(cgroup: Path = CGROUP) -> int:
    """The CPUs this process may run on: its affinity set, capped by its cgroup's quota."""
    cpus = len(_affinity())
    quota = cpu_quota(cgroup)
    return max(1, min(cpus, math.ceil(quota)) if quota is not None else cpus)


def _affinity() -> set[int]:
    if hasattr(os, "sched_getaffinity"):
        return os.sched_getaffinity(0)
    return set(range(os.cpu_count() or 1))


def cpu_quota(root: Path = CGROUP, own: Path = Path("/proc/self/cgroup")) -> float | None:
    """CPUs' worth of time the process' cgroup (and every cgroup above it) may use; None: no limit
    (or no cgroup file to read)."""
    limits = [q for path in _cgroup_dirs(root, own) if (q := _quota_in(path)) is not None]
    return min(limits) if limits else None


def _cgroup_dirs(root: Path, own: Path) -> list[Path]:
    """The cgroup folders whose CPU limits apply: this process' own and each above it, for v2
    (``0::/path``) and for v1's cpu controller."""
    try:
        lines = own.read_text().splitlines()
    except OSError:
        return [root, root / "cpu", root / "cpu,cpuacct"]
    dirs = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        names = controllers.split(",")
        if controllers == "":
            base = root
        elif "cpu" in names:
            base = next(
                (root / d for d in ("cpu", "cpu,cpuacct", controllers) if (root / d).is_dir()),
                root / "cpu",
            )
        else:
            continue
        here = base / path.lstrip("/")
        dirs += [here, *[p for p in here.parents if p.is_relative_to(base)]]
    return dirs


def _quota_in(path: Path) -> float | None:
    try:
        if (path / "cpu.max").is_file():
            return parse_cpu_max((path / "cpu.max").read_text())
        if (path / "cpu.cfs_quota_us").is_file():
            quota = int((path / "cpu.cfs_quota_us").read_text())
            period = int((path / "cpu.cfs_period_us").read_text())
            return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None
    return None


def parse_cpu_max(text: str) -> float | None:
    """cgroup v2 ``cpu.max`` (``"150000 100000"``: 1.5 CPUs; ``"max 100000"``: no limit)."""
    parts = text.split()
    if len(parts) < 2 or parts[0] == "max":
        return None
    quota, period = int(parts[0]), int(parts[1])
    return quota / period if quota > 0 and period > 0 else None


def busy_elsewhere(
    cpus: list[int],
    seconds: float = SAMPLE_S,
    read_stat: Callable[[], str] | None = None,
    own_ticks: Callable[[], int] | None = None,
) -> float:
    """CPUs' worth of time other processes used on ``cpus`` over ``seconds`` (0 where ``/proc``
    cannot be read): the busy ticks of those CPUs in ``/proc/stat``, less this process' own."""
    read_stat = read_stat or (lambda: PROC_STAT.read_text())
    own_ticks = own_ticks or _own_ticks
    try:
        before, mine_before = cpu_ticks(read_stat(), cpus), own_ticks()
        time.sleep(seconds)
        after, mine_after = cpu_ticks(read_stat(), cpus), own_ticks()
    except (OSError, ValueError, IndexError):
        return 0.0
    busy = after[0] - before[0] - (mine_after - mine_before)
    total = after[1] - before[1]
    return max(0.0, len(cpus) * busy / total) if total > 0 else 0.0


def cpu_ticks(stat: str, cpus: list[int]) -> tuple[int, int]:
    """(busy, total) ticks of ``cpus`` in a ``/proc/stat`` text (idle and iowait are not busy;
    guest time is already in user time)."""
    wanted = {f"cpu{c}" for c in cpus}
    busy = total = 0
    for line in stat.splitlines():
        name, *fields = line.split()
        if name not in wanted:
            continue
        ticks = [int(f) for f in fields[:8]]  # user nice system idle iowait irq softirq steal
        busy += sum(ticks) - ticks[3] - ticks[4]
        total += sum(ticks)
    return busy, total


def _own_ticks() -> int:
    """This process' user + system time so far, in clock ticks (``/proc/self/stat``)."""
    fields = Path("/proc/self/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])


@contextlib.contextmanager
def stage_threads(n: int | None) -> Iterator[None]:
    """torch's intra-op threads set to ``n`` for the block (None: left as they are)."""
    if n is None:
        yield
        return
    import torch  # here: the report counts CPUs with this module and reads tables only

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)

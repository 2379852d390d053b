"""One process at a time in a run directory: a lock held from the first read to the last write.

``interp run`` (new, named, ``--resume``) and every stage command take the lock before they read
or write anything in the run directory and keep it to the end, so two commands never merge into
one run (a second ``interp run --name same`` while the first loads its model) and a report never
reads roles that a concurrent ``interp classify`` is rewriting. A second process does not wait:
it ends at once with one line naming the holder (process id, host, start time).

The lock is the ``filelock`` package's on ``.interp.lock`` inside the run directory: the
operating system's lock on that file (``flock`` on POSIX, ``msvcrt.locking`` on Windows), which
the system releases when its holder exits, however it exits (SIGKILL, a crash), so a file left
behind never blocks a run; where the filesystem has no such lock, a lock file that names its
holder's process. The holder writes its name into the file and removes the file before it lets
go, so a command leaves no file behind: a process that opened the file just before and locks it
just after finds it unlinked, and filelock takes the lock again on the path's new file. Reading
a finished run (``interp.load_run``, ``compare``) takes no lock.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from interp.errors import RunError
from interp.pipeline.rundir import write_error

LOCK = ".interp.lock"


@contextmanager
def run_lock(run_dir: str | Path) -> Iterator[None]:
    """Hold the run directory's lock for the block (the folder must exist); RunError naming the
    holder when another process holds it."""
    path = Path(run_dir) / LOCK
    lock = FileLock(path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise RunError(
            f"run {run_dir} is in use by another interp process ({_holder(path)}): wait for it to "
            f"end, or choose another --name"
        ) from None
    except OSError as exc:
        raise write_error(path, exc) from None
    _note(path)
    try:
        yield
    finally:
        try:
            path.unlink(missing_ok=True)  # while still held: see the module docstring
        except OSError:
            pass  # the run directory went with it (a run with no finished stage)
        lock.release()


def _note(path: Path) -> None:
    """Write who holds the lock into its file, for a process that finds it taken."""
    info = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    try:
        path.write_text(json.dumps(info), encoding="utf-8")
    except OSError:
        pass  # the lock holds without its note; a second process then names no holder


def _holder(path: Path) -> str:
    """Who holds the lock, from the note its holder writes right after taking it."""
    for _ in range(10):  # the holder writes its note just after locking: give it a moment
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
            return f"pid {int(info['pid'])} on {info['host']}, started {info['started']}"
        except (OSError, ValueError, KeyError, TypeError):
            time.sleep(0.05)
    return "pid unknown"

"""One process at a time in a run directory: an operating-system lock held from the first read
to the last write.

``interp run`` (new, named, ``--resume``) and every stage command take the lock before they read
or write anything in the run directory and keep it to the end, so two commands never merge into
one run (a second ``interp run --name same`` while the first loads its model) and a report never
reads roles that a concurrent ``interp classify`` is rewriting. A second process does not wait:
it ends at once with one line naming the holder (process id, host, start time).

The lock is ``flock`` on ``.interp.lock`` inside the run directory. The kernel releases it when
its holder exits, however it exits (SIGKILL, a crash, a power cut on a local disk), so a stale lock
file never blocks a run; the holder removes the file on its way out. Because a file can be
removed between another process opening it and locking it, a lock counts only when the file
locked is still the one at that path (same inode), else it is taken again. Reading a finished run
(``interp.load_run``, ``compare``) takes no lock.
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

try:
    import fcntl
except ImportError:  # not POSIX: no lock (the run directory is then not protected)
    fcntl = None  # type: ignore[assignment]

from interp.errors import RunError

LOCK = ".interp.lock"


@contextmanager
def run_lock(run_dir: str | Path) -> Iterator[None]:
    """Hold the run directory's lock for the block (the folder must exist); RunError naming the
    holder when another process holds it."""
    run_dir = Path(run_dir)
    fd = _acquire(run_dir, run_dir / LOCK)
    try:
        yield
    finally:
        _release(run_dir / LOCK, fd)


def _acquire(run_dir: Path, path: Path) -> int | None:
    if fcntl is None:
        return None
    while True:
        fd = _open(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder(fd)
            os.close(fd)
            raise RunError(
                f"run {run_dir} is in use by another interp process ({holder}): wait for it to end, "
                f"or choose another --name"
            ) from None
        try:
            current = os.stat(path, follow_symlinks=False)
            mine = os.fstat(fd)
            if (current.st_dev, current.st_ino) == (mine.st_dev, mine.st_ino):
                break
        except FileNotFoundError:
            pass
        os.close(fd)  # its last holder removed the file after we opened it: lock the new one
    info = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode("utf-8"), 0)
    except OSError:
        pass  # the lock holds without its note; a second process then names no holder
    return fd


def _open(path: Path) -> int:
    from interp.pipeline.rundir import _write_error

    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        return os.open(path, flags, 0o644)
    except OSError as exc:
        raise _write_error(path, exc) from None


def _holder(fd: int) -> str:
    """Who holds the lock, from the note its holder writes right after taking it."""
    for _ in range(10):  # the holder writes its note just after locking: give it a moment
        try:
            info = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
            return f"pid {int(info['pid'])} on {info['host']}, started {info['started']}"
        except (OSError, ValueError, KeyError, TypeError):
            time.sleep(0.05)
    return "pid unknown"


def _release(path: Path, fd: int | None) -> None:
    if fd is None:
        return
    try:
        mine = os.fstat(fd)
        current = os.stat(path, follow_symlinks=False)
        if (current.st_dev, current.st_ino) == (mine.st_dev, mine.st_ino):
            os.unlink(path)  # still locked: whoever opened it meanwhile sees it gone and retries
    except OSError:
        pass  # the run directory was removed with it (a run with no finished stage)
    finally:
        os.close(fd)

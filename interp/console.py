"""How a CLI command meets the user: errors, warnings, signals.

- The toolkit's own errors (:mod:`interp.errors`) are one line on stderr and exit 1: the
  message says what to do (see :mod:`interp.troubleshooting`).
- Anything else is a bug, of the toolkit or of a library under it: one line saying so, the
  full traceback written to a file whose path the line gives, exit 70 (EX_SOFTWARE). A bug is
  never dressed up as a user error (a stray ValueError once read as "your input is wrong").
- SIGINT, SIGTERM (what ``timeout`` and schedulers send), SIGHUP (a closed terminal) and SIGPIPE
  (the reader of a pipe went away, ``interp run ... | head -c 20``, or ``kill -PIPE``) end the
  current stage: the stage writes nothing more (every file is renamed into place whole),
  finished stages stay recorded, and the command exits 130, 143, 129 or 141; a run that had no
  finished stage is removed, and the line says so instead of advising ``--resume``. A command
  that is not a run says what it left instead (``friendly(interrupted=...)``). A second signal
  during that clean-up is ignored so that the clean-up completes. Python ignores SIGPIPE from
  its start; the commands handle it as the signal it is.
- Output that cannot be written (a full disk behind stdout or stderr, a stream closed before the
  command started: ``interp run ... >&-``) never stops the work: progress bars and messages are
  dropped, the run finishes and is kept. A command whose work succeeded but whose stdout could
  not be written ends with one line on stderr and exit 1.
- Warnings: the toolkit's own (``InterpWarning``, or raised from an ``interp`` module) are
  shown once each as ``warning: ...``; a short list of known-noisy third-party warnings is
  filtered by category and module; everything else keeps Python's default filters.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import functools
import logging
import os
import signal
import sys
import tempfile
import threading
import traceback
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from interp.errors import InterpError, InterpWarning, first_line

EXIT_USER, EXIT_BUG, EXIT_SIGINT, EXIT_SIGTERM, EXIT_SIGHUP = 1, 70, 130, 143, 129
EXIT_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader left
EXIT_FOR_SIGNAL = {
    signal.SIGINT: EXIT_SIGINT,
    signal.SIGTERM: EXIT_SIGTERM,
    signal.SIGHUP: EXIT_SIGHUP,
    signal.SIGPIPE: EXIT_PIPE,
}

# (category, module regex) of third-party warnings that say nothing a user of the CLI can act on.
NOISY_WARNINGS: tuple[tuple[type[Warning], str], ...] = (
    (FutureWarning, r"transformers(\.|$)"),
    (FutureWarning, r"transformer_lens(\.|$)"),
    (UserWarning, r"transformer_lens(\.|$)"),
    (UserWarning, r"torch(\.|$)"),
    (DeprecationWarning, r".*"),
    (UserWarning, r"seaborn(\.|$)"),
    (UserWarning, r"matplotlib(\.|$)"),
    (RuntimeWarning, r"sklearn(\.|$)"),
)


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM, SIGHUP or SIGPIPE arrived; ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """SIGINT, SIGTERM, SIGHUP and SIGPIPE raise :class:`Interrupted` in the main thread for the
    block; a signal the parent process set to be ignored stays ignored (as with ``nohup``), except
    SIGPIPE, which Python itself ignores from its start."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        for s in EXIT_FOR_SIGNAL:  # let the clean-up finish: a second signal is ignored
            signal.signal(s, signal.SIG_IGN)
        raise Interrupted(signum)

    previous = {s: signal.getsignal(s) for s in EXIT_FOR_SIGNAL}
    for s, old in previous.items():
        if old is not signal.SIG_IGN or s == signal.SIGPIPE:
            signal.signal(s, handler)
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old if old is not None else signal.SIG_DFL)


# Third-party loggers whose warnings repeat what a toolkit warning says better (transformers:
# "Token indices sequence length is longer than ...", next to interp's truncation warning).
NOISY_LOGGERS = ("transformers",)


@contextlib.contextmanager
def user_warnings() -> Iterator[None]:
    """Show the toolkit's warnings once each as one line; drop the known-noisy third-party ones."""
    levels = {name: logging.getLogger(name).level for name in NOISY_LOGGERS}
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    # transformers sets its logger's level when it is first imported, from this variable
    ours = "TRANSFORMERS_VERBOSITY" not in os.environ
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        with _filtered_warnings():
            yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        if ours:
            os.environ.pop("TRANSFORMERS_VERBOSITY", None)


@contextlib.contextmanager
def _filtered_warnings() -> Iterator[None]:
    with warnings.catch_warnings():
        for category, module in NOISY_WARNINGS:
            warnings.filterwarnings("ignore", category=category, module=module)
        warnings.filterwarnings("once", module=r"interp(\.|$)")
        warnings.filterwarnings("once", category=InterpWarning)
        warnings.showwarning = _show_warning
        yield


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    text = " ".join(str(message).split())
    prefix = (
        "warning"
        if issubclass(category, InterpWarning) or _ours(filename)
        else f"warning ({category.__name__})"
    )
    click.echo(f"{prefix}: {text}", err=True)


def _ours(filename: str) -> bool:
    return Path(filename).resolve().is_relative_to(Path(__file__).resolve().parent)


def crash_report(exc: BaseException) -> Path | None:
    """Write the traceback of an unexpected exception to a file; return its path (None if the
    file could not be written either)."""
    from importlib import metadata

    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    try:
        version = metadata.version("interp")
    except metadata.PackageNotFoundError:
        version = "unknown"
    text = (
        f"interp {version}, Python {sys.version.split()[0]}\ncommand: {' '.join(sys.argv)}\n\n"
        + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    )
    try:
        fd, path = tempfile.mkstemp(prefix=f"interp-crash-{stamp}-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        return Path(path)
    except OSError:
        return None


def fail(message: str, code: int) -> None:
    try:
        click.echo(" ".join(message.split()), err=True)  # one line, whatever the message holds
    except (OSError, AttributeError, ValueError):  # stderr cannot be written, or is closed (None)
        pass
    sys.exit(code)


class _Guarded:
    """A text stream whose first failed write (a full disk, a reader that went away) is kept in
    ``lost`` instead of raised; later writes are dropped. Everything else is the stream's."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.lost: OSError | None = None
        if stream is None:  # the stream was closed before the command started (`>&-`)
            self._stream = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115  (for its attributes)
            self.lost = OSError(errno.EBADF, "it is closed")

    def write(self, text: Any) -> int:
        if self.lost is None:
            try:
                return self._stream.write(text)
            except OSError as exc:
                self.lost = exc
        return len(text)

    def flush(self) -> None:
        if self.lost is None:
            try:
                self._stream.flush()
            except OSError as exc:
                self.lost = exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded_output() -> Iterator[None]:
    """Run the block with stdout and stderr guarded (:class:`_Guarded`): a failed write never
    stops the work. If the block ends normally but stdout lost output, end with one line on
    stderr and exit 1, or exit 141 for a closed pipe."""
    saved = sys.stdout, sys.stderr
    _fill_closed_descriptors()
    out, err = _Guarded(saved[0]), _Guarded(saved[1])
    sys.stdout, sys.stderr = out, err
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        for guard, stream in ((out, saved[0]), (err, saved[1])):
            if guard.lost is not None:
                _silence(stream)  # what is still buffered must not fail again at exit
    if out.lost is not None:
        if isinstance(out.lost, BrokenPipeError):
            sys.exit(EXIT_PIPE)
        fail(
            f"error: cannot write to standard output ({out.lost.strerror or out.lost}); the command's work "
            f"is done and kept on disk",
            EXIT_USER,
        )


def _fill_closed_descriptors() -> None:
    """Open /dev/null on a standard file descriptor that was closed (``interp run ... >&-``), so
    that no file the command opens gets that number, where a library printing to it would
    write into the file."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: this one


def friendly(fn: Callable[..., Any] | None = None, *, interrupted: str | None = None) -> Any:
    """Run a command with the error, warning and signal handling described above.
    ``interrupted``: what a signal leaves behind, for a command that runs no stages (default:
    a run's finished stages are kept); used as ``@friendly`` or ``@friendly(interrupted=...)``."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with guarded_output():
                return _handled(fn, interrupted, *args, **kwargs)

        return wrapper

    return decorate(fn) if fn is not None else decorate


def _handled(fn: Callable[..., Any], interrupted: str | None, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn``, turning what it raises into one line and an exit code."""
    try:
        with signals_interrupt(), user_warnings():
            return fn(*args, **kwargs)
    except InterpError as exc:
        fail(f"error: {exc}", EXIT_USER)
    except KeyboardInterrupt as exc:  # a signal (Interrupted), or Ctrl-C inside a library
        signum = signal.Signals(exc.signum) if isinstance(exc, Interrupted) else signal.SIGINT
        name = f" ({signum.name})" if isinstance(exc, Interrupted) else ""
        if getattr(exc, "run_removed", None):
            fail(
                f"interrupted{name} before any stage finished: no run was kept; start it again",
                EXIT_FOR_SIGNAL[signum],
            )
        if interrupted is not None:
            fail(f"interrupted{name}: {interrupted}", EXIT_FOR_SIGNAL[signum])
        fail(
            f"interrupted{name}: finished stages are kept; rerun with --resume to continue",
            EXIT_FOR_SIGNAL[signum],
        )
    except (click.exceptions.Exit, click.ClickException, SystemExit):
        raise
    except (
        BrokenPipeError
    ):  # the reader went away (`interp models --families | head`): nothing to report
        _silence_stdout()
        sys.exit(EXIT_PIPE)
    except MemoryError:
        fail(
            "error: out of memory: lower --max-tokens-per-batch (or --max-seq-len), or use --dtype bfloat16",
            EXIT_USER,
        )
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            fail("error: disk full: free some disk space and rerun with --resume", EXIT_USER)
        if exc.filename is not None:
            fail(f"error: cannot use {exc.filename}: {exc.strerror}", EXIT_USER)
        _bug(exc)
    except Exception as exc:  # noqa: BLE001  (a bug: say so, keep the traceback)
        _bug(exc)
    return None


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit does not raise again."""
    _silence(sys.stdout)


def _silence(stream: Any) -> None:
    """Point a standard stream's file descriptor at /dev/null, so that flushing what it still
    buffers at exit does not fail again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    except (
        OSError,
        ValueError,
        AttributeError,
    ):  # no real file descriptor (a test runner's buffer)
        pass


def _bug(exc: BaseException) -> None:
    report = crash_report(exc)
    where = (
        f"the full traceback is in {report}"
        if report
        else "the traceback could not be written to a file"
    )
    fail(
        f"error: internal error ({first_line(exc)}); this is a bug in interp or a "
        f"library it uses; {where}",
        EXIT_BUG,
    )

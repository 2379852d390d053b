"""User-facing errors: the CLI prints them as one line and exits non-zero, without a traceback.

Only these types are user errors. Any other exception is a bug of the toolkit (or of a library
under it): the CLI says so in one line and writes the traceback to a file (interp.console).
Every message a user can meet is listed, with what it means and what to do, in
:mod:`interp.troubleshooting` (a test keeps that catalogue and the raise sites in step).
"""


def first_line(exc: BaseException, limit: int = 200) -> str:
    """An exception in a few words, for a one-line message: its type and the first line of what
    it says, cut at ``limit`` characters (the type alone when it says nothing)."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else ""
    text = text[:limit] + "..." if len(text) > limit else text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class InterpError(Exception):
    """An error the user can fix; the message says what to do."""


class ModelError(InterpError):
    """The model could not be found, loaded or placed."""


class CorpusError(InterpError):
    """A probe corpus is missing, empty or malformed; the message names file and line."""


class PromptError(InterpError):
    """A prompt of `interp show` is empty, cannot be encoded, or is longer than the model's context."""


class RunError(InterpError):
    """The run directory cannot be used (not writable, a file, stale or incomplete)."""


class ConfigError(InterpError, ValueError):
    """An option or config value is out of range. Also a ValueError, so that code validating
    configs in ``__post_init__`` keeps the usual Python contract."""


class MemoryBudgetError(InterpError):
    """A stage would need more memory than this machine has; the message names the flag to change."""


class InterpWarning(UserWarning):
    """A warning of the toolkit itself: the CLI shows each one once, as one line."""

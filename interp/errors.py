"""User-facing errors: the CLI prints them as one line and exits non-zero, without a traceback."""


class InterpError(Exception):
    """An error the user can fix; the message says what to do."""


class ModelError(InterpError):
    """The model could not be found, loaded or placed."""


class CorpusError(InterpError):
    """A probe corpus is missing, empty or malformed; the message names file and line."""


class RunError(InterpError):
    """The run directory cannot be used (not writable, a file, stale or incomplete)."""

"""The catalogue of every message the command line can end with: what it means, what to do.

The entries are data, one line each, in ``interp/troubleshooting.tsv``: the kind (the error
type, or what prints it), the exit code, the message as a template (``{}`` where the message
names a file, a number, a value), what it means and what to do; ``#`` lines head the sections.
Adding a message to the package is adding its line there. The documentation's
troubleshooting page (docs/reference/troubleshooting.md) is generated from it (``python tools/docs.py``), and
tests/unit/test_troubleshooting.py keeps it complete: every ``raise`` of an
:mod:`interp.errors` type in the package must match an entry, and so must every line the
bad-input tests see on stderr.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import cached_property
from importlib.resources import files


@dataclass(frozen=True)
class Trouble:
    kind: str  # the error type, or what prints it (interrupted, internal error, warning)
    message: str  # template: "{}" stands for the part that varies
    meaning: str
    action: str
    exit: int = 1

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        parts = [re.escape(p) for p in self.message.split("{}")]
        return re.compile(".+?".join(parts), re.S)

    def matches(self, line: str) -> bool:
        return bool(self.pattern.fullmatch(line))


def read_catalogue(text: str) -> tuple[Trouble, ...]:
    """The entries of a catalogue in the form of ``troubleshooting.tsv`` (tab-separated; ``#``
    lines name the sections)."""
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    rows = csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
    return tuple(
        Trouble(r["kind"], r["message"], r["meaning"], r["action"], int(r["exit"])) for r in rows
    )


CATALOGUE: tuple[Trouble, ...] = read_catalogue(
    files("interp").joinpath("troubleshooting.tsv").read_text(encoding="utf-8")
)


def find(line: str) -> Trouble | None:
    """The catalogue entry a printed line (or a raised message) matches, if any."""
    text = line.removeprefix("error: ")
    return next((t for t in CATALOGUE if t.matches(line) or t.matches(text)), None)

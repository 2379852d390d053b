"""The catalogue of every message the command line can end with: what it means, what to do.

The entries are data, one line each, in ``interp/troubleshooting.tsv``: the kind (the error
type, or what prints it), the exit code, the message as a template (``{}`` where the message
names a file, a number, a value), what it means and what to do; ``#`` lines head the sections.
Adding a message to the package is adding its line there. The README's
"Troubleshooting" section is generated from it (``python -m interp.troubleshooting``), and
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

BEGIN, END = "<!-- begin troubleshooting -->", "<!-- end troubleshooting -->"
EXIT_SIGTERM = 143


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


def _read_catalogue() -> tuple[Trouble, ...]:
    """The entries of ``troubleshooting.tsv`` (tab-separated; ``#`` lines name the sections)."""
    text = files("interp").joinpath("troubleshooting.tsv").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    rows = csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
    return tuple(Trouble(r["kind"], r["message"], r["meaning"], r["action"], int(r["exit"])) for r in rows)


CATALOGUE: tuple[Trouble, ...] = _read_catalogue()


def find(line: str) -> Trouble | None:
    """The catalogue entry a printed line (or a raised message) matches, if any."""
    text = line.removeprefix("error: ")
    return next((t for t in CATALOGUE if t.matches(line) or t.matches(text)), None)


def render() -> str:
    """The README section: one table per kind of trouble."""
    out = [BEGIN, "", "Every message the command line can end with, generated from `interp/troubleshooting.tsv`. "
           "`…` stands for the part that names your file, value or number. Errors print as `error: <message>`.", ""]
    for kind in dict.fromkeys(t.kind for t in CATALOGUE):
        entries = [t for t in CATALOGUE if t.kind == kind]
        codes = sorted({t.exit for t in entries} | ({EXIT_SIGTERM} if kind == "interrupted" else set()))
        status = "the command goes on" if codes == [0] else "exit " + " / ".join(map(str, codes))
        out += [f"**{kind}** ({status})", "", "| message | what it means | what to do |", "| --- | --- | --- |"]
        out += [f"| `` {_cell(t.message.replace('{}', '…'))} `` | {_cell(t.meaning)} | {_cell(t.action)} |" for t in entries]
        out.append("")
    out.append(END)
    return "\n".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


if __name__ == "__main__":
    print(render())

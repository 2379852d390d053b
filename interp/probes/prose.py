"""The shipped prose suite and the suite cards.

``interp/data/prose.txt`` is ordinary English written for this toolkit (one probe per line: short and
long sentences, questions, lists, quotes, numbers, code-like text). It elicits the token-level
roles: previous/current token, first-token sinks, delimiter, local and broad heads. The data
folder installs as the package ``interp.data``, so it is read through importlib.resources and
works the same from a checkout and from an installed wheel.

``interp/data/CARDS.md`` holds one card per suite under a ``## <name>`` heading; :func:`suite_card`
returns that section, so the text shown in reports has a single source.
"""

from __future__ import annotations

from importlib.resources import files

from interp.probes.base import NATURAL, Suite
from interp.probes.readers import sentences_from_text


def _data_text(name: str) -> str:
    return (files("interp.data") / name).read_text(encoding="utf-8")


def suite_card(name: str) -> str:
    """The body of the ``## name`` section of interp/data/CARDS.md (heading's first word = ``name``)."""
    lines = _data_text("CARDS.md").split("\n")
    body: list[str] | None = None
    for line in lines:
        if line.startswith("## "):
            if body is not None:
                break
            if line[3:].split()[0].strip("`") == name:
                body = []
        elif body is not None:
            body.append(line)
    if body is None:
        raise KeyError(f"no card named {name!r} in interp/data/CARDS.md")
    return "\n".join(body).strip()


def prose_suite(max_sentences: int | None = None) -> Suite:
    """The shipped prose corpus as a NATURAL suite named "prose"; the first ``max_sentences``
    lines when given (the file's order mixes lengths and styles, so a prefix stays varied)."""
    if max_sentences is not None and max_sentences < 1:
        raise ValueError(f"max_sentences must be >= 1 or None, got {max_sentences}")
    sentences = sentences_from_text(_data_text("prose.txt"), "prose.txt")
    sentences = sentences[:max_sentences]
    return Suite(name="prose", kind=NATURAL, sentences=tuple(sentences), card=suite_card("prose"))

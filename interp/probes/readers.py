"""Readers for user probe corpora: plain text, JSON lines, CSV and CoNLL-U.

Every reader returns word-level :class:`Sentence` objects whose ``source`` is "file:line", so a
later stage can point back at the probe. Text, JSONL and CSV corpora carry no word annotation
(``words`` and ``arcs`` stay empty: they feed the token-level features). CoNLL-U corpora carry
gold trees, which are validated before use, because a broken tree would silently turn into wrong
syntactic scores.

Every problem raises :class:`CorpusError` with one line of the form
``FILE:LINE: what is wrong; what to do``, which the CLI prints without a traceback.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path

from interp.errors import CorpusError
from interp.probes.base import Arc, Sentence


def _check_file(path: str | Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{path}: no such corpus file; check the path")
    if path.is_dir():
        raise CorpusError(f"{path}: is a directory, not a corpus file; name one file inside it")
    return path


def _decode(path: str | Path) -> tuple[Path, str]:
    """Read a corpus file as UTF-8 text (a leading byte-order mark is dropped)."""
    path = _check_file(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise CorpusError(f"{path}:{line}: bytes that are not UTF-8; re-save the file as UTF-8") from None
    return path, text.removeprefix("\ufeff")


def _lines(text: str) -> list[str]:
    # split("\n"), not splitlines(): the latter also splits at \x0b, \x1c, U+2028 ... which
    # would shift line numbers away from what an editor shows.
    return [line.rstrip("\r") for line in text.split("\n")]


def _nonempty(path: Path, sentences: list[Sentence], what: str) -> list[Sentence]:
    if not sentences:
        raise CorpusError(f"{path}: empty corpus: no usable text; add at least one {what}")
    return sentences


def sentences_from_text(text: str, name: str) -> list[Sentence]:
    """One sentence per non-empty line of ``text``; sources are "name:line"."""
    return [Sentence(text=line.strip(), source=f"{name}:{i}")
            for i, line in enumerate(_lines(text), start=1) if line.strip()]


def read_text(path: str | Path) -> list[Sentence]:
    """Plain text, one probe per non-empty line (surrounding whitespace dropped)."""
    path, text = _decode(path)
    return _nonempty(path, sentences_from_text(text, str(path)), "non-empty line")


def read_jsonl(path: str | Path, field: str = "text") -> list[Sentence]:
    """JSON lines: each non-empty line an object whose ``field`` holds the probe text."""
    path, text = _decode(path)
    sentences = []
    for i, line in enumerate(_lines(text), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise CorpusError(f"{path}:{i}: not valid JSON ({err.msg}); write one JSON object per line") from None
        if not isinstance(record, dict) or field not in record:
            raise CorpusError(f"{path}:{i}: no field {field!r}; give each object a {field!r} field "
                              f"or pick the field that holds the text")
        value = record[field]
        if not isinstance(value, str):
            raise CorpusError(f"{path}:{i}: field {field!r} is {type(value).__name__}, not text; "
                              f"store the probe as a string")
        if value.strip():
            sentences.append(Sentence(text=value.strip(), source=f"{path}:{i}"))
    return _nonempty(path, sentences, f"object with a non-empty {field!r} field")


def read_csv(path: str | Path, column: str = "text") -> list[Sentence]:
    """CSV with a header row; the probe text is in ``column``. Empty cells are skipped.

    The source line is the line where the record starts (a quoted cell may span lines).
    """
    path, text = _decode(path)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    columns = reader.fieldnames or []
    if column not in columns:
        present = ", ".join(repr(c) for c in columns) or "none"
        raise CorpusError(f"{path}:1: no column {column!r} (columns: {present}); name the text column")
    sentences = []
    start = reader.line_num + 1
    try:
        for row in reader:
            value = row[column] or ""  # None when a row is shorter than the header
            if value.strip():
                sentences.append(Sentence(text=value.strip(), source=f"{path}:{start}"))
            start = reader.line_num + 1
    except csv.Error as err:
        raise CorpusError(f"{path}:{reader.line_num}: malformed CSV ({err}); check the quoting") from None
    return _nonempty(path, sentences, f"row with text in column {column!r}")


# --- CoNLL-U ---------------------------------------------------------------------------------

def _conllu_blocks(text: str) -> list[tuple[int, list[tuple[int, str]]]]:
    """Sentences as (first line, [(line number, word line)]), split at blank lines. The first
    line counts comments (``# sent_id``), so a source points at where the sentence starts."""
    blocks: list[tuple[int, list[tuple[int, str]]]] = []
    start = None
    for i, line in enumerate(_lines(text), start=1):
        if not line.strip():
            start = None
            continue
        if start is None:
            start = i
            blocks.append((start, []))
        if not line.startswith("#"):
            blocks[-1][1].append((i, line))
    return [(first, rows) for first, rows in blocks if rows]


def _check_tree(path: Path, first: int, heads: list[int]) -> None:
    """One root, every head inside the sentence, and no cycles: each word must reach the root."""
    n = len(heads)
    roots = [i for i, h in enumerate(heads) if h == 0]
    if len(roots) != 1:
        raise CorpusError(f"{path}:{first}: broken tree: {len(roots)} words with HEAD 0, need exactly one; "
                          f"fix the HEAD column")
    for start in range(n):
        node, steps = start, 0
        while heads[node] != 0:
            node, steps = heads[node] - 1, steps + 1
            if steps > n:
                raise CorpusError(f"{path}:{first}: broken tree: word {start + 1} is in a cycle of HEADs; "
                                  f"fix the HEAD column")


def _conllu_words(path: Path, block: list[tuple[int, str]]) -> list[tuple[int, str, int, str, bool]]:
    """(line, form, head, deprel, space after) per syntactic word, checking columns and ids."""
    words: list[tuple[int, str, int, str, bool]] = []
    glued: set[int] = set()  # last word ids of multiword tokens marked SpaceAfter=No
    for lineno, line in block:
        cols = line.split("\t")
        if len(cols) != 10:
            raise CorpusError(f"{path}:{lineno}: {len(cols)} tab-separated columns, CoNLL-U needs 10; "
                              f"separate columns with tabs")
        wid, form, head, deprel, misc = cols[0], cols[1], cols[6], cols[7], cols[9].split("|")
        if "." in wid:  # an empty node of the enhanced graph: not part of the basic tree
            continue
        if "-" in wid:  # a multiword token: its words follow on their own lines, and carry the text
            if "SpaceAfter=No" in misc and wid.split("-")[1].isdigit():
                glued.add(int(wid.split("-")[1]))
            continue
        if not wid.isdigit() or int(wid) != len(words) + 1:
            raise CorpusError(f"{path}:{lineno}: word id {wid!r}, expected {len(words) + 1}; "
                              f"number the words 1, 2, 3 ... in order")
        if not head.isdigit():
            raise CorpusError(f"{path}:{lineno}: HEAD {head!r} is not a word id; fill the HEAD column")
        # The text is built from the words, so a multiword token's SpaceAfter=No goes after its last word.
        space = "SpaceAfter=No" not in misc and int(wid) not in glued
        words.append((lineno, form, int(head), deprel, space))
    return words


def _conllu_sentence(path: Path, first: int, block: list[tuple[int, str]]) -> Sentence | None:
    """Text, word spans and arcs of one CoNLL-U sentence, after validation."""
    words = _conllu_words(path, block)
    if not words:
        return None
    for lineno, _, head, _, _ in words:
        if head > len(words):
            raise CorpusError(f"{path}:{lineno}: broken tree: HEAD {head} is outside the sentence "
                              f"of {len(words)} words; fix the HEAD column")
    _check_tree(path, first, [w[2] for w in words])
    text, spans = "", []
    for k, (_, form, _, _, space) in enumerate(words, start=1):
        spans.append((len(text), len(text) + len(form)))
        text += form
        if k < len(words) and space:
            text += " "
    # Subtypes (nsubj:pass, obl:tmod) collapse to the base relation; the names stay UD's. Note that
    # UD attaches a preposition as `case` of its noun (noun = head), the reverse of the
    # prep/pobj pair of the syntax generator, so the two suites' relations are not merged.
    arcs = tuple(Arc(k, head - 1, rel.split(":")[0])
                 for k, (_, _, head, rel, _) in enumerate(words) if head != 0)
    return Sentence(text=text, words=tuple(spans), arcs=arcs, source=f"{path}:{first}")


def read_conllu(path: str | Path) -> list[Sentence]:
    """CoNLL-U (Universal Dependencies): text from FORM joined by spaces except after words whose
    MISC has SpaceAfter=No, words as character spans, arcs from HEAD/DEPREL (root arcs left out).
    Multiword-token lines (``1-2``) and empty nodes (``1.1``) are skipped."""
    path, text = _decode(path)
    parsed = (_conllu_sentence(path, first, block) for first, block in _conllu_blocks(text))
    return _nonempty(path, [s for s in parsed if s is not None], "sentence of word lines")


# Suffix -> reader(path, column). ``column`` names the JSONL field / CSV column; others ignore it.
READERS: dict[str, Callable[[Path, str | None], list[Sentence]]] = {
    ".txt": lambda path, column: read_text(path),
    ".jsonl": lambda path, column: read_jsonl(path, column or "text"),
    ".csv": lambda path, column: read_csv(path, column or "text"),
    ".conllu": lambda path, column: read_conllu(path),
}


def read_corpus(path: str | Path, column: str | None = None) -> list[Sentence]:
    """Read a user corpus, choosing the reader by file suffix (see :data:`READERS`)."""
    path = _check_file(path)
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        supported = ", ".join(sorted(READERS))
        raise CorpusError(f"{path}: unknown corpus format {path.suffix or '(no suffix)'!r}; "
                          f"use one of {supported}")
    return reader(path, column)

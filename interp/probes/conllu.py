"""CoNLL-U (Universal Dependencies) sentences with their gold trees, validated.

The text is built from FORM, joined by spaces except after words whose MISC has
``SpaceAfter=No``; words become character spans and arcs come from HEAD/DEPREL (root arcs left
out). Multiword-token lines (``1-2``) carry no tree, only surface text, and empty nodes
(``1.1``) belong to the enhanced graph, not the basic tree: both are skipped once their ids
are checked. A tree must have exactly one root, heads inside the sentence and no cycles;
anything else raises :class:`CorpusError` naming the file and line, because a broken tree
would silently become wrong syntactic scores.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from interp.errors import CorpusError
from interp.probes.base import Arc, Sentence

_INT = re.compile(
    r"[0-9]+"
)  # ASCII digits only: str.isdigit() also accepts '²', which int() refuses
_RANGE = re.compile(r"([0-9]+)-([0-9]+)")
_EMPTY_NODE = re.compile(r"[0-9]+\.[0-9]+")
MAX_SENTENCE_CHARS = 100_000
MAX_WORD_LINES = 10_000  # a "sentence" longer than this is a file without blank lines
_TOO_LONG = 10**9  # what an id of 10 or more digits reads as: beyond any sentence

Word = tuple[int, str, int, str, bool]  # line, form, head, deprel, space after


def _blocks(
    path: Path, lines: Iterable[tuple[int, str]]
) -> Iterator[tuple[int, list[tuple[int, str]]]]:
    """Sentences as (first line, [(line number, word line)]), split at blank lines, streamed. The
    first line counts comments (``# sent_id``), so a source points at where the sentence starts."""
    first: int | None = None  # the line the current sentence starts on
    rows: list[tuple[int, str]] = []
    for i, line in lines:
        if not line.strip():
            if rows and first is not None:
                yield first, rows
            first, rows = None, []
            continue
        first = i if first is None else first
        if not line.startswith("#"):
            rows.append((i, line))
            if len(rows) > MAX_WORD_LINES:
                raise CorpusError(
                    f"{path}:{first}: sentence of more than {MAX_WORD_LINES:,} lines; "
                    f"end each sentence with a blank line"
                )
    if rows and first is not None:
        yield first, rows


def _check_tree(path: Path, first: int, heads: list[int]) -> None:
    """One root, every head inside the sentence, and no cycles: each word must reach the root.

    Linear in the sentence length: each word is walked up at most once, and a walk stops at the
    first word already known to reach the root (a 10,000-word chain takes milliseconds)."""
    roots = [i for i, h in enumerate(heads) if h == 0]
    if len(roots) != 1:
        raise CorpusError(
            f"{path}:{first}: broken tree: {len(roots)} words with HEAD 0, need exactly one; "
            f"fix the HEAD column"
        )
    state = [0] * len(heads)  # 0: not seen, 1: on the current walk, 2: reaches the root
    for start in range(len(heads)):
        walk, node = [], start
        while node >= 0 and state[node] == 0:
            state[node] = 1
            walk.append(node)
            node = heads[node] - 1  # -1: the root's head
        if node >= 0 and state[node] == 1:  # met the current walk again: a cycle
            raise CorpusError(
                f"{path}:{first}: broken tree: word {node + 1} is in a cycle of HEADs; "
                f"fix the HEAD column"
            )
        for visited in walk:
            state[visited] = 2


def _id(digits: str) -> int:
    """A word id from ASCII digits; an id of more digits than any sentence holds words reads as
    one past the limit (Python refuses to parse integers of more than 4,300 digits)."""
    return int(digits) if len(digits) < 10 else _TOO_LONG


def _shown(text: str, limit: int = 20) -> str:
    """A field as an error message shows it: cut after ``limit`` characters."""
    return text if len(text) <= limit else text[:limit] + "..."


def _skipped_id(
    path: Path,
    lineno: int,
    wid: str,
    next_id: int,
    misc: list[str],
    glued: set[int],
    ranges: list[tuple[int, str, int]],
) -> bool:
    """True for a multiword-token or empty-node line (after checking its id); records the last
    word of a multiword token marked SpaceAfter=No in ``glued`` and every range in ``ranges``."""
    if "." in wid:
        if not _EMPTY_NODE.fullmatch(wid):
            raise CorpusError(
                f"{path}:{lineno}: empty node id {wid!r} is not of the form N.M; fix the ID column"
            )
        return True
    if "-" in wid:
        match = _RANGE.fullmatch(wid)
        if not match or _id(match[1]) != next_id or _id(match[2]) <= _id(match[1]):
            raise CorpusError(
                f"{path}:{lineno}: multiword token range {_shown(wid)!r} must be {next_id}-M with M > "
                f"{next_id} (the ids of the words that follow); fix the ID column"
            )
        if ranges and ranges[-1][2] >= next_id:
            raise CorpusError(
                f"{path}:{lineno}: multiword token range {_shown(wid)!r} overlaps the range {ranges[-1][1]!r} "
                f"before it; fix the ID column"
            )
        if "SpaceAfter=No" in misc:
            glued.add(_id(match[2]))
        ranges.append((lineno, _shown(wid), _id(match[2])))
        return True
    return False


def _words(path: Path, block: list[tuple[int, str]]) -> list[Word]:
    """(line, form, head, deprel, space after) per syntactic word, checking columns and ids."""
    words: list[Word] = []
    glued: set[int] = set()  # last word ids of multiword tokens marked SpaceAfter=No
    ranges: list[tuple[int, str, int]] = []  # (line, id, last word) of multiword tokens
    for lineno, line in block:
        cols = line.split("\t")
        if len(cols) != 10:
            raise CorpusError(
                f"{path}:{lineno}: {len(cols)} tab-separated columns, CoNLL-U needs 10; "
                f"separate columns with tabs"
            )
        wid, form, head, deprel, misc = cols[0], cols[1], cols[6], cols[7], cols[9].split("|")
        if _skipped_id(path, lineno, wid, len(words) + 1, misc, glued, ranges):
            continue
        if not _INT.fullmatch(wid) or _id(wid) != len(words) + 1:
            raise CorpusError(
                f"{path}:{lineno}: word id {_shown(wid)!r}, expected {len(words) + 1}; "
                f"number the words 1, 2, 3 ... in order"
            )
        if not form.strip():
            raise CorpusError(
                f"{path}:{lineno}: empty FORM (word {wid}); fill the FORM column (a word cannot be "
                f"empty)"
            )
        if not _INT.fullmatch(head):
            raise CorpusError(
                f"{path}:{lineno}: HEAD {_shown(head)!r} is not a word id; fill the HEAD column"
            )
        # The text is built from the words, so a multiword token's SpaceAfter=No goes after its last word.
        space = "SpaceAfter=No" not in misc and int(wid) not in glued
        words.append((lineno, form, _id(head), deprel, space))
    for lineno, wid, last in ranges:
        if last > len(words):
            raise CorpusError(
                f"{path}:{lineno}: multiword token range {wid!r} ends after the last word "
                f"({len(words)}); fix the ID column"
            )
    return words


def _sentence(path: Path, first: int, block: list[tuple[int, str]]) -> Sentence | None:
    """Text, word spans and arcs of one CoNLL-U sentence, after validation."""
    words = _words(path, block)
    if not words:
        return None
    for lineno, _, head, _, _ in words:
        if head > len(words):
            shown = head if head < _TOO_LONG else "of 10 or more digits"
            raise CorpusError(
                f"{path}:{lineno}: broken tree: HEAD {shown} is outside the sentence "
                f"of {len(words)} words; fix the HEAD column"
            )
    _check_tree(path, first, [w[2] for w in words])
    text, spans = "", []
    for k, (_, form, _, _, space) in enumerate(words, start=1):
        spans.append((len(text), len(text) + len(form)))
        text += form
        if k < len(words) and space:
            text += " "
    if len(text) > MAX_SENTENCE_CHARS:
        raise CorpusError(
            f"{path}:{first}: sentence longer than {MAX_SENTENCE_CHARS:,} characters; "
            f"split it (a blank line ends a sentence)"
        )
    # Subtypes (nsubj:pass, obl:tmod) collapse to the base relation; the names stay UD's. Note that
    # UD attaches a preposition as `case` of its noun (noun = head), the reverse of the
    # prep/pobj pair of the syntax generator, so the two suites' relations are not merged.
    arcs = tuple(
        Arc(k, head - 1, rel.split(":")[0])
        for k, (_, _, head, rel, _) in enumerate(words)
        if head != 0
    )
    return Sentence(text=text, words=tuple(spans), arcs=arcs, source=f"{path}:{first}")


def conllu_sentences(path: Path, lines: Iterable[tuple[int, str]]) -> Iterator[Sentence]:
    """The validated sentences of a CoNLL-U file, from its numbered lines."""
    for first, block in _blocks(path, lines):
        sentence = _sentence(path, first, block)
        if sentence is not None:
            yield sentence

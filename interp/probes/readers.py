"""Readers for user probe corpora: plain text, JSON lines, CSV and CoNLL-U.

Every reader returns word-level :class:`Sentence` objects whose ``source`` is "file:line", so a
later stage can point back at the probe. Text, JSONL and CSV corpora carry no word annotation
(``words`` and ``arcs`` stay empty: they feed the token-level features). CoNLL-U corpora carry
gold trees, validated before use (:mod:`interp.probes.conllu`), because a broken tree would
silently turn into wrong syntactic scores.

Files are streamed line by line, never read whole: a reader holds one line (at most
:data:`MAX_LINE_BYTES`) plus the sentences it keeps, and stops after ``limit`` sentences. Only
regular files are opened (a FIFO would block the reader forever, a device never ends). Text must
be UTF-8 (a leading byte-order mark is dropped), or UTF-16 that starts with its byte-order mark
(as Windows editors save "Unicode" text), without NUL characters. A line ends at ``\n``,
``\r\n`` or a lone ``\r`` (files from classic Mac OS), as editors count lines.

Every problem raises :class:`CorpusError` with one line of the form
``FILE:LINE: what is wrong; what to do``, which the CLI prints without a traceback.
"""

from __future__ import annotations

import csv
import errno
import io
import itertools
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from interp.errors import CorpusError
from interp.probes.base import Sentence

# A probe longer than this is not a sentence (and far beyond any model's context): refused
# rather than silently cut. 100,000 bytes are about 25,000 tokens of English.
MAX_LINE_BYTES = 100_000
_JSON_INT_DIGITS = 4000  # Python refuses to parse longer integers (sys.int_info)


def _check_file(path: str | Path) -> Path:
    """The path, if it names a readable regular file (checked without opening it)."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise CorpusError(f"{path}: corpus file not found (no such file); check the path") from None
    except OSError as exc:
        raise CorpusError(
            f"{path}: cannot read the corpus file ({exc.strerror}); check the path and its permissions"
        ) from None
    if stat.S_ISDIR(mode):
        raise CorpusError(f"{path}: is a directory, not a corpus file; name one file inside it")
    if not stat.S_ISREG(mode):
        raise CorpusError(
            f"{path}: not a regular file (a FIFO, device or socket); save the corpus to a file first"
        )
    if not os.access(path, os.R_OK):
        raise CorpusError(
            f"{path}: cannot read the corpus file (permission denied); check its permissions"
        )
    return path


def numbered_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, text without the line end) of a UTF-8 file, streamed."""
    path = _check_file(path)
    try:
        with open(path, "rb") as f:
            if f.read(2) in _UTF16_BOMS:
                f.seek(0)
                yield from _utf16_lines(path, f)
                return
            f.seek(0)
            for number, raw in enumerate(_raw_lines(f), start=1):
                yield number, _decode_line(path, number, raw)
    except OSError as exc:
        if exc.errno == errno.EISDIR:
            raise CorpusError(
                f"{path}: is a directory, not a corpus file; name one file inside it"
            ) from None
        raise CorpusError(
            f"{path}: cannot read the corpus file ({exc.strerror}); check the path and its permissions"
        ) from None


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_CHUNK = 1 << 16


def _raw_lines(f: io.BufferedReader) -> Iterator[bytes]:
    """Each line of a binary file (a trailing ``\n`` may remain); a line ends at ``\n``, ``\r\n``
    or a lone ``\r``. A line longer than MAX_LINE_BYTES comes out longer than that and is the last (the
    caller refuses it): memory stays bounded whatever the file holds."""
    carry = b""  # the start of a line after a lone \r, when a read stopped inside it
    while True:
        limit = MAX_LINE_BYTES + 1 - len(carry)
        read = f.readline(limit)
        raw = carry + read if carry else read
        if not raw:
            return
        if b"\r" not in raw:  # the usual line: the caller drops its \n
            carry = b""
            yield raw
            if len(read) == limit and not raw.endswith(b"\n"):
                return  # too long: the caller refuses it
            continue
        ended = raw.endswith(b"\n")
        body = raw[:-1] if ended else raw
        pieces = body.removesuffix(b"\r").split(b"\r") if ended else body.split(b"\r")
        carry = (
            b"" if ended or len(read) < limit else pieces.pop()
        )  # the last piece goes on in the next read
        yield from pieces
        if not pieces:  # no line end in MAX_LINE_BYTES bytes
            yield carry
            return


def _utf16_lines(path: Path, f: io.BufferedReader) -> Iterator[tuple[int, str]]:
    """Numbered lines of a UTF-16 file that starts with its byte-order mark, streamed."""
    text = io.TextIOWrapper(f, encoding="utf-16", errors="strict", newline=None)
    number = 0
    while True:
        try:
            line = text.readline(MAX_LINE_BYTES + 1)
        except UnicodeDecodeError:
            raise CorpusError(
                f"{path}:{number + 1}: bytes that are not UTF-16, although the file starts with a "
                f"UTF-16 byte-order mark; re-save the file as UTF-8"
            ) from None
        if not line:
            return
        number += 1
        if "\0" in line:
            raise CorpusError(
                f"{path}:{number}: NUL bytes: this looks like a binary file; give a UTF-8 text file"
            )
        if len(line) > MAX_LINE_BYTES and not line.endswith("\n"):
            raise CorpusError(
                f"{path}:{number}: line longer than {MAX_LINE_BYTES:,} bytes; split it into sentences "
                f"(one probe per line)"
            )
        yield number, line.removesuffix("\n")


def _decode_line(path: Path, number: int, raw: bytes) -> str:
    if b"\0" in raw:
        if number == 1 and _looks_utf16(raw):
            raise CorpusError(
                f"{path}:1: UTF-16 text without a byte-order mark; re-save the file as UTF-8"
            )
        raise CorpusError(
            f"{path}:{number}: NUL bytes: this looks like a binary file; give a UTF-8 text file"
        )
    if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
        raise CorpusError(
            f"{path}:{number}: line longer than {MAX_LINE_BYTES:,} bytes; split it into sentences "
            f"(one probe per line)"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CorpusError(
            f"{path}:{number}: bytes that are not UTF-8; re-save the file as UTF-8"
        ) from None
    if number == 1:
        text = text.removeprefix("\ufeff")
    return text.removesuffix("\n")


def _looks_utf16(raw: bytes) -> bool:
    """Text saved as UTF-16 without a byte-order mark: every other byte NUL (Latin script)."""
    if len(raw) < 4 or raw.count(0) == len(raw):
        return False
    return any(half.count(0) >= 0.9 * len(half) for half in (raw[0::2], raw[1::2]))


def _nonempty(path: Path, sentences: list[Sentence], what: str) -> list[Sentence]:
    if not sentences:
        raise CorpusError(f"{path}: empty corpus: no usable text; add at least one {what}")
    return sentences


def _take(sentences: Iterator[Sentence], limit: int | None) -> list[Sentence]:
    return list(itertools.islice(sentences, limit))


def sentences_from_text(text: str, name: str) -> list[Sentence]:
    """One sentence per non-empty line of ``text``; sources are "name:line"."""
    # split("\n"), not splitlines(): the latter also splits at \x0b, \x1c, U+2028 ... which
    # would shift line numbers away from what an editor shows.
    return [
        Sentence(text=line.rstrip("\r").strip(), source=f"{name}:{i}")
        for i, line in enumerate(text.split("\n"), start=1)
        if line.strip()
    ]


def read_text(path: str | Path, limit: int | None = None) -> list[Sentence]:
    """Plain text, one probe per non-empty line (surrounding whitespace dropped)."""
    path = _check_file(path)
    found = (
        Sentence(text=line.strip(), source=f"{path}:{i}")
        for i, line in numbered_lines(path)
        if line.strip()
    )
    return _nonempty(path, _take(found, limit), "non-empty line")


def _json_int(digits: str) -> int:
    # A number is never probe text (only its type is reported); an absurdly long one must not
    # end in Python's advice on raising its integer-digits limit.
    return int(digits) if len(digits) <= _JSON_INT_DIGITS else 0


def _json_record(path: Path, i: int, line: str) -> object:
    try:
        return json.loads(line, parse_int=_json_int)
    except json.JSONDecodeError as err:
        raise CorpusError(
            f"{path}:{i}: not valid JSON ({err.msg}); write one JSON object per line"
        ) from None
    except RecursionError:
        raise CorpusError(
            f"{path}:{i}: JSON nested too deeply; write one flat JSON object per line"
        ) from None


def _jsonl_sentences(path: Path, field: str) -> Iterator[Sentence]:
    for i, line in numbered_lines(path):
        if not line.strip():
            continue
        record = _json_record(path, i, line)
        if not isinstance(record, dict) or field not in record:
            raise CorpusError(
                f"{path}:{i}: no field {field!r}; give each object a {field!r} field "
                f"or pick the field that holds the text"
            )
        value = record[field]
        if not isinstance(value, str):
            raise CorpusError(
                f"{path}:{i}: field {field!r} is {type(value).__name__}, not text; "
                f"store the probe as a string"
            )
        if value.strip():
            yield Sentence(text=_clean_text(path, i, value).strip(), source=f"{path}:{i}")


def _clean_text(path: Path, i: int, value: str) -> str:
    """Text decoded from JSON escapes: no NUL, no unpaired UTF-16 surrogate, not too long."""
    if "\0" in value:
        raise CorpusError(f"{path}:{i}: the text holds a NUL character (\\u0000); remove it")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise CorpusError(
            f"{path}:{i}: the text holds an unpaired UTF-16 surrogate escape (such as \\ud800); "
            f"fix or remove the escape"
        ) from None
    if size > MAX_LINE_BYTES:
        raise CorpusError(
            f"{path}:{i}: text longer than {MAX_LINE_BYTES:,} bytes; split it into sentences "
            f"(one probe per object)"
        )
    return value


def read_jsonl(path: str | Path, field: str = "text", limit: int | None = None) -> list[Sentence]:
    """JSON lines: each non-empty line an object whose ``field`` holds the probe text."""
    path = _check_file(path)
    return _nonempty(
        path,
        _take(_jsonl_sentences(path, field), limit),
        f"object with a non-empty {field!r} field",
    )


def _csv_header(path: Path, reader: csv.DictReader, column: str) -> None:
    try:
        columns = reader.fieldnames or []
    except csv.Error as err:
        raise CorpusError(f"{path}:1: malformed CSV header ({err}); check the quoting") from None
    if column in columns:
        return
    present = ", ".join(repr(c) for c in columns) or "none"
    guess = next((d for d in (";", "\t", "|") if len(columns) == 1 and d in columns[0]), None)
    hint = (
        f"the file seems to be separated by {guess!r}: save it with commas"
        if guess
        else "name the text column"
    )
    raise CorpusError(f"{path}:1: no column {column!r} (columns: {present}); {hint}")


def _csv_sentences(path: Path, column: str) -> Iterator[Sentence]:
    # Lines keep their line end, so that a quoted cell spanning lines reads back whole; strict
    # mode refuses an unclosed quote instead of swallowing the rest of the file into one cell.
    lines = (line + "\n" for _, line in numbered_lines(path))
    reader = csv.DictReader(lines, strict=True)
    _csv_header(path, reader, column)
    start = reader.line_num + 1
    try:
        for row in reader:
            value = row[column] or ""  # None when a row is shorter than the header
            if value.strip():
                yield Sentence(text=value.strip(), source=f"{path}:{start}")
            start = reader.line_num + 1
    except csv.Error as err:
        raise CorpusError(f"{path}:{start}: malformed CSV ({err}); check the quoting") from None


def read_csv(path: str | Path, column: str = "text", limit: int | None = None) -> list[Sentence]:
    """CSV with a header row; the probe text is in ``column``. Empty cells are skipped.

    The source line is the line where the record starts (a quoted cell may span lines).
    """
    path = _check_file(path)
    return _nonempty(
        path, _take(_csv_sentences(path, column), limit), f"row with text in column {column!r}"
    )


def read_conllu(path: str | Path, limit: int | None = None) -> list[Sentence]:
    """CoNLL-U (Universal Dependencies); see :mod:`interp.probes.conllu`."""
    from interp.probes.conllu import conllu_sentences

    path = _check_file(path)
    return _nonempty(
        path, _take(conllu_sentences(path, numbered_lines(path)), limit), "sentence of word lines"
    )


# Suffix -> reader(path, column, limit). ``column`` names the JSONL field / CSV column; others ignore it.
READERS: dict[str, Callable[[Path, str | None, int | None], list[Sentence]]] = {
    ".txt": lambda path, column, limit: read_text(path, limit),
    ".jsonl": lambda path, column, limit: read_jsonl(path, column or "text", limit),
    ".csv": lambda path, column, limit: read_csv(path, column or "text", limit),
    ".conllu": lambda path, column, limit: read_conllu(path, limit),
}


def read_corpus(
    path: str | Path, column: str | None = None, limit: int | None = None
) -> list[Sentence]:
    """Read a user corpus (at most ``limit`` sentences), choosing the reader by file suffix."""
    path = _check_file(path)
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        supported = ", ".join(sorted(READERS))
        raise CorpusError(
            f"{path}: unknown corpus format {path.suffix or '(no suffix)'!r}; "
            f"use one of {supported}"
        )
    return reader(path, column, limit)

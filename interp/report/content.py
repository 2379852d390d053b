"""The report's content model: what a report says, built once, rendered twice.

A :class:`Document` is a title, lead lines and sections; a section is a sequence of blocks. Every
block is plain data whose text is already formatted, so the HTML page (``html.py``) and the PDF
(``pdf.py``) cannot disagree on a number, and adding something to the report is adding a block
where the document is built (``document.py``), not editing two layouts.

Blocks: :class:`Heading`, :class:`Text` (a paragraph, a note, or muted), :class:`Cards` (summary
numbers), :class:`Table`, :class:`FigureBlock`, :class:`KeyValues`, :class:`Code`, and
:class:`Group`, which lays its children out side by side (``cols``) or as a grid of figures
(``grid``) where the medium has room. Text is untrusted (corpus tokens, model names): renderers
escape it, and no block carries markup.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import pandas as pd

from interp.report.figures import SavedFigure, role_colour
from interp.report.formatting import fmt, percent

NUMERIC_KINDS = "iufb"


@dataclass(frozen=True)
class Heading:
    text: str
    kind: ClassVar[str] = "heading"


@dataclass(frozen=True)
class Text:
    text: str
    style: str = "p"  # p | note (something is missing or needs care) | muted
    kind: ClassVar[str] = "text"


@dataclass(frozen=True)
class Card:
    value: str
    label: str


@dataclass(frozen=True)
class Cards:
    items: tuple[Card, ...]
    kind: ClassVar[str] = "cards"


@dataclass(frozen=True)
class Cell:
    text: str
    sort: str | None = None  # numeric sort key ('' for missing); None for text columns
    colour: str | None = None  # role colour swatch


@dataclass(frozen=True)
class Table:
    id: str
    columns: tuple[str, ...]
    numeric: tuple[bool, ...]
    rows: tuple[tuple[Cell, ...], ...]
    filter: str | None = None  # label of the page's filter box (HTML), None: no box
    wrap: tuple[
        bool, ...
    ] = ()  # per column: long text that wraps (a description); default: none wraps
    kind: ClassVar[str] = "table"

    def wraps(self, j: int) -> bool:
        return j < len(self.wrap) and self.wrap[j]


@dataclass(frozen=True)
class FigureBlock:
    name: str
    title: str
    caption: str
    png: bytes
    kind: ClassVar[str] = "figure"

    @property
    def pixels(self) -> tuple[int, int]:
        """(width, height) of the PNG, from its IHDR chunk."""
        width, height = struct.unpack(">II", self.png[16:24])
        return width, height


@dataclass(frozen=True)
class KeyValues:
    pairs: tuple[tuple[str, str], ...]
    kind: ClassVar[str] = "keyvalues"


@dataclass(frozen=True)
class Code:
    """Preformatted text (a stage's config), folded away on the page."""

    label: str
    text: str
    kind: ClassVar[str] = "code"


@dataclass(frozen=True)
class Group:
    blocks: tuple[Block, ...]
    layout: str = "cols"  # cols: side by side where there is room | grid: figures in a grid | stack
    kind: ClassVar[str] = "group"


Block = Heading | Text | Cards | Table | FigureBlock | KeyValues | Code | Group


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class Document:
    title: str  # the page's heading
    page_title: str  # the browser tab / PDF metadata title
    lead: tuple[str, ...]
    sections: tuple[Section, ...]


# --- building blocks from data -----------------------------------------------------------------


def _missing(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def table(
    frame: pd.DataFrame,
    id: str,
    *,
    percent_columns: tuple[str, ...] = (),
    role_columns: tuple[str, ...] = ("role", "second_role"),
    filter: str | None = None,
    intervals: dict[str, tuple[str, str]] | None = None,
    wrap_columns: tuple[str, ...] = (),
) -> Table:
    """A DataFrame as a table block: cell text (``fmt``/``percent``), numeric sort keys, role swatches.

    ``intervals`` maps a column to its (low, high) columns: those two are not shown, and the
    column's cells read "12% (8 … 15%)" (sorted by the value). ``wrap_columns``: long text
    that wraps instead of widening the table.
    """
    intervals = intervals or {}
    hidden = {c for pair in intervals.values() for c in pair}
    shown = [c for c in frame.columns if c not in hidden]
    numeric = tuple(frame[c].dtype.kind in NUMERIC_KINDS for c in shown)
    rows = []
    for record in frame.to_dict("records"):
        cells = []
        for col, is_num in zip(shown, numeric):
            value = record[col]
            text = as_text = percent(value) if col in percent_columns else fmt(value)
            if col in intervals and not _missing(value):
                low, high = (record[c] for c in intervals[col])
                if not (_missing(low) or _missing(high)):
                    bound = percent if col in percent_columns else fmt
                    text = f"{as_text} ({bound(low)} … {bound(high)})"
            cells.append(
                Cell(
                    text,
                    ("" if _missing(value) else repr(float(value))) if is_num else None,
                    role_colour(str(value))
                    if col in role_columns and not _missing(value)
                    else None,
                )
            )
        rows.append(tuple(cells))
    wrap = tuple(c in wrap_columns for c in shown)
    return Table(
        id, tuple(str(c) for c in shown), numeric, tuple(rows), filter, wrap if any(wrap) else ()
    )


def figure(saved: SavedFigure) -> FigureBlock:
    if saved.png is None:
        raise ValueError(
            f"figure {saved.name} was kept in memory, not written: a report needs its file"
        )
    return FigureBlock(saved.name, saved.title, saved.caption, saved.png.read_bytes())


def key_values(pairs: Sequence[tuple[str, object]]) -> KeyValues:
    return KeyValues(tuple((str(k), fmt(v) if not isinstance(v, str) else v) for k, v in pairs))


def section(id: str, title: str, *blocks: Block | None) -> Section | None:
    """A section of the blocks that are there; None when there are none (the section is left out)."""
    kept = tuple(b for b in blocks if b is not None)
    return Section(id, title, kept) if kept else None


def titled(title: str, *blocks: Block | None) -> Group | None:
    """A heading and its blocks, kept together (one column of a ``cols`` group)."""
    kept = tuple(b for b in blocks if b is not None)
    return Group((Heading(title), *kept), layout="stack") if kept else None


def group(*blocks: Block | None, layout: str = "cols") -> Group | None:
    kept = tuple(b for b in blocks if b is not None)
    return Group(kept, layout) if kept else None

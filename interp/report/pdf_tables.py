"""How a table fits the PDF page's width: each column's width from the widths of its texts, and,
for a table too wide even one word per line, a smaller font for its cells.

A column is first as wide as its longest text. Where the columns together are wider than the
page, each keeps at least its longest piece (a word of text; a number and its interval in
parentheses, each whole) and the room left is shared in proportion to what each column gives up,
so a role name wraps between words and a value sits above its interval. Text widths come from the
registered fonts (interp.report.pdf registers them) and scale with the font size; padding does not.
"""

from __future__ import annotations

from reportlab.pdfbase import pdfmetrics

from interp.report import content as C

FONT, BOLD = "DejaVuSans", "DejaVuSans-Bold"
CELL_FONT, CELL_PAD = 7.5, 3
MIN_CELL_FONT = 5.5  # a table too wide for the page at CELL_FONT shrinks its font, not below this
TIGHT_PAD = 1.5  # cell padding of a table too wide for the page at CELL_PAD


def pieces(text: str, numeric: bool) -> list[str]:
    """The pieces a cell may wrap between: a text's words; a number's value and its interval in
    parentheses (``0.33 (0.25 ... 0.41)``), each kept whole."""
    if not numeric:
        return text.split()
    value, sep, interval = text.partition(" (")
    return [value, "(" + interval] if sep else [text]


def _natural_and_floors(
    t: C.Table, cell_pad: float, size: float
) -> tuple[list[float], list[float]]:
    """Per column at font ``size``: its natural width (its longest text; a header wraps at its
    spaces) and its floor (its longest piece, :func:`pieces`), padding included."""
    pad = 2 * cell_pad + 2

    def longest(texts: list[str], font: str, split=lambda text: [text]) -> float:
        parts = [p for text in texts for p in split(text)]
        return max((pdfmetrics.stringWidth(p, font, size) for p in parts), default=0.0)

    natural, floors = [], []
    for j, column in enumerate(t.columns):
        header = longest([column], BOLD, str.split)
        cells = [row[j].text for row in t.rows]
        natural.append(pad + max(header, longest(cells, FONT)))
        piece = longest(cells, FONT, lambda x, num=t.numeric[j]: pieces(x, num))
        floors.append(min(natural[-1], pad + max(header, piece)))
    return natural, floors


def column_widths(
    t: C.Table, width: float, cell_pad: float = CELL_PAD, size: float = CELL_FONT
) -> list[float]:
    """Each column as wide as its longest text; when that is too wide, the columns share the
    page, each first getting its longest piece (:func:`pieces`), so that a role name wraps
    between words, not inside one, and a number above its interval. Where even the pieces do not
    fit (a smaller font is the remedy: :func:`cell_size`), every column shrinks in proportion."""
    natural, floors = _natural_and_floors(t, cell_pad, size)
    if sum(natural) <= width:
        return natural
    if sum(floors) <= width:
        spare, grow = width - sum(floors), [w - f for w, f in zip(natural, floors)]
        return [f + spare * g / (sum(grow) or 1.0) for f, g in zip(floors, grow)]
    return [f * width / sum(floors) for f in floors]


def cell_size(t: C.Table, width: float, cell_pad: float) -> float:
    """The font size of a table's cells: ``CELL_FONT``, or, for a table whose columns' longest
    pieces do not fit the page side by side, the size at which they do (not below
    ``MIN_CELL_FONT``): text widths scale with the size, the padding does not."""
    _, floors = _natural_and_floors(t, cell_pad, CELL_FONT)
    padding = len(floors) * (2 * cell_pad + 2)
    text = sum(floors) - padding
    if sum(floors) <= width or text <= 0:
        return CELL_FONT
    return max(MIN_CELL_FONT, CELL_FONT * (width - padding) / text)

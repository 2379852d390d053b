"""The PDF renderer of the content model: the same :class:`~interp.report.content.Document` as the
HTML page, typeset with ReportLab's platypus.

Each block kind becomes flowables (a paragraph, a table, an image with its title and caption);
platypus flows them over A4 pages, splits long tables across pages with their header repeated,
keeps a figure with its caption, and the section headings become the PDF's outline. Nothing here
decides what the report says: a block added to the document shows in both renderers.

ReportLab installs from PyPI as a wheel with no system library (Pango, Cairo, a browser) and
needs no network. Fonts are DejaVu Sans from matplotlib's own data folder (matplotlib is a
dependency), so corpus tokens in any script DejaVu covers print as written. Text is escaped
before it reaches a Paragraph (whose mini-markup would otherwise read ``<b>`` in a token); table
cells that need no wrapping are drawn as plain strings. The file is written in ReportLab's
invariant mode (no timestamp or random id), so the same content gives the same bytes.
"""

from __future__ import annotations

import contextlib
import io
import math
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import matplotlib
from reportlab import rl_config
from reportlab.lib import colors
from reportlab.lib.enums import TA_RIGHT
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle
from reportlab.lib.units import cm, inch
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.platypus import (
    BaseDocTemplate,
    CondPageBreak,
    Flowable,
    Frame,
    Image,
    PageTemplate,
    Paragraph,
    Preformatted,
    Spacer,
    TableStyle,
)
from reportlab.platypus import Table as Grid

from interp.pipeline.rundir import atomic_path
from interp.report import content as C
from interp.report.figures import DPI, blend
from interp.report.pdf_tables import (
    BOLD,
    CELL_FONT,
    CELL_PAD,
    FONT,
    TIGHT_PAD,
    cell_size,
    column_widths,
    pieces,
)

MONO = "DejaVuSansMono"
MARGIN = 1.5 * cm
WIDTH, HEIGHT = A4[0] - 2 * MARGIN, A4[1] - 2 * MARGIN
CODE_WRAP = 110  # characters per line of preformatted text
LONG_TABLE_ROWS = 40
INK, MUTED, LINE, SOFT = (colors.HexColor(c) for c in ("#1d1d1f", "#5f6368", "#dadce0", "#f6f7f9"))


def _fonts() -> None:
    folder = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    for name, file in (
        (FONT, "DejaVuSans.ttf"),
        (BOLD, "DejaVuSans-Bold.ttf"),
        (MONO, "DejaVuSansMono.ttf"),
    ):
        if name not in pdfmetrics.getRegisteredFontNames():
            pdfmetrics.registerFont(TTFont(name, str(folder / file)))
    pdfmetrics.registerFontFamily(FONT, normal=FONT, bold=BOLD, italic=FONT, boldItalic=BOLD)


def _style(name: str, size: float = 9, font: str = FONT, colour=INK, **kwargs) -> ParagraphStyle:
    return ParagraphStyle(
        name, fontName=font, fontSize=size, leading=size * 1.3, textColor=colour, **kwargs
    )


STYLES = {
    "title": _style("title", 18, BOLD, spaceAfter=4),
    "lead": _style("lead", 9.5, colour=MUTED, spaceAfter=2),
    "h2": _style("h2", 14, BOLD, spaceBefore=10, spaceAfter=6, keepWithNext=1),
    "h3": _style("h3", 10.5, BOLD, spaceBefore=6, spaceAfter=3, keepWithNext=1),
    "p": _style("p", spaceAfter=4),
    "muted": _style("muted", colour=MUTED, spaceAfter=4),
    "note": _style(
        "note",
        backColor=colors.HexColor("#fff8e1"),
        borderColor=colors.HexColor("#f1d58a"),
        borderWidth=0.5,
        borderPadding=4,
        spaceBefore=4,
        spaceAfter=8,
    ),
    "fig": _style("fig", 10, BOLD, spaceBefore=6, spaceAfter=3, keepWithNext=1),
    "caption": _style("caption", 8.5, colour=MUTED, spaceAfter=8),
    "cell": _style("cell", CELL_FONT),
    "cellnum": _style("cellnum", CELL_FONT, alignment=TA_RIGHT),
    "head": _style("head", CELL_FONT, BOLD),
    "key": _style("key", CELL_FONT, colour=MUTED),
    "card_v": _style("card_v", 14, BOLD),
    "card_k": _style("card_k", 8, colour=MUTED),
    "code": _style("code", 6.5, MONO, spaceAfter=6),
}


def _para(text: str, style: str) -> Paragraph:
    return Paragraph(escape(text), STYLES[style])


# --- blocks ------------------------------------------------------------------------------------


def _sized(name: str, size: float) -> ParagraphStyle:
    """Paragraph style ``name`` at font ``size``."""
    style = STYLES[name]
    if size == style.fontSize:
        return style
    return ParagraphStyle(f"{name}-{size:.2f}", parent=style, fontSize=size, leading=size * 1.3)


def _cell(text: str, numeric: bool, wraps: bool, size: float) -> Any:
    """A table cell: its plain string, or where its column is narrower than its text, a paragraph
    that wraps between its pieces (:func:`~interp.report.pdf_tables.pieces`)."""
    if not wraps:
        return text
    if not numeric:
        return Paragraph(escape(text), _sized("cell", size))
    return Paragraph(
        " ".join(escape(p).replace(" ", "\xa0") for p in pieces(text, True)),
        _sized("cellnum", size),
    )


def _table(t: C.Table, width: float = WIDTH) -> Grid:
    pad = CELL_PAD if sum(column_widths(t, math.inf)) <= width else TIGHT_PAD
    size = cell_size(t, width, pad)
    widths = column_widths(t, width, pad, size)
    wrap = [
        w < max(pdfmetrics.stringWidth(r[j].text, FONT, size) for r in t.rows) + 2 * pad
        if t.rows
        else False
        for j, w in enumerate(widths)
    ]
    data = [[Paragraph(escape(c), _sized("head", size)) for c in t.columns]]
    data += [
        [_cell(cell.text, t.numeric[j], wrap[j], size) for j, cell in enumerate(row)]
        for row in t.rows
    ]
    style = [
        ("FONT", (0, 0), (-1, -1), FONT, size),
        ("TEXTCOLOR", (0, 0), (-1, -1), INK),
        ("BACKGROUND", (0, 0), (-1, 0), SOFT),
        ("LINEBELOW", (0, 0), (-1, -1), 0.25, LINE),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ("LEFTPADDING", (0, 0), (-1, -1), pad),
        ("RIGHTPADDING", (0, 0), (-1, -1), pad),
        ("TOPPADDING", (0, 0), (-1, -1), 1.5),
        ("BOTTOMPADDING", (0, 0), (-1, -1), 1.5),
    ]
    style += [("ALIGN", (j, 1), (j, -1), "RIGHT") for j, num in enumerate(t.numeric) if num]
    for i, row in enumerate(t.rows, start=1):
        for j, cell in enumerate(row):
            if cell.colour:
                style.append(
                    ("BACKGROUND", (j, i), (j, i), colors.Color(*blend(cell.colour, 0.35)))
                )
    return Grid(data, colWidths=widths, repeatRows=1, hAlign="LEFT", style=TableStyle(style))


def _figure(
    f: C.FigureBlock, width: float = WIDTH, max_height: float = HEIGHT - 3.5 * cm
) -> list[Flowable]:
    """Title, image (its size at 150 dpi, shrunk to fit), caption."""
    px_w, px_h = f.pixels
    w, h = px_w / DPI * inch, px_h / DPI * inch
    scale = min(1.0, width / w, max_height / h)
    picture = Image(io.BytesIO(f.png), width=w * scale, height=h * scale)
    picture.keepWithNext = 1  # with the title's keepWithNext: the three move to a new page together
    return [_para(f.title, "fig"), picture, _para(f.caption, "caption")]


def _cards(cards: C.Cards, per_row: int = 4) -> Grid:
    cells = [[_para(c.value, "card_v"), _para(c.label, "card_k")] for c in cards.items]
    rows: list[list[Any]] = [cells[i : i + per_row] for i in range(0, len(cells), per_row)]
    rows[-1] += [""] * (per_row - len(rows[-1]))
    style: list[tuple[Any, ...]] = [
        ("BACKGROUND", (i % per_row, i // per_row), (i % per_row, i // per_row), SOFT)
        for i in range(len(cells))
    ]
    style += [
        ("GRID", (0, 0), (-1, -1), 3, colors.white),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ("BOTTOMPADDING", (0, 0), (-1, -1), 6),
    ]
    return Grid(
        rows,
        colWidths=[WIDTH / per_row] * per_row,
        hAlign="LEFT",
        style=TableStyle(style),
        spaceAfter=8,
    )


def _key_values(kv: C.KeyValues) -> Grid:
    """Two columns, no header: the key muted, the value wrapped to what is left."""
    t = C.Table("kv", ("", ""), (False, False), tuple((C.Cell(k), C.Cell(v)) for k, v in kv.pairs))
    widths = column_widths(t, WIDTH)
    data = [[_para(k, "key"), _para(v, "cell")] for k, v in kv.pairs]
    style = [
        ("LINEBELOW", (0, 0), (-1, -1), 0.25, LINE),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ("LEFTPADDING", (0, 0), (-1, -1), CELL_PAD),
        ("RIGHTPADDING", (0, 0), (-1, -1), CELL_PAD),
        ("TOPPADDING", (0, 0), (-1, -1), 1),
        ("BOTTOMPADDING", (0, 0), (-1, -1), 1),
    ]
    return Grid(data, colWidths=widths, hAlign="LEFT", style=TableStyle(style), spaceAfter=6)


def _code(code: C.Code) -> list[Flowable]:
    lines = [
        piece for line in code.text.splitlines() for piece in textwrap.wrap(line, CODE_WRAP) or [""]
    ]
    return [_para(code.label, "h3"), Preformatted("\n".join(lines), STYLES["code"])]


def _grid(blocks: tuple[C.Block, ...]) -> list[Flowable]:
    """Figures two to a row (each half the page wide), anything else stacked."""
    half = WIDTH / 2 - 0.2 * cm
    figs = [b for b in blocks if isinstance(b, C.FigureBlock)]
    cells = [_figure(f, half, HEIGHT / 2 - 3 * cm) for f in figs]
    rows = [cells[i : i + 2] + [[]] * (2 - len(cells[i : i + 2])) for i in range(0, len(cells), 2)]
    out: list[Flowable] = (
        [
            Grid(
                rows,
                colWidths=[WIDTH / 2] * 2,
                hAlign="LEFT",
                style=TableStyle([("VALIGN", (0, 0), (-1, -1), "TOP")]),
            )
        ]
        if rows
        else []
    )
    return out + [f for b in blocks if not isinstance(b, C.FigureBlock) for f in flowables(b)]


def flowables(block: C.Block) -> list[Flowable]:
    """The flowables of one block (groups are stacked, figure grids two to a row)."""
    if isinstance(block, C.Heading):
        return [_para(block.text, "h3")]
    if isinstance(block, C.Text):
        return [_para(block.text, block.style)]
    if isinstance(block, C.Cards):
        return [_cards(block)]
    if isinstance(block, C.Table):
        return [_table(block), Spacer(1, 6)]
    if isinstance(block, C.FigureBlock):
        return _figure(block)
    if isinstance(block, C.KeyValues):
        return [_key_values(block)]
    if isinstance(block, C.Code):
        return _code(block)
    if isinstance(block, C.Group) and block.layout == "grid":
        return _grid(block.blocks)
    if isinstance(block, C.Group):
        return [f for child in block.blocks for f in flowables(child)]
    raise TypeError(f"no PDF rendering for block {type(block).__name__}")


# --- the document ------------------------------------------------------------------------------


class _Pages(BaseDocTemplate):
    """A4 pages with a footer; section headings become outline entries."""

    def __init__(self, path: str, doc: C.Document):
        super().__init__(
            path,
            pagesize=A4,
            leftMargin=MARGIN,
            rightMargin=MARGIN,
            topMargin=MARGIN,
            bottomMargin=MARGIN,
            title=doc.page_title,
            author="",
            subject=doc.title,
            creator="interp report",
            invariant=1,
        )
        self.footer = doc.page_title
        frame = Frame(
            MARGIN,
            MARGIN,
            WIDTH,
            HEIGHT,
            id="body",
            leftPadding=0,
            rightPadding=0,
            topPadding=0,
            bottomPadding=0,
        )
        self.addPageTemplates([PageTemplate("page", [frame], onPage=self._footer)])

    def _footer(self, canvas, _doc) -> None:
        canvas.saveState()
        canvas.setFont(FONT, 7)
        canvas.setFillColor(MUTED)
        canvas.drawString(
            MARGIN, MARGIN / 2, self.footer[:120]
        )  # drawString: no markup, no escaping needed
        canvas.drawRightString(A4[0] - MARGIN, MARGIN / 2, f"page {canvas.getPageNumber()}")
        canvas.restoreState()

    def beforeDocument(self) -> None:
        self.canv.showOutline()

    def afterFlowable(self, flowable: Flowable) -> None:
        key = getattr(flowable, "outline_key", None)
        if key:
            self.canv.bookmarkPage(key)
            self.canv.addOutlineEntry(flowable.getPlainText(), key, level=0)


def _start_long_tables_in_place(flowables: list[Flowable]) -> list[Flowable]:
    """Headings stay with what follows them, except a table longer than a page: kept together,
    it would leave the page before it empty. Its headings start on the current page if there is
    room for a few rows under them, and the table splits from there."""
    out: list[Flowable] = []
    for f in flowables:
        if isinstance(f, Grid) and f._nrows > LONG_TABLE_ROWS:  # noqa: SLF001 (platypus has no public row count)
            j = len(out)
            while j > 0 and out[j - 1].getKeepWithNext():
                j -= 1
                out[j].keepWithNext = 0
            out.insert(j, CondPageBreak(6 * cm))
        out.append(f)
    return out


def story(doc: C.Document) -> list[Flowable]:
    out: list[Flowable] = [_para(doc.title, "title"), *[_para(line, "lead") for line in doc.lead]]
    for sec in doc.sections:
        heading = _para(sec.title, "h2")
        heading.outline_key = f"section-{sec.id}"
        out.append(heading)
        for block in sec.blocks:
            out.extend(flowables(block))
    return _start_long_tables_in_place(out)


@contextlib.contextmanager
def _binary_streams() -> Iterator[None]:
    """Streams as compressed binary, not ASCII85 text (ReportLab's default, made for 7-bit
    channels: a fifth larger, and a third of the PDF's time in pure Python). A global setting,
    so it is restored after."""
    before = rl_config.useA85
    rl_config.useA85 = 0
    try:
        yield
    finally:
        rl_config.useA85 = before


def write_pdf(doc: C.Document, path: str | Path) -> Path:
    """Typeset ``doc`` into ``path`` (atomically); return the path."""
    _fonts()
    path = Path(path)
    with atomic_path(path) as tmp, _binary_streams():
        _Pages(str(tmp), doc).build(story(doc))
    return path

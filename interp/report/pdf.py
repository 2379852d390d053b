"""The PDF report, drawn with matplotlib's PdfPages (no browser, no external tool).

Pages, in order: the summary (as many pages as its lines need), one page per figure (the
saved PNG, fitted to an A4 page turned to match the figure's shape, with its title and
caption), then the head table, ``ROWS_PER_PAGE`` heads per page. :func:`page_count` says how
many pages that makes, so a test can check the file against its content.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any

import matplotlib
import pandas as pd
from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure
from matplotlib.image import imread
from matplotlib.patches import Rectangle

from interp.report.figures import RC, SavedFigure, blend, role_colour
from interp.report.summary import fmt, percent
from interp.rundir import atomic_path

A4 = (8.27, 11.69)
ROWS_PER_PAGE = 40
LINES_PER_PAGE = 56
WRAP = 96  # characters per summary line
HEADING = "# "


# --- summary -----------------------------------------------------------------------------------

def _section(title: str, lines: list[str]) -> list[str]:
    return [HEADING + title, *lines, ""] if lines else []


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The summary page as text lines; lines starting with '# ' are headings. Long lines are wrapped."""
    model, prov = summary["model"], summary["provenance"]
    n_layers, n_heads = summary["shape"]
    facts = ["; ".join(f"{k} {fmt(model[k])}" for k in ("source", "causal", "n_kv_heads", "d_head", "n_ctx",
                                                         "bos_policy", "dtype", "device") if k in model)]
    corpora = [f"{suite}: {fmt((info or {}).get('n_sequences'))} sequences, {fmt((info or {}).get('n_tokens'))} tokens, "
               f"hash {fmt((info or {}).get('hash'))}" for suite, info in summary["corpora"].items()]
    roles = []
    if summary["role_counts"]:
        roles.append("heads per role: " + "; ".join(f"{r['role']} {r['heads']}" for r in summary["role_counts"]))
    if summary["share_unexplained"] is not None:
        roles.append(f"share unexplained: {percent(summary['share_unexplained'])}")
    prunable = [f"{r['metric']}: {percent(r['within_1%'])} of heads within 1%, {percent(r['within_5%'])} within 5%"
                for r in summary["prunable"] or []]
    missing = [f"no {name} table" for name, present in summary["tables"].items() if not present]
    versions = ", ".join(f"{k} {fmt(v) or '-'}" for k, v in (prov.get("versions") or {}).items())
    provenance = [f"{k}: {fmt(prov.get(k)) or 'unknown'}" for k in ("created", "seed", "git_hash", "machine", "python")
                  if k in prov] + ([f"versions: {versions}"] if versions else [])
    stages = [f"{name}: {fmt((info or {}).get('seconds'))} s, finished {fmt((info or {}).get('finished'))}"
              for name, info in summary["stages"].items()]
    raw = [
        HEADING + f"Attention heads of {model.get('name') or 'unknown model'}",
        f"run {summary['run']}, {n_layers} layers x {n_heads} heads", "",
        *_section("Model", [f for f in facts if f]), *_section("Probe corpora", corpora), *_section("Primary roles", roles),
        *_section("Prunable heads (least important first, metric on held-out sequences within 1% / 5% of intact)", prunable),
        *_section("Effect shown in the figures", [summary["effect"]] if summary["effect"] else []),
        *_section("Not in this run", missing), *_section("Provenance", provenance), *_section("Stages", stages),
    ]
    lines: list[str] = []
    for line in raw:
        lines.extend(textwrap.wrap(line, WRAP, subsequent_indent="    ") or [""])
    return lines


def _summary_page(lines: list[str], page: int, pages: int) -> Figure:
    fig = Figure(figsize=A4)
    y, step = 0.95, 0.9 / LINES_PER_PAGE
    for i, line in enumerate(lines):
        if line.startswith(HEADING):
            title = page == 1 and i == 0
            fig.text(0.07, y, line[len(HEADING):], fontsize=15 if title else 12, weight="bold", va="top")
        else:
            fig.text(0.07, y, line, fontsize=9, va="top")
        y -= step
    fig.text(0.93, 0.03, f"summary {page}/{pages}", fontsize=7, ha="right", color="#666666")
    return fig


# --- figures -----------------------------------------------------------------------------------

def _figure_page(saved: SavedFigure) -> Figure:
    image = imread(saved.png)
    height, width = image.shape[:2]
    fig = Figure(figsize=A4 if height >= width else A4[::-1])
    fig.text(0.5, 0.965, saved.title, fontsize=13, weight="bold", ha="center", va="top")
    ax = fig.add_axes((0.04, 0.09, 0.92, 0.83))
    ax.imshow(image, interpolation="none")  # the PDF embeds the PNG as is: no resampling
    ax.set_axis_off()
    wrap = 110 if height < width else 80
    fig.text(0.5, 0.06, "\n".join(textwrap.wrap(saved.caption, wrap)), fontsize=9, ha="center", va="top")
    return fig


# --- head table --------------------------------------------------------------------------------

def _column_edges(text: list[list[str]], header: list[str], left: float, width: float) -> list[float]:
    """Left edge of each column (figure fraction), sized by the longest text the column holds."""
    chars = [max([len(h)] + [len(row[c]) for row in text]) + 2 for c, h in enumerate(header)]
    scale = width / sum(chars)
    edges, x = [], left
    for n in chars:
        edges.append(x)
        x += n * scale
    return edges + [x]


def _table_page(rows: pd.DataFrame, page: int, pages: int, total: int) -> Figure:
    """One page of the head table, drawn as text on a grid (matplotlib's Table is far slower)."""
    fig = Figure(figsize=A4[::-1])
    fig.text(0.05, 0.965, f"Heads ({total} in all), page {page} of {pages}", fontsize=13, weight="bold", va="top")
    header = [str(c) for c in rows.columns]
    text = [[fmt(v) for v in row] for row in rows.itertuples(index=False)]
    edges = _column_edges(text, header, 0.05, 0.9)
    step, top = 0.86 / (ROWS_PER_PAGE + 1), 0.91
    for r, cells in enumerate([header, *text]):
        y = top - r * step
        shade = "#e6e6e6" if r == 0 else ("#f6f6f6" if r % 2 == 0 else None)
        if shade:
            fig.add_artist(Rectangle((0.05, y - step), 0.9, step, transform=fig.transFigure, color=shade, lw=0))
        for c, value in enumerate(cells):
            if r and header[c] in ("role", "second_role") and value:
                fig.add_artist(Rectangle((edges[c], y - step * 0.92), edges[c + 1] - edges[c] - 0.004, step * 0.84,
                                         transform=fig.transFigure, color=blend(role_colour(value), 0.35), lw=0))
            fig.text(edges[c] + 0.003, y - step / 2, value, fontsize=8, va="center", weight="bold" if r == 0 else None)
    return fig


def table_pages(head_table: pd.DataFrame | None) -> int:
    return 0 if head_table is None or head_table.empty else math.ceil(len(head_table) / ROWS_PER_PAGE)


def page_count(summary: dict[str, Any], figures: list[SavedFigure], head_table: pd.DataFrame | None) -> int:
    """How many pages :func:`write_pdf` writes for this content."""
    return math.ceil(len(summary_lines(summary)) / LINES_PER_PAGE) + len(figures) + table_pages(head_table)


def write_pdf(run_dir: str | Path, figures: list[SavedFigure], summary: dict[str, Any],
              head_table: pd.DataFrame | None) -> Path:
    """Write ``RUN_DIR/report.pdf``: summary, one page per figure, the head table; return its path."""
    path = Path(run_dir) / "report.pdf"
    lines = summary_lines(summary)
    n_summary = math.ceil(len(lines) / LINES_PER_PAGE)
    n_table = table_pages(head_table)
    title = f"Attention heads of {summary['model'].get('name') or 'unknown model'} ({summary['run']})"
    with matplotlib.rc_context(RC), atomic_path(path) as tmp:
        with PdfPages(tmp, metadata={"Title": title, "Creator": "interp report", "CreationDate": None}) as pdf:
            for i in range(n_summary):
                pdf.savefig(_summary_page(lines[i * LINES_PER_PAGE:(i + 1) * LINES_PER_PAGE], i + 1, n_summary))
            for saved in figures:
                pdf.savefig(_figure_page(saved))
            for i in range(n_table):
                rows = head_table.iloc[i * ROWS_PER_PAGE:(i + 1) * ROWS_PER_PAGE]
                pdf.savefig(_table_page(rows, i + 1, n_table, len(head_table)))
    return path

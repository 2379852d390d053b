"""Saving, styling and the head-grid heatmap shared by every report figure.

Single-panel figures are built with matplotlib's object API (``matplotlib.figure.Figure``); faceted
ones come from seaborn's ``FacetGrid``/``relplot``, which make their figure through pyplot, so
:func:`save` closes every figure it writes: the report leaves no figure open in a user's session.
Heatmaps are ``seaborn.heatmap``. Each figure is written as PNG (150 dpi, embedded in the HTML
and the PDF) and SVG (for papers) under ``RUN_DIR/figures/`` with atomic writes.

Head grids share one convention: layers run down the y axis from layer 0 at the top, heads run
along x, one cell per head. Role colours come from the catalogue (``interp.roles.palette``), so
a colour means the same role in every figure and every run.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, TypeVar

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import pyplot as plt
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from interp.pipeline.rundir import write_bytes
from interp.roles import ROLE_NAMES, palette

DPI = 150
OTHER_ROLE_COLOUR = "#555555"  # a role name the catalogue does not know (an older run)
MISSING_COLOUR = "#f2f2f2"  # a head with no row in the table
DIVERGING = "RdBu_r"  # red = more / worse, blue = less

# parse_math off: corpus tokens, feature names and model names are plain text, so "$x$" or a
# lone "$" is drawn as written instead of being parsed (and failing) as mathtext.
RC: dict[Any, Any] = {  # matplotlib checks the keys when it reads them
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "legend.title_fontsize": 9,
    "text.parse_math": False,
    "svg.fonttype": "path",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.facecolor": "white",
    "svg.hashsalt": "interp",
}

F = TypeVar("F", bound=Callable[..., Figure])


@dataclass(frozen=True)
class SavedFigure:
    """A figure written to disk (or kept in memory for a notebook), with what the report prints
    around it."""

    name: str  # file stem under figures/
    title: str
    caption: str  # how to read it
    png: Path | None  # None: kept in memory, not written
    svg: Path | None
    kind: str = "main"  # main | exemplar (shown side by side in a grid)
    figure: Figure | None = None  # the figure itself when it was kept rather than written


def styled(build: F) -> F:
    """Build the figure inside the report's rc settings (rc is read when artists are created)."""

    @functools.wraps(build)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(RC):
            return build(*args, **kwargs)

    return wrapper  # type: ignore[return-value]  # the same signature, wrapped


def new_figure(width: float, height: float) -> Figure:
    with matplotlib.rc_context(RC):
        return Figure(figsize=(width, height), layout="constrained")


def png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def save(
    fig: Figure, fig_dir: Path | None, name: str, title: str, caption: str, kind: str = "main"
) -> SavedFigure:
    """Write ``fig`` as NAME.png and NAME.svg under ``fig_dir`` (atomically), close it, describe it.

    ``fig_dir`` None keeps the figure instead (``SavedFigure.figure``), for a notebook."""
    if fig_dir is None:
        return SavedFigure(name, title, caption, None, None, kind, fig)
    fig_dir = Path(fig_dir)
    png, svg = fig_dir / f"{name}.png", fig_dir / f"{name}.svg"
    try:
        write_bytes(png, png_bytes(fig))
        fig.set_layout_engine(
            "none"
        )  # keep the layout the PNG got: constrained layout is the slow part
        buf = io.BytesIO()
        with matplotlib.rc_context(RC):
            fig.savefig(buf, format="svg", metadata={"Date": None})
        write_bytes(svg, buf.getvalue())
    finally:
        plt.close(fig)  # a no-op for object-API figures; frees seaborn's pyplot-made ones
    return SavedFigure(name, title, caption, png, svg, kind)


def finish_facets(grid: sns.FacetGrid, title: str) -> Figure:
    """Lay out a FacetGrid's figure with a title above its facets' own titles; return the figure."""
    fig = grid.figure
    height = fig.get_figheight()
    fig.suptitle(title, y=1 - 0.1 / height, va="top")
    grid.tight_layout()
    fig.subplots_adjust(top=1 - 0.7 / height)
    return fig


# --- role colours ------------------------------------------------------------------------------


def role_colour(role: str) -> str:
    return palette().get(role, OTHER_ROLE_COLOUR)


def role_palette(roles: list[str]) -> dict[str, str]:
    """The catalogue colour of each role given (seaborn's ``palette=``)."""
    return {r: role_colour(r) for r in roles}


def role_handles(roles: list[str]) -> list[Patch]:
    """Legend entries for the roles present, in the order given (catalogue order)."""
    return [
        Patch(facecolor=role_colour(r), edgecolor="none", label=r.replace("_", " ")) for r in roles
    ]


def blend(colour: str, alpha: float) -> tuple[float, float, float]:
    """The colour laid over white at opacity ``alpha`` (so the PNG has no transparency)."""
    rgb = np.array(to_rgb(colour))
    r, g, b = alpha * rgb + (1 - alpha) * 1.0
    return float(r), float(g), float(b)


def role_code(role: str) -> str:
    """A short code drawn in role-map cells, so that similar colours stay distinguishable. No two
    roles share a code: a role whose initials are taken by one earlier in the catalogue takes
    more of its first word (first_token FT, frequent_token FrT)."""
    codes = _catalogue_codes()
    return codes.get(role) or _free_code(str(role), set(codes.values()))


@functools.cache
def _catalogue_codes() -> dict[str, str]:
    codes: dict[str, str] = {}
    for name in ROLE_NAMES:
        codes[name] = _free_code(name, set(codes.values()))
    return codes


def _free_code(role: str, taken: set[str]) -> str:
    """The shortest code of ``role`` not in ``taken``: a word's first three letters, or a
    name's initials with more of its first word as needed."""
    if role == "unexplained":
        return "?"
    first, *rest = [p for p in role.split("_") if p] or [role]
    if rest:
        tail = "".join(p[0] for p in rest).upper()
        options = [first[:n].capitalize() + tail for n in range(1, len(first) + 1)]
    else:
        options = [first[:n].capitalize() for n in range(3, len(first) + 1)]
    return next((code for code in options if code not in taken), role)


# --- head grids --------------------------------------------------------------------------------


def head_frame(frame: pd.DataFrame, column: str, shape: tuple[int, int]) -> pd.DataFrame:
    """``frame[column]`` as a layers x heads grid (rows L0.., columns H0..); heads without a row: NaN.

    Duplicate (layer, head) rows (a rerun appended to a table) are averaged, or the last kept for
    a text column; rows outside the shape are dropped.
    """
    n_layers, n_heads = shape
    numeric = pd.api.types.is_numeric_dtype(frame[column]) if column in frame else True
    if frame.empty:
        grid = pd.DataFrame()
    elif numeric:
        grid = frame.pivot_table(index="layer", columns="head", values=column, aggfunc="mean")
    else:
        grid = frame.drop_duplicates(["layer", "head"], keep="last").pivot(
            index="layer", columns="head", values=column
        )
    grid = grid.reindex(index=range(n_layers), columns=range(n_heads))
    grid.index = [f"L{i}" for i in range(n_layers)]
    grid.columns = [f"H{i}" for i in range(n_heads)]
    return grid.astype(float) if numeric else grid


def tick_step(n: int, max_labels: int) -> int:
    """Label every k-th row/column so that at most ``max_labels`` labels are drawn."""
    return max(1, -(-n // max_labels))


def head_heatmap(
    ax,
    grid: pd.DataFrame,
    *,
    cmap=DIVERGING,
    span: float | None = None,
    vmin: float | None = None,
    vmax: float | None = None,
    annot: bool | np.ndarray = False,
    fmt: str = ".2f",
    cbar: bool = True,
    cbar_label: str | None = None,
    font: float = 7,
    max_rows: int = 40,
    max_cols: int = 24,
    **kwargs,
):
    """``seaborn.heatmap`` of a :func:`head_frame` grid, missing heads pale grey, layer 0 at the top.

    ``span`` makes a symmetric diverging scale (±span); otherwise ``vmin``/``vmax``.
    """
    if span is not None:
        vmin, vmax = -span, span
    n_layers, n_heads = grid.shape
    ax.set_facecolor(MISSING_COLOUR)
    # seaborn draws the whole figure after each heatmap (to see whether tick labels overlap); with
    # the figure's other axes hidden meanwhile, a grid of 12 facets costs 12 facet draws, not 78.
    others = [a for a in ax.figure.axes if a is not ax and a.get_visible()]
    for other in others:
        other.set_visible(False)
    try:
        sns.heatmap(
            grid,
            ax=ax,
            cmap=cmap,
            vmin=vmin,
            vmax=vmax,
            annot=annot,
            fmt=fmt,
            annot_kws={"fontsize": font},
            mask=grid.isna(),
            xticklabels=tick_step(n_heads, max_cols),
            yticklabels=tick_step(n_layers, max_rows),
            cbar=cbar,
            cbar_kws={"label": cbar_label, "shrink": 0.9, "pad": 0.02} if cbar else None,
            **kwargs,
        )
    finally:
        for other in others:
            other.set_visible(True)
    ax.tick_params(length=0, labelrotation=0)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    return ax


def symmetric_span(values: np.ndarray | pd.DataFrame, floor: float = 0.0) -> float:
    """Half-width of a symmetric colour scale: the largest |value|, at least ``floor`` (never 0)."""
    array = np.asarray(values, dtype=float)
    finite = array[np.isfinite(array)]
    return max(float(np.abs(finite).max()) if finite.size else 0.0, floor) or 1e-9


def value_labels(grid: pd.DataFrame) -> np.ndarray:
    """Cell texts for an annotated heatmap: 2 decimals (3 for small values), no '-0.00', '' for NaN."""
    big = np.nanmax(np.abs(grid.to_numpy())) if np.isfinite(grid.to_numpy()).any() else 0
    fmt = ".2f" if big >= 0.1 else ".3f"

    def one(v: float) -> str:
        if not np.isfinite(v):
            return ""
        text = format(v, fmt)
        return text.lstrip("-") if float(text) == 0 else text

    return np.vectorize(one, otypes=[object])(grid.to_numpy())


def cell_size(n_layers: int, n_heads: int) -> tuple[float, float]:
    """Inches per head cell: roomy for tiny models, compact (but labelled) for 30 x 9."""
    return min(0.9, max(0.55, 3.0 / max(n_heads, 1))), min(0.5, max(0.3, 2.4 / max(n_layers, 1)))


def facet_cell(n_layers: int, n_heads: int) -> tuple[float, float]:
    """Inches per head cell inside a facet (smaller: several maps share a row)."""
    return min(0.45, max(0.2, 2.4 / max(n_heads, 1))), min(0.35, max(0.16, 1.8 / max(n_layers, 1)))


class Ticks(TypedDict):
    max_cols: int
    max_rows: int


def facet_ticks(n_layers: int, n_heads: int) -> Ticks:
    """``head_heatmap`` tick limits for a facet: a head label every 0.3 inch, a layer label every 0.16."""
    cw, ch = facet_cell(n_layers, n_heads)
    return {
        "max_cols": max(1, int(n_heads * cw / 0.3)),
        "max_rows": max(1, int(n_layers * ch / 0.16)),
    }

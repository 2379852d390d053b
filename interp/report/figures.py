"""Saving and styling shared by every report figure.

Figures are built with matplotlib's object API (``matplotlib.figure.Figure``), never pyplot, so
the report neither touches the user's interactive backend nor leaks open figures; PNGs are
rendered by Agg. Each figure is written as PNG (150 dpi, embedded in the HTML and the PDF) and
SVG (for papers) under ``RUN_DIR/figures/`` with atomic writes.
"""

from __future__ import annotations

import functools
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeVar

import matplotlib
import numpy as np
from matplotlib import colormaps
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from interp.roles import palette
from interp.rundir import write_bytes

DPI = 150
OTHER_ROLE_COLOUR = "#555555"  # a role name the catalogue does not know (an older run)
MISSING_COLOUR = "#f2f2f2"  # a head with no row in the table
DIVERGING = colormaps["RdBu_r"].with_extremes(bad=MISSING_COLOUR)  # red = more / worse, blue = less

# parse_math off: corpus tokens, feature names and model names are plain text, so "$x$" or a
# lone "$" is drawn as written instead of being parsed (and failing) as mathtext.
RC = {
    "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "xtick.labelsize": 8, "ytick.labelsize": 8,
    "legend.fontsize": 8, "legend.title_fontsize": 9, "text.parse_math": False, "svg.fonttype": "path",
    "axes.spines.top": False, "axes.spines.right": False, "figure.facecolor": "white",
}

F = TypeVar("F", bound=Callable[..., Figure])


@dataclass(frozen=True)
class SavedFigure:
    """A figure written to disk, with what the report prints around it."""

    name: str  # file stem under figures/
    title: str
    caption: str  # one line: how to read it
    png: Path
    svg: Path
    kind: str = "main"  # main | exemplar (the HTML shows exemplars in a grid)


def styled(build: F) -> F:
    """Build the figure inside the report's rc settings (rc is read when artists are created)."""

    @functools.wraps(build)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(RC):
            return build(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def new_figure(width: float, height: float) -> Figure:
    with matplotlib.rc_context(RC):
        return Figure(figsize=(width, height), layout="constrained")


def png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def save(fig: Figure, fig_dir: Path, name: str, title: str, caption: str, kind: str = "main") -> SavedFigure:
    """Write ``fig`` as NAME.png and NAME.svg under ``fig_dir`` (atomically) and describe it."""
    fig_dir = Path(fig_dir)
    png, svg = fig_dir / f"{name}.png", fig_dir / f"{name}.svg"
    write_bytes(png, png_bytes(fig))
    fig.set_layout_engine("none")  # keep the layout the PNG got: constrained layout is the slow part
    buf = io.BytesIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    write_bytes(svg, buf.getvalue())
    return SavedFigure(name, title, caption, png, svg, kind)


def role_colour(role: str) -> str:
    return palette().get(role, OTHER_ROLE_COLOUR)


def role_handles(roles: list[str]) -> list[Patch]:
    """Legend entries for the roles present, in the order given (catalogue order)."""
    return [Patch(facecolor=role_colour(r), edgecolor="none", label=r.replace("_", " ")) for r in roles]


def blend(colour: str, alpha: float) -> tuple[float, float, float]:
    """The colour laid over white at opacity ``alpha`` (so the PNG has no transparency)."""
    rgb = np.array(to_rgb(colour))
    return tuple(alpha * rgb + (1 - alpha) * 1.0)  # type: ignore[return-value]


def ink_for(rgb: tuple[float, float, float]) -> str:
    """Black or white, whichever reads better on ``rgb``."""
    r, g, b = rgb
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.55 else "white"


def tick_step(n: int, max_labels: int) -> int:
    """Label every k-th row/column so that at most ``max_labels`` labels are drawn."""
    return max(1, -(-n // max_labels))


def label_grid(ax, n_layers: int, n_heads: int, max_rows: int = 40, max_cols: int = 24) -> None:
    """Layer ticks on y (layer 0 at the top), head ticks on x, for an image with one cell per head."""
    ys = range(0, n_layers, tick_step(n_layers, max_rows))
    xs = range(0, n_heads, tick_step(n_heads, max_cols))
    ax.set_yticks(list(ys), [f"L{i}" for i in ys])
    ax.set_xticks(list(xs), [f"H{i}" for i in xs])
    ax.set_ylabel("layer")
    ax.set_xlabel("head")
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)


def role_code(role: str) -> str:
    """A short code drawn in role-map cells, so that similar colours stay distinguishable."""
    if role == "unexplained":
        return "?"
    parts = [p for p in str(role).split("_") if p]
    if len(parts) > 1:
        return "".join(p[0] for p in parts).upper()
    return str(role)[:3].capitalize()


def head_grid(frame, column: str, n_layers: int, n_heads: int, fill=np.nan) -> np.ndarray:
    """``frame[column]`` laid out as an (n_layers, n_heads) array; heads without a row get ``fill``."""
    dtype = float if isinstance(fill, float) else object
    grid = np.full((n_layers, n_heads), fill, dtype=dtype)
    for layer, head, value in zip(frame["layer"], frame["head"], frame[column]):
        if 0 <= int(layer) < n_layers and 0 <= int(head) < n_heads:
            grid[int(layer), int(head)] = value
    return grid


def annotate(ax, grid: np.ndarray, fmt: str, font: float = 7) -> None:
    span = np.nanmax(np.abs(grid)) if np.isfinite(grid).any() else 1.0
    for (layer, head), value in np.ndenumerate(grid):
        if np.isfinite(value):
            strong = abs(value) > 0.6 * span
            text = format(value, fmt)
            text = text.lstrip("-") if float(text) == 0 else text  # no "-0.00"
            ax.text(head, layer, text, ha="center", va="center", fontsize=font,
                    color="white" if strong else "black")


def diverging(ax, fig: Figure, grid: np.ndarray, label: str | None, shrink: float = 0.9, floor: float = 0.0,
              cax=None):
    """Symmetric red-blue image of ``grid`` with its colour bar; the scale spans at least ±floor."""
    span = float(np.nanmax(np.abs(grid))) if np.isfinite(grid).any() else 1.0
    span = max(span, floor) or 1e-9
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=DIVERGING, vmin=-span, vmax=span,
                      aspect="auto", interpolation="none")
    bar = fig.colorbar(image, cax=cax) if cax is not None else fig.colorbar(image, ax=ax, shrink=shrink, pad=0.02)
    bar.ax.tick_params(labelsize=7)
    bar.locator = MaxNLocator(4, symmetric=True)
    bar.update_ticks()
    if label:
        bar.set_label(label)
    return image

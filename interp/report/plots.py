"""The report's figures of roles (drawn by the report's sections, :mod:`.sections`).

Every ``plot_*`` function takes the run's DataFrames and the figures folder and returns a
:class:`~interp.report.figures.SavedFigure` (or a list of them), or None when the table it needs
is absent or empty. The feature figures live in :mod:`interp.report.feature_plots`, the effect
and pruning figures in :mod:`interp.report.effect_plots`, the exemplar patterns in
:mod:`interp.report.exemplar_plots`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeGuard

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from interp.report import summary as S
from interp.report.figures import (
    SavedFigure,
    blend,
    cell_size,
    head_frame,
    head_heatmap,
    new_figure,
    role_code,
    role_colour,
    role_handles,
    role_palette,
    save,
    styled,
    tick_step,
    value_labels,
)

MAX_ANNOTATED_CELLS = 150
SINK = "sink_mass"  # roles-table column: share of a head's attention on the first position
JITTER = 0.2  # half the spread of a layer's dots in the sink figure, in layers


def usable(frame: pd.DataFrame | None) -> TypeGuard[pd.DataFrame]:
    return frame is not None and not frame.empty


# --- role map ----------------------------------------------------------------------------------


def _role_cells(
    roles: pd.DataFrame, shape: tuple[int, int]
) -> tuple[pd.DataFrame, list, np.ndarray]:
    """Per head: an index into a list of cell colours (role colour, paler when unsure) and its text."""
    role = head_frame(roles, "role", shape).to_numpy()
    conf = head_frame(roles, "confidence", shape).to_numpy()
    index, labels = np.full(role.shape, np.nan), np.full(role.shape, "", dtype=object)
    colours: list[tuple[float, float, float]] = []
    for (layer, head), name in np.ndenumerate(role):
        if not isinstance(name, str):
            continue
        c = conf[layer, head]
        index[layer, head] = len(colours)
        colours.append(
            blend(role_colour(name), 1.0 if np.isnan(c) else 0.3 + 0.7 * float(np.clip(c, 0, 1)))
        )
        labels[layer, head] = role_code(name) + (
            "" if np.isnan(c) else " " + (f"{c:.2f}".lstrip("0") if c < 0.995 else "1")
        )
    grid = pd.DataFrame(
        index, index=[f"L{i}" for i in range(shape[0])], columns=[f"H{i}" for i in range(shape[1])]
    )
    return grid, colours, labels


@styled
def role_map_figure(
    roles: pd.DataFrame,
    shape: tuple[int, int],
    title: str | None = None,
    legend_roles: list[str] | None = None,
) -> Figure:
    """Layers x heads grid, each cell in its primary role's colour with the role's code.

    How to read it: the colour (and the code in the cell, spelled out in the legend) is the
    head's primary role; a paler cell and the number after the code mean lower confidence;
    grey "?" cells are unexplained; near-white cells without text have no row in the table.
    When the roles table has ``sink_mass``, a second, narrower map beside it shows each head's
    share of attention on the first position (the role is what the head does with the rest).
    ``legend_roles`` fixes the legend (two maps shown side by side share one); default: the roles present.
    """
    n_layers, n_heads = shape
    cw, ch = cell_size(n_layers, n_heads)
    present = legend_roles or S.role_order(roles["role"])
    sink = SINK in roles.columns and roles[SINK].notna().any()
    sink_w = max(1.4, 0.5 * n_heads * cw) if sink else 0.0
    fig = new_figure(
        n_heads * cw + sink_w + (1.2 if sink else 0) + 3.4,
        max(n_layers * ch + 1.3, 0.24 * len(present) + 1.6),
    )
    axes = (
        fig.subplots(1, 2, width_ratios=[n_heads * cw, sink_w], sharey=True)
        if sink
        else [fig.add_subplot()]
    )
    grid, colours, labels = _role_cells(roles, shape)
    head_heatmap(
        axes[0],
        grid,
        cmap=ListedColormap(colours or ["white"]),
        vmin=-0.5,
        vmax=max(len(colours), 1) - 0.5,
        annot=labels,
        fmt="",
        cbar=False,
        linewidths=1,
        linecolor="white",
        font=7 if ch >= 0.3 else 6,
    )
    axes[0].set_title(title or "Primary role per head (pale = low confidence)")
    if sink:
        mass = head_frame(roles, SINK, shape)
        small = n_layers * n_heads <= MAX_ANNOTATED_CELLS
        head_heatmap(
            axes[1],
            mass,
            cmap="Greys",
            vmin=0,
            vmax=1,
            annot=value_labels(mass) if small else False,
            fmt="",
            linewidths=0.5,
            linecolor="white",
            cbar_label="sink mass",
            font=6,
            max_cols=12,
        )
        axes[1].set_title("sink mass")
        axes[1].set_ylabel("")
    handles = role_handles(present)
    for h, name in zip(handles, present):
        h.set_label(f"{role_code(name)}  {name.replace('_', ' ')}")
    fig.legend(handles=handles, loc="outside right upper", title="role", frameon=False)
    return fig


def plot_role_map(
    roles: pd.DataFrame | None, fig_dir: Path | None, shape: tuple[int, int] | None = None
) -> SavedFigure | None:
    """Save the role map (see :func:`role_map_figure`); needs roles: layer, head, role, confidence."""
    if not usable(roles):
        return None
    sink = SINK in roles.columns and roles[SINK].notna().any()
    caption = (
        "Each cell is one head (layer 0 at the top): colour and code give its primary role, the number its "
        "confidence (paler = less sure); grey '?' heads are unexplained."
    )
    if sink:
        caption += (
            " Right: sink mass, the share of the head's attention on the first position (darker = more); "
            "the role says what the head does with the rest of its attention."
        )
    return save(
        role_map_figure(roles, shape or S.head_shape({}, roles)),
        fig_dir,
        "role_map",
        "Role map",
        caption,
    )


@styled
def _role_counts_figure(roles: pd.DataFrame, n_layers: int) -> Figure:
    present = S.role_order(roles["role"])
    fig = new_figure(7.5, max(2.6, 0.24 * n_layers + 1.2, 0.24 * len(present) + 1.2))
    ax = fig.add_subplot()
    sns.histplot(
        data=roles.assign(role=roles["role"].astype(str)),
        y="layer",
        hue="role",
        hue_order=present,
        palette=role_palette(present),
        multiple="stack",
        discrete=True,
        shrink=0.8,
        edgecolor="white",
        linewidth=0.5,
        alpha=1,
        ax=ax,
    )
    step = max(1, -(-n_layers // 40))
    ax.set_yticks(range(0, n_layers, step), [f"L{i}" for i in range(0, n_layers, step)])
    ax.set_ylim(n_layers - 0.5, -0.5)
    ax.set_xlabel("heads")
    ax.xaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]  # a MaxNLocator
    ax.set_title("Primary roles per layer")
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1), title="role", frameon=False)
    return fig


def plot_role_counts(
    roles: pd.DataFrame | None, fig_dir: Path | None, shape: tuple[int, int] | None = None
) -> SavedFigure | None:
    """Stacked bars: per layer (layer 0 at the top), how many heads carry each primary role."""
    if not usable(roles):
        return None
    n_layers = (shape or S.head_shape({}, roles))[0]
    return save(
        _role_counts_figure(roles, n_layers),
        fig_dir,
        "role_counts",
        "Roles per layer",
        "One bar per layer (layer 0 at the top), split by primary role: where in depth each kind of head lives.",
    )


@styled
def _sink_figure(roles: pd.DataFrame, n_layers: int) -> Figure:
    data = roles.dropna(subset=[SINK]).assign(role=lambda d: d["role"].astype(str))
    # The dots spread across their layer by a jitter of their own generator (seaborn's stripplot
    # draws it from numpy's global one): the figure is the same in every run and process.
    spread = np.random.default_rng(0).uniform(-JITTER, JITTER, len(data))
    data = data.assign(x=data["layer"].to_numpy(dtype=float) + spread)
    present = S.role_order(data["role"])
    fig = new_figure(max(6.0, 0.28 * n_layers + 3.0), 3.8)
    ax = fig.add_subplot()
    sns.scatterplot(
        data=data,
        x="x",
        y=SINK,
        hue="role",
        hue_order=present,
        palette=role_palette(present),
        s=16,
        edgecolor="black",
        linewidth=0.3,
        ax=ax,
    )
    sns.lineplot(
        data=data,
        x="layer",
        y=SINK,
        estimator="mean",
        errorbar=None,
        color="black",
        marker="o",
        markersize=4,
        linewidth=1,
        label="mean over heads",
        ax=ax,
    )
    ax.set_xlim(-0.6, n_layers - 0.4)
    ticks = range(0, n_layers, tick_step(n_layers, 30))
    ax.set_xticks(list(ticks), [f"L{i}" for i in ticks])
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("layer")
    ax.set_ylabel("sink mass (attention on the first position)")
    ax.set_title("Sink mass by layer")
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return fig


def plot_sink_by_layer(
    roles: pd.DataFrame | None, fig_dir: Path | None, shape: tuple[int, int] | None = None
) -> SavedFigure | None:
    """One dot per head (colour: primary role) at its layer and sink mass, with the layer mean; needs roles.sink_mass."""
    if not usable(roles) or SINK not in roles.columns or roles[SINK].isna().all():
        return None
    n_layers = (shape or S.head_shape({}, roles))[0]
    return save(
        _sink_figure(roles, n_layers),
        fig_dir,
        "sink_by_layer",
        "Sink mass by layer",
        "One dot per head: the share of its attention parked on the first position, by layer; black: the "
        "layer's mean. Trained models typically sink more in their middle and late layers.",
    )

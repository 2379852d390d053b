# Over 400 lines: role and feature figures share the head grid and the colours.
"""The report's figures of roles and features (drawn by the report's sections, :mod:`.sections`).

Every ``plot_*`` function takes the run's DataFrames and the figures folder and returns a
:class:`~interp.report.figures.SavedFigure` (or a list of them), or None when the table it needs
is absent or empty. The effect and pruning figures live in :mod:`interp.report.effect_plots`,
the exemplar patterns in :mod:`interp.report.exemplar_plots`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TypeGuard

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from interp.report import summary as S
from interp.report import syntax_section as Y
from interp.report.figures import (
    SavedFigure,
    blend,
    cell_size,
    facet_cell,
    facet_ticks,
    finish_facets,
    head_frame,
    head_heatmap,
    new_figure,
    role_code,
    role_colour,
    role_handles,
    role_palette,
    save,
    styled,
    symmetric_span,
    tick_step,
    value_labels,
)
from interp.roles import ROLES

MAX_ANNOTATED_CELLS = 150
FEATURES_PER_FIGURE = 12
# Feature panels have their own scale, but never narrower than ±0.1 attention mass (or accuracy):
# otherwise a feature no head has paints its noise in full red and blue.
FEATURE_SCALE_FLOOR = 0.1
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


# --- feature heatmaps --------------------------------------------------------------------------


def feature_order(names: pd.Series) -> list[str]:
    """Catalogue features first (in catalogue order), then the rest (syntactic relations) sorted."""
    present = set(names.dropna().astype(str))
    first = [r.feature for r in ROLES.values() if r.feature is not None and r.feature in present]
    return first + sorted(present - set(first))


def _facet_title(name: str) -> str:
    return name.replace(":", ":\n", 1) if len(name) > 20 and ":" in name else name


@styled
def _features_figure(
    features: pd.DataFrame,
    names: list[str],
    shape: tuple[int, int],
    title: str,
    titles: dict[str, str] | None = None,
) -> Figure:
    """A FacetGrid, one heatmap of value - baseline per feature, each with its own colour bar
    (``titles``: a panel title per feature, default its name)."""
    n_layers, n_heads = shape
    cw, ch = facet_cell(n_layers, n_heads)
    width, height = n_heads * cw + 1.5, n_layers * ch + 1.0
    data = features[features["feature"].isin(names)].assign(
        lift=lambda d: d["value"] - d["baseline"]
    )
    ncols = max(1, min(len(names), 5, int(16 // width)))
    grid = sns.FacetGrid(
        data,
        col="feature",
        col_order=names,
        col_wrap=ncols,
        height=height,
        aspect=width / height,
        sharex=False,
        sharey=False,
        despine=False,
    )
    annotate = len(names) <= 4 and n_layers * n_heads <= 60
    for name, ax in grid.axes_dict.items():
        lift = head_frame(data[data["feature"] == name], "lift", shape)
        head_heatmap(
            ax,
            lift,
            span=symmetric_span(lift, FEATURE_SCALE_FLOOR),
            annot=value_labels(lift) if annotate else False,
            fmt="",
            **facet_ticks(n_layers, n_heads),
        )
        ax.set_title((titles or {}).get(name) or _facet_title(name), fontsize=9)
    return finish_facets(grid, title)


def empty_features(
    features: pd.DataFrame, names: list[str], causal: bool | None = None
) -> dict[str, str]:
    """Why a feature's panel is empty, for each of ``names`` that no head has a value for: no
    eligible query at all (n = 0: in a causal model, a query never sees the position the feature
    reads, e.g. the token after it or one near the end), or no head measured (NaN attention)."""
    reasons = {}
    for name in names:
        rows = features[features["feature"] == name]
        if rows["value"].notna().any():
            continue
        if "n" not in rows or (rows["n"].fillna(0) == 0).all():
            reasons[name] = (
                "no eligible query in a causal model"
                if causal
                else "no eligible query in these probes"
            )
        else:
            reasons[name] = "no head measured (NaN attention)"
    return reasons


def _say_empty(fig: Figure, reasons: dict[str, str]) -> str:
    """Write each empty panel's reason in it (and drop its colour bar, which has nothing to scale);
    return the caption's sentence about them ('' when none is empty)."""
    for ax in fig.axes:
        name = next((n for n in reasons if ax.get_title() == _facet_title(n)), None)
        if name is None:
            continue
        ax.text(
            0.5,
            0.5,
            reasons[name].replace(" in ", "\nin "),
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=8,
            color="#444444",
        )
        for mesh in ax.collections:
            colorbar = getattr(mesh, "colorbar", None)
            if colorbar is not None:
                colorbar.remove()
    by_reason: dict[str, list[str]] = {}
    for name, reason in reasons.items():
        by_reason.setdefault(reason, []).append(name)
    why = {
        "no eligible query in a causal model": " (its queries never see the position these features read)"
    }
    return "".join(
        f" Empty: {', '.join(names)}: {reason}{why.get(reason, '')}."
        for reason, names in by_reason.items()
    )


def plot_feature_heatmaps(
    features: pd.DataFrame | None,
    fig_dir: Path | None,
    shape: tuple[int, int] | None = None,
    causal: bool | None = None,
) -> list[SavedFigure] | None:
    """One heatmap per feature of value - baseline, faceted (12 features per figure); the
    syntactic features are drawn in the syntax section instead (:func:`plot_relation_heatmaps`).

    How to read it: red cells score above what a head without preference would score on the
    same positions, blue below; each facet has its own symmetric colour scale (the bar beside it,
    at least ±0.1), because an attention-sink mass and a positional share live on different ranges.
    Needs features: layer, head, feature, value, baseline.
    """
    if not usable(features):
        return None
    shape = shape or S.head_shape({}, features)
    names = [name for name in feature_order(features["feature"]) if not Y.is_syntactic(name)]
    if not names:
        return None
    n_chunks = math.ceil(len(names) / FEATURES_PER_FIGURE)
    saved = []
    for k in range(n_chunks):
        chunk = names[k * FEATURES_PER_FIGURE : (k + 1) * FEATURES_PER_FIGURE]
        part = f" ({k + 1}/{n_chunks})" if n_chunks > 1 else ""
        fig = _features_figure(features, chunk, shape, f"Feature score minus baseline{part}")
        empty = _say_empty(fig, empty_features(features, chunk, causal))
        saved.append(
            save(
                fig,
                fig_dir,
                f"features_{k + 1}",
                f"Features{part}",
                "One panel per feature, one cell per head: red = more attention where the feature "
                "looks than a head without preference would give, blue = less; each panel has its own "
                "scale; an empty panel says why in it." + empty,
            )
        )
    return saved


def plot_relation_heatmaps(
    features: pd.DataFrame | None,
    fig_dir: Path | None,
    shape: tuple[int, int] | None = None,
    corpora: list[str] | None = None,
) -> list[SavedFigure] | None:
    """One heatmap per syntactic feature with at least ``MIN_ARCS`` arcs (interp.report.syntax_section),
    the most arcs first, each panel titled with its arc count: accuracy minus the best fixed
    rule's, so red is a head that finds the gold partner more often than any rule needing no
    syntax. ``corpora``: the treebanks the features read, for the caption."""
    arcs = Y.feature_arcs(features)
    shown = [name for name, n in arcs.items() if n >= Y.MIN_ARCS]
    if not shown:
        return None
    shape = shape or S.head_shape({}, features)
    titles = {name: f"{name[len(Y.SYNTACTIC_PREFIX) :]}\n{arcs[name]} arcs" for name in shown}
    chunks = [shown[k : k + FEATURES_PER_FIGURE] for k in range(0, len(shown), FEATURES_PER_FIGURE)]
    saved = []
    for k, chunk in enumerate(chunks):
        part = f" ({k + 1}/{len(chunks)})" if len(chunks) > 1 else ""
        fig = _features_figure(
            features, chunk, shape, f"Syntactic accuracy minus the best fixed rule{part}", titles
        )
        saved.append(
            save(
                fig,
                fig_dir,
                f"syntax_{k + 1}",
                f"Relations{part}",
                Y.maps_caption(arcs, corpora or []),
            )
        )
    return saved

"""The report's figures: one function per figure, tables in, saved PNG + SVG out.

Every ``plot_*`` function takes the run's DataFrames and the figures folder and returns a
:class:`~interp.report.figures.SavedFigure` (or a list of them), or None when the table it needs
is absent or empty. Head grids share one convention: layers run down the y axis from layer 0 at
the top, heads run along x, one cell per head. Role colours come from the catalogue
(``interp.roles.palette``), so a colour means the same role in every figure and every run.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from interp.report import summary as S
from interp.report.exemplars import plot_exemplars, read_exemplars
from interp.report.figures import (MISSING_COLOUR, SavedFigure, annotate, blend, diverging, head_grid, ink_for,
                                   label_grid, new_figure, role_code, role_colour, role_handles, save, styled)
from interp.roles import ROLES
from interp.rundir import RunTables

MAX_ANNOTATED_CELLS = 150
FEATURES_PER_FIGURE = 12
# Feature panels have their own scale, but never narrower than ±0.1 attention mass (or accuracy):
# otherwise a feature no head has paints its noise in full red and blue.
FEATURE_SCALE_FLOOR = 0.1


def _usable(frame: pd.DataFrame | None) -> bool:
    return frame is not None and not frame.empty


def _cell_size(n_layers: int, n_heads: int) -> tuple[float, float]:
    """Inches per head cell: roomy for tiny models, compact (but labelled) for 30 x 9."""
    return min(0.9, max(0.55, 3.0 / max(n_heads, 1))), min(0.5, max(0.3, 2.4 / max(n_layers, 1)))


# --- role map ----------------------------------------------------------------------------------

@styled
def role_map_figure(roles: pd.DataFrame, shape: tuple[int, int], title: str | None = None,
                    legend_roles: list[str] | None = None) -> Figure:
    """Layers x heads grid, each cell in its primary role's colour with the role's code.

    How to read it: the colour (and the code in the cell, spelled out in the legend) is the
    head's primary role; a paler cell and the number after the code mean lower confidence;
    grey "?" cells are unexplained; near-white cells without text have no row in the table.
    ``legend_roles`` fixes the legend (two maps shown side by side share one); default: the roles present.
    """
    n_layers, n_heads = shape
    role = head_grid(roles, "role", n_layers, n_heads, fill=None)
    conf = head_grid(roles, "confidence", n_layers, n_heads)
    image = np.ones((n_layers, n_heads, 3))
    cw, ch = _cell_size(n_layers, n_heads)
    present = legend_roles or S.role_order(roles["role"])
    fig = new_figure(n_heads * cw + 3.4, max(n_layers * ch + 1.3, 0.24 * len(present) + 1.6))
    ax = fig.add_subplot()
    font = 7 if ch >= 0.3 else 6
    for (layer, head), name in np.ndenumerate(role):
        if name is None or (isinstance(name, float) and math.isnan(name)):
            image[layer, head] = blend(MISSING_COLOUR, 1.0)
            continue
        c = conf[layer, head]
        rgb = blend(role_colour(str(name)), 1.0 if np.isnan(c) else 0.3 + 0.7 * float(np.clip(c, 0, 1)))
        image[layer, head] = rgb
        text = role_code(str(name)) + ("" if np.isnan(c) else " " + (f"{c:.2f}".lstrip("0") if c < 0.995 else "1"))
        ax.text(head, layer, text, ha="center", va="center", fontsize=font, color=ink_for(rgb))
    ax.imshow(image, aspect="auto", interpolation="none")
    ax.set_xticks(np.arange(-0.5, n_heads), minor=True)
    ax.set_yticks(np.arange(-0.5, n_layers), minor=True)
    ax.grid(which="minor", color="white", linewidth=1.2)
    ax.tick_params(which="minor", length=0)
    label_grid(ax, n_layers, n_heads)
    ax.set_title(title or "Primary role per head (pale = low confidence)")
    handles = role_handles(present)
    for h, name in zip(handles, present):
        h.set_label(f"{role_code(name)}  {name.replace('_', ' ')}")
    fig.legend(handles=handles, loc="outside right upper", title="role", frameon=False)
    return fig


def plot_role_map(roles: pd.DataFrame | None, fig_dir: Path, shape: tuple[int, int] | None = None) -> SavedFigure | None:
    """Save the role map (see :func:`role_map_figure`); needs roles: layer, head, role, confidence."""
    if not _usable(roles):
        return None
    shape = shape or S.head_shape({}, roles)
    fig = role_map_figure(roles, shape)
    return save(fig, fig_dir, "role_map", "Role map",
                "Each cell is one head (layer 0 at the top): colour and code give its primary role, "
                "the number its confidence (paler = less sure); grey '?' heads are unexplained.")


@styled
def _role_counts_figure(roles: pd.DataFrame, n_layers: int) -> Figure:
    present = S.role_order(roles["role"])
    counts = pd.crosstab(roles["layer"], roles["role"]).reindex(index=range(n_layers), columns=present, fill_value=0)
    fig = new_figure(7.5, max(2.6, 0.24 * n_layers + 1.2, 0.24 * len(present) + 1.2))
    ax = fig.add_subplot()
    left = np.zeros(n_layers)
    for name in present:
        ax.barh(range(n_layers), counts[name].to_numpy(), left=left, color=role_colour(name),
                label=name.replace("_", " "), height=0.8, edgecolor="white", linewidth=0.5)
        left += counts[name].to_numpy()
    step = max(1, -(-n_layers // 40))
    ax.set_yticks(range(0, n_layers, step), [f"L{i}" for i in range(0, n_layers, step)])
    ax.set_ylim(n_layers - 0.5, -0.5)
    ax.set_xlabel("heads")
    ax.set_ylabel("layer")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_title("Primary roles per layer")
    fig.legend(loc="outside right upper", title="role", frameon=False)
    return fig


def plot_role_counts(roles: pd.DataFrame | None, fig_dir: Path, shape: tuple[int, int] | None = None) -> SavedFigure | None:
    """Stacked bars: per layer (layer 0 at the top), how many heads carry each primary role."""
    if not _usable(roles):
        return None
    n_layers = (shape or S.head_shape({}, roles))[0]
    return save(_role_counts_figure(roles, n_layers), fig_dir, "role_counts", "Roles per layer",
                "One bar per layer (layer 0 at the top), split by primary role: where in depth each kind of head lives.")


# --- feature heatmaps --------------------------------------------------------------------------

def feature_order(names: pd.Series) -> list[str]:
    """Catalogue features first (in catalogue order), then the rest (syntactic relations) sorted."""
    present = set(names.dropna().astype(str))
    first = [r.feature for r in ROLES.values() if r.feature in present]
    return first + sorted(present - set(first))


def _facet_title(name: str) -> str:
    return name.replace(":", ":\n", 1) if len(name) > 20 and ":" in name else name


@styled
def _features_figure(features: pd.DataFrame, names: list[str], shape: tuple[int, int], title: str) -> Figure:
    """Facets placed by hand in inches (constrained layout is the slow part with 12 colour bars)."""
    n_layers, n_heads = shape
    cw, ch = min(0.5, max(0.22, 2.2 / n_heads)), min(0.4, max(0.17, 1.6 / n_layers))
    left, bar, right, top, bottom = 0.5, 0.12, 0.55, 0.45, 0.5  # inches around each heatmap
    facet_w, facet_h = left + n_heads * cw + 0.08 + bar + right, top + n_layers * ch + bottom
    ncols = max(1, min(len(names), 5, int(16 // facet_w)))
    nrows = -(-len(names) // ncols)
    width, height = facet_w * ncols, facet_h * nrows + 0.35
    fig = Figure(figsize=(width, height))
    write_values = len(names) <= 4 and n_layers * n_heads <= 60
    for i, name in enumerate(names):
        row, col = divmod(i, ncols)
        x0, y0 = col * facet_w + left, height - 0.35 - row * facet_h - top - n_layers * ch
        ax = fig.add_axes((x0 / width, y0 / height, n_heads * cw / width, n_layers * ch / height))
        cax = fig.add_axes(((x0 + n_heads * cw + 0.08) / width, y0 / height, bar / width, n_layers * ch / height))
        rows = features[features["feature"] == name]
        grid = head_grid(rows.assign(diff=rows["value"] - rows["baseline"]), "diff", n_layers, n_heads)
        diverging(ax, fig, grid, None, floor=FEATURE_SCALE_FLOOR, cax=cax)
        if write_values:
            annotate(ax, grid, ".2f")
        label_grid(ax, n_layers, n_heads, max_rows=16, max_cols=12)
        ax.set_title(_facet_title(name), fontsize=9)
        if col:
            ax.set_ylabel("")
        if i < len(names) - ncols:
            ax.set_xlabel("")
    fig.suptitle(title, y=1 - 0.12 / height, va="top")
    return fig


def plot_feature_heatmaps(features: pd.DataFrame | None, fig_dir: Path,
                          shape: tuple[int, int] | None = None) -> list[SavedFigure] | None:
    """One heatmap per feature of value - baseline, faceted (12 features per figure).

    How to read it: red cells score above what a head without preference would score on the
    same positions, blue below; each facet has its own symmetric colour scale (the bar beside it,
    at least ±0.1), because a syntactic accuracy and an attention-sink mass live on different ranges.
    Needs features: layer, head, feature, value, baseline.
    """
    if not _usable(features):
        return None
    shape = shape or S.head_shape({}, features)
    names = feature_order(features["feature"])
    chunks = [names[i:i + FEATURES_PER_FIGURE] for i in range(0, len(names), FEATURES_PER_FIGURE)]
    saved = []
    for k, chunk in enumerate(chunks):
        part = f" ({k + 1}/{len(chunks)})" if len(chunks) > 1 else ""
        fig = _features_figure(features, chunk, shape, f"Feature score minus baseline{part}")
        saved.append(save(fig, fig_dir, f"features_{k + 1}", f"Features{part}",
                          "One panel per feature, one cell per head: red = more attention where the feature "
                          "looks than a head without preference would give, blue = less; each panel has its own scale."))
    return saved


# --- effects -----------------------------------------------------------------------------------

def _main_effect(effects: pd.DataFrame | None) -> tuple[S.EffectChoice, pd.DataFrame] | None:
    choice = S.choose_effect(effects)
    return None if choice is None else (choice, S.head_effects(effects, choice))


@styled
def _effect_figure(rows: pd.DataFrame, choice: S.EffectChoice, shape: tuple[int, int]) -> Figure:
    n_layers, n_heads = shape
    cw, ch = _cell_size(n_layers, n_heads)
    fig = new_figure(n_heads * cw + 2.2, n_layers * ch + 1.3)
    ax = fig.add_subplot()
    grid = head_grid(rows, "delta", n_layers, n_heads)
    diverging(ax, fig, grid, f"Δ {choice.metric} (positive = worse)")
    if n_layers * n_heads <= MAX_ANNOTATED_CELLS:
        big = np.nanmax(np.abs(grid)) if np.isfinite(grid).any() else 0
        annotate(ax, grid, ".2f" if big >= 0.1 else ".3f", font=7 if ch >= 0.3 else 6)
    label_grid(ax, n_layers, n_heads)
    ax.set_title(f"Effect of ablating each head\n{choice.label}")
    return fig


def plot_effect_heatmap(effects: pd.DataFrame | None, fig_dir: Path,
                        shape: tuple[int, int] | None = None) -> SavedFigure | None:
    """Layers x heads heatmap of the main effect's delta (red = the model gets worse without the head).

    Needs effects: layer, head, ablation, metric, delta, method (slice chosen by summary.choose_effect).
    """
    chosen = _main_effect(effects)
    if chosen is None:
        return None
    choice, rows = chosen
    fig = _effect_figure(rows, choice, shape or S.head_shape({}, effects))
    return save(fig, fig_dir, "effect_map", "Ablation effect",
                f"How much worse {choice.metric} gets when each head is removed ({choice.ablation} ablation, "
                f"{choice.method}): red = the model needs the head, blue = it does better without it.")


def _with_roles(rows: pd.DataFrame, roles: pd.DataFrame) -> pd.DataFrame:
    return rows.merge(roles, on=["layer", "head"], how="inner").dropna(subset=["delta", "role"])


@styled
def _effect_by_role_figure(data: pd.DataFrame, choice: S.EffectChoice) -> Figure:
    order = S.role_order(data["role"])
    fig = new_figure(max(5.5, 0.75 * len(order) + 2.0), 4.2)
    ax = fig.add_subplot()
    colours = {r: role_colour(r) for r in order}
    with warnings.catch_warnings():  # seaborn 0.13 still passes boxplot's deprecated `vert`
        warnings.filterwarnings("ignore", message=".*vert: bool.*")
        sns.boxplot(data=data, x="role", y="delta", hue="role", order=order, hue_order=order, palette=colours,
                    showfliers=False, boxprops={"alpha": 0.45}, legend=False, ax=ax)
    sns.stripplot(data=data, x="role", y="delta", hue="role", order=order, hue_order=order, palette=colours,
                  size=4, jitter=0.25, edgecolor="black", linewidth=0.4, legend=False, ax=ax)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(order)), [r.replace("_", " ") for r in order], rotation=30, ha="right")
    ax.set_xlabel("primary role")
    ax.set_ylabel(f"Δ {choice.metric} (positive = worse)")
    ax.set_title(f"Ablation effect by role ({choice.label})")
    return fig


def _effects_with_roles(effects: pd.DataFrame | None, roles: pd.DataFrame | None) -> tuple[S.EffectChoice, pd.DataFrame] | None:
    """The main effect slice joined with each head's role; None when either side is missing."""
    chosen = _main_effect(effects)
    if chosen is None or not _usable(roles):
        return None
    data = _with_roles(chosen[1], roles)
    return None if data.empty else (chosen[0], data)


def plot_effect_by_role(effects: pd.DataFrame | None, roles: pd.DataFrame | None, fig_dir: Path) -> SavedFigure | None:
    """Strip + box plot of the main effect per primary role (joins effects and roles on layer, head)."""
    joined = _effects_with_roles(effects, roles)
    if joined is None:
        return None
    choice, data = joined
    return save(_effect_by_role_figure(data, choice), fig_dir, "effect_by_role", "Effect by role",
                "One dot per head, grouped by primary role; box = middle half: which kinds of head the model relies on.")


def role_score(data: pd.DataFrame) -> pd.Series:
    """Each head's classifier score for its own primary role (``score_<role>``), else its confidence."""
    def one(row: pd.Series) -> float:
        value = row.get(f"score_{row['role']}", np.nan)
        return float(value) if pd.notna(value) else float(row.get("confidence", np.nan))
    return data.apply(one, axis=1) if not data.empty else pd.Series(dtype=float)


@styled
def _score_vs_effect_figure(data: pd.DataFrame, choice: S.EffectChoice, xlabel: str) -> Figure:
    order = S.role_order(data["role"])
    fig = new_figure(7.5, 4.6)
    ax = fig.add_subplot()
    for name in order:
        part = data[data["role"] == name]
        ax.scatter(part["x"], part["delta"], s=26, color=role_colour(name), edgecolor="black",
                   linewidth=0.4, label=name.replace("_", " "), zorder=3)
    ax.axhline(0, color="black", linewidth=0.8)
    size = data["delta"].abs()
    ranked = data.loc[size.sort_values(ascending=False).index]
    for _, row in ranked[ranked["delta"].abs() >= 0.5 * size.max()].head(5).iterrows():
        ax.annotate(f"L{int(row['layer'])}H{int(row['head'])}", (row["x"], row["delta"]), fontsize=7,
                    xytext=(4, 3), textcoords="offset points")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"Δ {choice.metric} (positive = worse)")
    ax.set_title(f"Role score vs causal effect ({choice.label})")
    fig.legend(loc="outside right upper", title="role", frameon=False)
    return fig


def plot_score_vs_effect(roles: pd.DataFrame | None, effects: pd.DataFrame | None, fig_dir: Path) -> SavedFigure | None:
    """Scatter, one point per head: how strongly it fits its role (x) vs how much the model needs it (y).

    x is ``score_<role>`` for the head's primary role where the roles table has that column,
    else ``confidence``; y is the main effect's delta. Points high on the right are confident
    roles that matter; high on the left, heads whose role we cannot name but the model needs.
    """
    joined = _effects_with_roles(effects, roles)
    if joined is None:
        return None
    choice, data = joined
    data = data.assign(x=role_score(data))
    has_scores = any(f"score_{r}" in data.columns for r in data["role"].unique())
    xlabel = "classifier score for the head's primary role" if has_scores else "confidence of the primary role"
    return save(_score_vs_effect_figure(data, choice, xlabel), fig_dir, "score_vs_effect", "Role score vs effect",
                "One dot per head: right = fits its role well, up = the model needs it; the largest effects (up to five) are labelled.")


# --- pruning -----------------------------------------------------------------------------------

@styled
def _pruning_figure(pruning: pd.DataFrame, effects: pd.DataFrame | None) -> Figure:
    metrics = sorted(pruning["metric"].dropna().astype(str).unique())
    ncols = min(len(metrics), 2)
    nrows = -(-len(metrics) // ncols)
    fig = new_figure(5.2 * ncols + 0.4, 3.6 * nrows + 0.4)
    for i, metric in enumerate(metrics):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        steps = S.degradation(pruning, metric, effects)
        if steps.empty:
            continue
        start, sign = float(steps["value"].iloc[0]), S.worse_sign(metric, effects)
        ax.plot(steps["fraction_removed"] * 100, steps["value"], marker="o", markersize=3, color="#333333")
        scale = abs(start) if abs(start) > 1e-12 else 1.0  # a metric that starts at 0: absolute change
        for tol, style in zip(S.TOLERANCES, (":", "--")):
            level = start + sign * tol * scale
            ax.axhline(level, color="#d62728", linestyle=style, linewidth=1)
            share = S.prunable_share(pruning, metric, tol, effects)
            # The widest tolerance is labelled on its far side, the others toward the start:
            # lines a few percent apart then never get overlapping labels.
            up = (sign > 0) == (tol == max(S.TOLERANCES))
            ax.annotate(f"{tol:.0%} worse: {share:.0%} of heads prunable", (0.01, level),
                        xycoords=("axes fraction", "data"), xytext=(0, 2 if up else -2),
                        va="bottom" if up else "top", textcoords="offset points", fontsize=7, color="#d62728")
        ax.set_xlabel("heads removed (%)")
        ax.set_ylabel(metric)
        ax.set_title(metric)
    fig.suptitle("Pruning curve: least important heads removed first")
    return fig


def plot_pruning(pruning: pd.DataFrame | None, fig_dir: Path, effects: pd.DataFrame | None = None) -> SavedFigure | None:
    """Metric value as heads are removed (least important first), one panel per metric.

    The red lines sit 1% (dotted) and 5% (dashed) worse than the intact model (step 0); where
    the curve crosses them is how much of the model can go at that price. "Worse" is up for
    losses and down for accuracies (orientation read from the effects table's delta).
    Needs pruning: fraction_removed, heads_removed, metric, value.
    """
    if not _usable(pruning) or pruning["value"].notna().sum() == 0:
        return None
    return save(_pruning_figure(pruning, effects), fig_dir, "pruning", "Pruning curve",
                "Metric on held-out sequences after removing the least important heads first (ranked on other sequences); red lines: 1% and 5% worse than the intact model.")


# --- everything --------------------------------------------------------------------------------

def make_all(run: RunTables, fig_dir: Path | None = None) -> list[SavedFigure]:
    """Every figure the run's tables allow, in report order (absent tables are skipped)."""
    fig_dir = Path(fig_dir) if fig_dir is not None else run.path / "figures"
    shape = S.head_shape(run.manifest, run.roles, run.features, run.effects)
    out: list[SavedFigure | list[SavedFigure] | None] = [
        plot_role_map(run.roles, fig_dir, shape),
        plot_role_counts(run.roles, fig_dir, shape),
        plot_feature_heatmaps(run.features, fig_dir, shape),
        plot_effect_heatmap(run.effects, fig_dir, shape),
        plot_effect_by_role(run.effects, run.roles, fig_dir),
        plot_score_vs_effect(run.roles, run.effects, fig_dir),
        plot_pruning(run.pruning, fig_dir, run.effects),
        plot_exemplars(read_exemplars(run.path), fig_dir, run.features, run.roles),
    ]
    flat: list[SavedFigure] = []
    for item in out:
        if isinstance(item, list):
            flat.extend(item)
        elif item is not None:
            flat.append(item)
    return flat


__all__ = ["plot_role_map", "role_map_figure", "plot_role_counts", "plot_feature_heatmaps", "plot_effect_heatmap",
           "plot_effect_by_role", "plot_score_vs_effect", "plot_pruning", "plot_exemplars", "read_exemplars",
           "make_all", "SavedFigure"]

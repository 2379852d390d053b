# Over 400 lines: effect figures share one grid, the role panels, the effect choice.
"""The report's figures of causal effects: per-metric effect maps, effect by role with confidence
intervals, the estimator's audit, role score vs effect, and the pruning curves.

Every metric of the effects table gets its own facet, on its own scale (a loss in nats and a
cosine similarity do not share one). The figures show the preferred ablation
(:func:`interp.report.summary.preferred_ablation`), and for each head its exact effect where the
run measured one, else its estimate (:func:`~interp.report.summary.best_effects`).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from interp.ablate.removable import change_scale, removable_fraction
from interp.report import pruning_summary as P
from interp.report import summary as S
from interp.report.figures import (
    SavedFigure,
    facet_cell,
    facet_ticks,
    finish_facets,
    head_frame,
    head_heatmap,
    new_figure,
    role_colour,
    role_palette,
    save,
    styled,
    symmetric_span,
    value_labels,
)

MAX_ANNOTATED_CELLS = 60
WORSE = "Δ (positive = worse)"


ROW_INCHES = 14.0  # facets per row: as many as fit this width


def _grid(
    data: pd.DataFrame, col: str, n_facets: int, height: float, aspect: float, **kwargs
) -> sns.FacetGrid:
    """A FacetGrid over ``col``, as many facets a row as fit ``ROW_INCHES``, each with its own axes."""
    per_row = max(1, min(n_facets, int(ROW_INCHES // (height * aspect))))
    return sns.FacetGrid(
        data,
        col=col,
        col_wrap=per_row,
        height=height,
        aspect=aspect,
        sharex=False,
        sharey=False,
        despine=False,
        **kwargs,
    )


def _method_note(rows: pd.DataFrame, n_heads: int) -> str:
    """How a facet's cells were measured: 'exact', 'estimates', or both, and how many heads."""
    n_exact = int((rows["estimator"] == "exact").sum())
    if n_exact == len(rows):
        note = "exact"
    else:
        note = (
            "estimates" if n_exact == 0 else f"exact for {n_exact} heads (outlined), else estimated"
        )
    return note if len(rows) == n_heads else f"{note}; {len(rows)} of {n_heads} heads measured"


# --- effect map per metric ---------------------------------------------------------------------


@styled
def _effect_maps_figure(best: pd.DataFrame, shape: tuple[int, int], ablation: str) -> Figure:
    n_layers, n_heads = shape
    metrics = sorted(best["metric"].unique())
    cw, ch = facet_cell(n_layers, n_heads)
    width, height = n_heads * cw + 1.6, n_layers * ch + 1.1
    grid = _grid(best, "metric", len(metrics), height, width / height, col_order=metrics)
    for metric, ax in grid.axes_dict.items():
        rows = best[best["metric"] == metric]
        delta = head_frame(rows, "delta", shape)
        annotate = n_layers * n_heads <= MAX_ANNOTATED_CELLS
        head_heatmap(
            ax,
            delta,
            span=symmetric_span(delta),
            annot=value_labels(delta) if annotate else False,
            fmt="",
            cbar_label=WORSE,
            **facet_ticks(n_layers, n_heads),
        )
        if (rows["estimator"] != "exact").any():
            for row in rows[rows["estimator"] == "exact"].itertuples():
                ax.add_patch(
                    Rectangle(
                        (row.head, row.layer), 1, 1, fill=False, edgecolor="black", linewidth=1.2
                    )
                )
        ax.set_title(f"{metric}\n{_method_note(rows, n_layers * n_heads)}", fontsize=9)
    return finish_facets(grid, f"Effect of ablating each head, per metric ({ablation} ablation)")


def plot_effect_maps(
    effects: pd.DataFrame | None, fig_dir: Path | None, shape: tuple[int, int] | None = None
) -> SavedFigure | None:
    """A facet per metric: each head's effect (red = the model gets worse without it), each on its own scale."""
    best, ablation = S.best_effects(effects), S.preferred_ablation(effects)
    if best is None or best.empty or ablation is None:
        return None
    fig = _effect_maps_figure(best, shape or S.head_shape({}, effects), ablation)
    return save(
        fig,
        fig_dir,
        "effect_maps",
        "Ablation effect per metric",
        f"How much worse each metric gets when a head is removed ({ablation} ablation): red = the model needs "
        "the head, blue = it does better without it. Each panel has its own scale; outlined cells are exact "
        "ablations where the rest of the panel is the estimate.",
    )


# --- effect vs role ----------------------------------------------------------------------------


def _with_roles(best: pd.DataFrame, roles: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in ("layer", "head", "role", "confidence") if c in roles.columns]
    cols += [c for c in roles.columns if c.startswith("score_")]
    data = best.merge(roles[cols], on=["layer", "head"], how="inner").dropna(
        subset=["delta", "role"]
    )
    return data.assign(role=data["role"].astype(str))


def _role_panel(ax, rows: pd.DataFrame, order: list[str]) -> None:
    """Per role, its heads sorted by effect and spread across the role's slot, each with its CI."""
    for i, role in enumerate(order):
        part = rows[rows["role"] == role].sort_values("delta")
        if part.empty:
            continue
        xs = i + (np.linspace(-0.35, 0.35, len(part)) if len(part) > 1 else np.zeros(1))
        colour = role_colour(role)
        low = (part["delta"] - part["ci_low"]).clip(lower=0).fillna(0)
        high = (part["ci_high"] - part["delta"]).clip(lower=0).fillna(0)
        ax.errorbar(
            xs,
            part["delta"],
            yerr=[low, high],
            fmt="none",
            ecolor=colour,
            elinewidth=0.8,
            alpha=0.8,
        )
        exact = (part["estimator"] == "exact").to_numpy()
        ax.scatter(
            xs[exact],
            part["delta"][exact],
            s=22,
            color=colour,
            edgecolor="black",
            linewidth=0.3,
            zorder=3,
        )
        ax.scatter(
            xs[~exact],
            part["delta"][~exact],
            s=22,
            facecolor="white",
            edgecolor=colour,
            linewidth=0.9,
            zorder=3,
        )
    ax.axhline(0, color="black", linewidth=0.7)
    ax.set_xticks(range(len(order)), [r.replace("_", " ") for r in order], rotation=35, ha="right")
    ax.set_xlim(-0.6, len(order) - 0.4)
    ax.set_xlabel("")
    ax.set_ylabel(WORSE)


@styled
def _effect_vs_role_figure(data: pd.DataFrame, ablation: str) -> Figure:
    order = S.role_order(data["role"])
    metrics = sorted(data["metric"].unique())
    width = max(5.0, 0.5 * len(order) + 1.5)
    grid = _grid(data, "metric", len(metrics), 3.8, width / 3.8, col_order=metrics)
    for metric, ax in grid.axes_dict.items():
        _role_panel(ax, data[data["metric"] == metric], order)
        ax.set_title(metric)
    return finish_facets(grid, f"Effect by primary role, with 95% intervals ({ablation} ablation)")


def plot_effect_vs_role(
    effects: pd.DataFrame | None, roles: pd.DataFrame | None, fig_dir: Path | None
) -> SavedFigure | None:
    """Per metric, every head's effect and its 95% CI (ci_low..ci_high), grouped by primary role."""
    best, ablation = S.best_effects(effects), S.preferred_ablation(effects)
    if best is None or ablation is None or roles is None or roles.empty:
        return None
    data = _with_roles(best, roles)
    if data.empty:
        return None
    return save(
        _effect_vs_role_figure(data, ablation),
        fig_dir,
        "effect_vs_role",
        "Effect by role",
        "One point per head, grouped by primary role and sorted by effect, with its 95% bootstrap interval; "
        "filled = exact ablation, hollow = estimate. A bar that crosses zero is an effect the "
        "evaluation corpus cannot tell from none.",
    )


# --- the estimator's audit ---------------------------------------------------------------------


@styled
def _audit_figure(pairs: pd.DataFrame, ablation: str) -> Figure:
    metrics = sorted(pairs["metric"].unique())
    hue = "role" if "role" in pairs.columns else None
    order = S.role_order(pairs["role"]) if hue else None
    grid = _grid(pairs, "metric", len(metrics), 3.6, 1.15, col_order=metrics)
    grid.map_dataframe(
        sns.scatterplot,
        x="estimate",
        y="exact",
        hue=hue,
        hue_order=order,
        palette=role_palette(order) if order else None,
        s=24,
        edgecolor="black",
        linewidth=0.3,
    )
    for metric, ax in grid.axes_dict.items():
        rows = pairs[pairs["metric"] == metric]
        values = rows[["estimate", "exact"]].to_numpy()
        low, high = float(np.nanmin(values)), float(np.nanmax(values))
        pad = 0.05 * (high - low or 1.0)
        ax.plot(
            [low - pad, high + pad],
            [low - pad, high + pad],
            color="#888888",
            linestyle="--",
            linewidth=0.8,
        )
        rho = S.rank_agreement(rows)
        ax.set_title(
            f"{metric}: {len(rows)} heads" + ("" if np.isnan(rho) else f", Spearman ρ = {rho:.2f}")
        )
        ax.set_xlabel("estimate")
        ax.set_ylabel("exact effect")
    if hue:
        grid.add_legend(title="role", label_order=order)
    return finish_facets(grid, f"Estimate vs exact ablation ({ablation} ablation)")


def plot_estimator_audit(
    effects: pd.DataFrame | None, roles: pd.DataFrame | None, fig_dir: Path | None
) -> SavedFigure | None:
    """Per metric, for every head measured both ways: the estimate (x) vs the exact effect (y)."""
    pairs, ablation = S.audit_pairs(effects), S.preferred_ablation(effects)
    if pairs is None or ablation is None:
        return None
    if roles is not None and not roles.empty:
        pairs = pairs.merge(roles[["layer", "head", "role"]], on=["layer", "head"], how="left")
        pairs["role"] = pairs["role"].fillna("unexplained").astype(str)
    return save(
        _audit_figure(pairs, ablation),
        fig_dir,
        "estimator_audit",
        "Estimator audit",
        "Each point is a head whose effect was both estimated (first-order attribution, or integrated "
        "gradients when the run chose them; x) and measured (exact ablation, y); on the dashed line the estimate is "
        "right. Points far above it are heads the estimate misses; ρ is the rank agreement that decides which "
        "heads get exact ablation. With --top-k, the random audit heads show how far off the estimate is on "
        "heads it did not choose.",
    )


# --- role score vs effect ----------------------------------------------------------------------


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
    sns.scatterplot(
        data=data,
        x="x",
        y="delta",
        hue="role",
        hue_order=order,
        palette=role_palette(order),
        s=30,
        edgecolor="black",
        linewidth=0.4,
        ax=ax,
        zorder=3,
    )
    ax.axhline(0, color="black", linewidth=0.8)
    size = data["delta"].abs()
    ranked = data.loc[size.sort_values(ascending=False).index]
    for _, row in ranked[ranked["delta"].abs() >= 0.5 * size.max()].head(5).iterrows():
        ax.annotate(
            f"L{int(row['layer'])}H{int(row['head'])}",
            (row["x"], row["delta"]),
            fontsize=7,
            xytext=(4, 3),
            textcoords="offset points",
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"Δ {choice.metric} (positive = worse)")
    ax.set_title(f"Role score vs causal effect ({choice.label})")
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1), title="role", frameon=False)
    return fig


def plot_score_vs_effect(
    roles: pd.DataFrame | None, effects: pd.DataFrame | None, fig_dir: Path | None
) -> SavedFigure | None:
    """Scatter, one point per head: how strongly it fits its role (x) vs how much the model needs it (y).

    x is ``score_<role>`` for the head's primary role where the roles table has that column,
    else ``confidence``; y is the main effect's delta (:func:`~interp.report.summary.choose_effect`).
    """
    choice = S.choose_effect(effects)
    if choice is None or roles is None or roles.empty:
        return None
    data = _with_roles(
        S.head_effects(effects, choice).assign(metric=choice.metric, estimator=choice.estimator),
        roles,
    )
    if data.empty:
        return None
    data = data.assign(x=role_score(data))
    has_scores = any(f"score_{r}" in data.columns for r in data["role"].unique())
    xlabel = (
        "classifier score for the head's primary role"
        if has_scores
        else "confidence of the primary role"
    )
    return save(
        _score_vs_effect_figure(data, choice, xlabel),
        fig_dir,
        "score_vs_effect",
        "Role score vs effect",
        "One dot per head: right = fits its role well, up = the model needs it; the largest effects (up to five) are labelled.",
    )


# --- pruning -----------------------------------------------------------------------------------


def pruning_band(steps: pd.DataFrame) -> tuple[pd.Series, pd.Series] | None:
    """The grey band of one metric's pruning curve, or None where the table has no interval: the
    intact value plus the paired interval of each step's change (``change_low``..``change_high``),
    which is what says whether a step crossed a tolerance line; for a run written before those
    columns, the interval of each step's value (``ci_low``..``ci_high``), which also holds how
    much the metric varies between sequences."""
    start = float(steps["value"].iloc[0])
    for low, high, offset in (("change_low", "change_high", start), ("ci_low", "ci_high", 0.0)):
        if {low, high} <= set(steps.columns) and steps[[low, high]].notna().any().all():
            return steps[low] + offset, steps[high] + offset
    return None


def _pruning_panel(
    ax, steps: pd.DataFrame, metric: str, pruning: pd.DataFrame, effects: pd.DataFrame | None
) -> None:
    x = steps["fraction_removed"] * 100
    start, sign = float(steps["value"].iloc[0]), P.worse_sign(metric, effects)
    band = pruning_band(steps)
    if band is not None:
        ax.fill_between(
            x, band[0], band[1], color="#999999", alpha=0.3, linewidth=0, label="95% CI"
        )
    sns.lineplot(
        x=x, y=steps["value"], errorbar=None, marker="o", markersize=3, color="#333333", ax=ax
    )
    scale = change_scale(metric, start)  # a metric compared with the intact model: absolute
    for tol, style in zip(P.TOLERANCES, (":", "--")):
        level = start + sign * tol * scale
        ax.axhline(level, color="#d62728", linestyle=style, linewidth=1)
        ax.axhline(
            start - sign * tol * scale, color="#d62728", linestyle=style, linewidth=1, alpha=0.4
        )  # "within": both sides
        share = removable_fraction(pruning, metric, tol)
        # The widest tolerance is labelled on its far side, the others toward the start: lines a
        # few percent apart then never get overlapping labels.
        up = (sign > 0) == (tol == max(P.TOLERANCES))
        ax.annotate(
            f"±{tol:.0%}: {share:.0%} of heads prunable",
            (0.01, level),
            xycoords=("axes fraction", "data"),
            xytext=(0, 2 if up else -2),
            va="bottom" if up else "top",
            textcoords="offset points",
            fontsize=7,
            color="#d62728",
        )
    ax.set_xlabel("heads removed (%)")
    ax.set_ylabel(metric)
    ax.set_title(metric)


@styled
def _pruning_figure(pruning: pd.DataFrame, effects: pd.DataFrame | None) -> Figure:
    metrics = sorted(pruning["metric"].dropna().astype(str).unique())
    grid = sns.FacetGrid(
        pruning,
        col="metric",
        col_order=metrics,
        col_wrap=min(len(metrics), 2),
        height=3.6,
        aspect=1.45,
        sharex=False,
        sharey=False,
    )
    for metric, ax in grid.axes_dict.items():
        steps = P.degradation(pruning, metric, effects)
        if not steps.empty:
            with warnings.catch_warnings():  # an all-NaN CI column is simply not drawn
                warnings.simplefilter("ignore", RuntimeWarning)
                _pruning_panel(ax, steps, metric, pruning, effects)
    return finish_facets(grid, "Pruning curve: least important heads removed first")


def plot_pruning(
    pruning: pd.DataFrame | None, fig_dir: Path | None, effects: pd.DataFrame | None = None
) -> SavedFigure | None:
    """Metric value as heads are removed (least important first), one panel per metric.

    The red lines sit 1% (dotted) and 5% (dashed) worse than the intact model (step 0); where
    the curve crosses them is how much of the model can go at that price. "Worse" is up for
    losses and down for accuracies (orientation read from the effects table's delta). A grey band
    shows each step's interval where the table has one (:func:`pruning_band`).
    Needs pruning: fraction_removed, heads_removed, metric, value.
    """
    if pruning is None or pruning.empty or pruning["value"].notna().sum() == 0:
        return None
    columns = set(pruning.columns)
    band = (
        " Grey band: the intact value plus the 95% interval of each step's change from it, both"
        " resampled over the same sequences."
        if {"change_low", "change_high"} <= columns and pruning["change_low"].notna().any()
        else " Grey band: 95% interval of each step's value."
        if {"ci_low", "ci_high"} <= columns
        else ""
    )
    return save(
        _pruning_figure(pruning, effects),
        fig_dir,
        "pruning",
        "Pruning curve",
        "Metric on held-out sequences after removing the least important heads first (ranked on other "
        f"sequences); red lines: 1% and 5% worse than the intact model.{band}",
    )

"""The report's figures of features: one heatmap panel per feature over the head grid (red: more
attention where the feature looks than a head without preference would give), and the syntactic
relations' accuracy maps (drawn by the report's sections, :mod:`.sections`). Each ``plot_*``
function returns :class:`~interp.report.figures.SavedFigure` objects, or None when the features
table is absent or empty."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from interp.report import summary as S
from interp.report import syntax_section as Y
from interp.report.figures import (
    SavedFigure,
    facet_cell,
    facet_ticks,
    finish_facets,
    head_frame,
    head_heatmap,
    save,
    styled,
    symmetric_span,
    value_labels,
)
from interp.report.plots import usable
from interp.roles import ROLES

FEATURES_PER_FIGURE = 12
# Feature panels have their own scale, but never narrower than ±0.1 attention mass (or accuracy):
# otherwise a feature no head has paints its noise in full red and blue.
FEATURE_SCALE_FLOOR = 0.1


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

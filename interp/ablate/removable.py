"""How much of a model can go: the share of heads removable within a tolerance, from a pruning curve.

"Removable within 1%" means what it says: every step of the curve up to that share stays within
1% of the intact model *on both sides*. A curve that gets better as heads go is not "within":
on a held-out model the repeated-token loss improved by about 60% along a curve that a one-sided
rule ("not worse by more than 1%") called 76% prunable. Where a metric improves past the
tolerance, :func:`improvement` says by how much and where, and the report states it in words.

Pure pandas (no torch), so that the report reads it from the ``pruning`` table alone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from interp.ablate.catalogue import BEHAVIOUR_METRICS, ORIENTATION

TOLERANCES = (0.01, 0.05)  # how far from intact (relative, either side) a pruned model may get
EFFECT_ORDER = (
    "effect"  # pruning rows of a metric's own curve (``removed_by``); role rows say role:<name>
)


def effect_curve(pruning: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The rows of ``metric``'s own-order curve, in order (a table from before ``removed_by``
    holds nothing else)."""
    rows = pruning[pruning["metric"] == metric]
    if "removed_by" in rows.columns:
        rows = rows[rows["removed_by"].isna() | (rows["removed_by"] == EFFECT_ORDER)]
    return rows.sort_values(["fraction_removed", "heads_removed"])


def change_scale(metric: str, start: float) -> float:
    """What a change of ``metric`` from its intact value ``start`` is measured against: 1 (an
    absolute change) for a metric that compares with the intact model (a KL divergence,
    embedding_cosine), which is 0 there by definition; else ``|start|``, or 1 where that is 0.
    By the metric, not by ``start``: a pass over other batches leaves such a metric rounding
    away from 0 (1e-8 nats), and as a scale that would make every step a huge change."""
    if metric in BEHAVIOUR_METRICS or abs(start) <= 1e-12:
        return 1.0
    return abs(start)


def relative_change(values: np.ndarray, metric: str) -> np.ndarray:
    """Each step's change from step 0, relative to it (:func:`change_scale`)."""
    return (values - values[0]) / change_scale(metric, float(values[0]))


def removable_index(values: np.ndarray, tolerance: float, metric: str) -> int:
    """Index of the last step whose every predecessor, and itself, is within ``tolerance`` of
    step 0 on either side (``values`` of ``metric`` in removal order; relative, or absolute
    where :func:`change_scale` says so)."""
    over = np.nonzero(np.abs(relative_change(values, metric)) > tolerance)[0]
    return int(over[0] - 1) if len(over) else len(values) - 1


def share_interval(
    counts: list[int],
    n_heads: int,
    values: np.ndarray,
    boot: np.ndarray,
    tolerance: float,
    metric: str,
) -> dict[str, float]:
    """The removable share at ``tolerance`` of a curve measured at head ``counts`` (``values``
    ``[step]``), with its 95% percentile interval: the same rule applied to each bootstrap
    draw of the curve (``boot`` ``[step, draw]``, resampled sequences)."""
    drawn = [
        counts[removable_index(boot[:, d], tolerance, metric)] / n_heads
        for d in range(boot.shape[1])
    ]
    low, high = np.nanquantile(drawn, [0.025, 0.975])
    return {
        "share": counts[removable_index(values, tolerance, metric)] / n_heads,
        "ci_low": float(low),
        "ci_high": float(high),
    }


def improvement(values: np.ndarray, sign: float, metric: str) -> tuple[float, int]:
    """(by, index): the largest relative improvement over step 0 along ``metric``'s curve and
    the step where it is reached; (0.0, 0) when no step is better than intact. ``sign``: +1 if
    a larger value is worse (a loss), -1 if a smaller one is."""
    better = -sign * relative_change(values, metric)
    if not np.any(better > 0):
        return 0.0, 0
    index = int(np.nanargmax(better))
    return float(better[index]), index


def removable_fraction(pruning: pd.DataFrame, metric: str, tolerance: float) -> float:
    """Largest share of heads removed while ``metric`` stays within ``tolerance`` of the intact value.

    Relative to the intact value (``0.01``: the loss moves by at most 1%, up or down); for a
    metric that compares with the intact model (a KL divergence, ``embedding_cosine``), an
    absolute change (:func:`change_scale`). "Stays": every step up to that share is within
    tolerance, so a lucky step after a collapse does not count.
    """
    curve = effect_curve(pruning, metric).dropna(subset=["value"])
    if curve.empty:
        return float("nan")
    index = removable_index(curve["value"].to_numpy(dtype=float), tolerance, metric)
    return float(curve["fraction_removed"].iloc[index])


def improved(
    pruning: pd.DataFrame, metric: str, sign: float | None = None, tolerance: float = TOLERANCES[0]
) -> dict[str, float] | None:
    """``{"by": relative improvement, "at": share of heads removed}`` where ``metric``'s curve
    gets better than intact by more than ``tolerance`` (its best step), else None. ``sign``: as
    in :func:`improvement` (None: the metric's known orientation)."""
    curve = effect_curve(pruning, metric).dropna(subset=["value"])
    if curve.empty:
        return None
    by, index = improvement(
        curve["value"].to_numpy(dtype=float),
        ORIENTATION.get(metric, 1) if sign is None else sign,
        metric,
    )
    return (
        {"by": by, "at": float(curve["fraction_removed"].iloc[index])} if by > tolerance else None
    )


def removable_summary(
    pruning: pd.DataFrame, tolerances: tuple[float, ...] = TOLERANCES
) -> dict[str, dict[str, float]]:
    """metric -> {"1%": fraction, "5%": fraction}: what the report and the manifest show."""
    return {
        m: {f"{t:.0%}": removable_fraction(pruning, m, t) for t in tolerances}
        for m in dict.fromkeys(pruning["metric"])
    }

"""How much of a model can go: the share of heads removable within a tolerance, from a pruning curve.

Pure pandas (no torch), so that the report reads it from the ``pruning`` table alone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from interp.ablate.catalogue import ORIENTATION

TOLERANCES = (0.01, 0.05)  # how much worse than intact (relative) a pruned model may get
EFFECT_ORDER = "effect"  # pruning rows of a metric's own curve (``removed_by``); role rows say role:<name>


def effect_curve(pruning: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The rows of ``metric``'s own-order curve, in order (a table from before ``removed_by``
    holds nothing else)."""
    rows = pruning[pruning["metric"] == metric]
    if "removed_by" in rows.columns:
        rows = rows[rows["removed_by"].isna() | (rows["removed_by"] == EFFECT_ORDER)]
    return rows.sort_values(["fraction_removed", "heads_removed"])


def removable_index(values: np.ndarray, sign: float, tolerance: float) -> int:
    """Index of the last step whose every predecessor, and itself, is within ``tolerance`` of
    step 0 (``values`` in removal order; relative, or absolute when step 0 is 0)."""
    scale = abs(values[0]) if abs(values[0]) > 1e-12 else 1.0
    over = np.nonzero(sign * (values - values[0]) / scale > tolerance)[0]
    return int(over[0] - 1) if len(over) else len(values) - 1


def removable_fraction(pruning: pd.DataFrame, metric: str, tolerance: float, sign: float | None = None) -> float:
    """Largest share of heads removed while ``metric`` stays within ``tolerance`` of the intact value.

    Relative to the intact value (``0.01``: the loss rises by at most 1%); for a metric whose
    intact value is 0 (``embedding_cosine``), an absolute change. "Stays": every step up to that
    share is within tolerance, so a lucky step after a collapse does not count. ``sign``: +1 if
    a larger value is worse, -1 if a smaller one is (None: the metric's known orientation).
    """
    curve = effect_curve(pruning, metric).dropna(subset=["value"])
    if curve.empty:
        return float("nan")
    sign = ORIENTATION.get(metric, 1) if sign is None else sign
    index = removable_index(curve["value"].to_numpy(dtype=float), sign, tolerance)
    return float(curve["fraction_removed"].iloc[index])


def removable_summary(pruning: pd.DataFrame,
                      tolerances: tuple[float, ...] = TOLERANCES) -> dict[str, dict[str, float]]:
    """metric -> {"1%": fraction, "5%": fraction}: what the report and the manifest show."""
    return {m: {f"{t:.0%}": removable_fraction(pruning, m, t) for t in tolerances}
            for m in dict.fromkeys(pruning["metric"])}

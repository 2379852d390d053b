"""How much of a model can go: the share of heads removable within a tolerance, from a pruning curve.

Pure pandas (no torch), so that the report reads it from the ``pruning`` table alone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from interp.ablation.catalogue import ORIENTATION


def removable_fraction(pruning: pd.DataFrame, metric: str, tolerance: float, sign: float | None = None) -> float:
    """Largest share of heads removed while ``metric`` stays within ``tolerance`` of the intact value.

    Relative to the intact value (``0.01``: the loss rises by at most 1%); for a metric whose
    intact value is 0 (``embedding_cosine``), an absolute change. "Stays": every step up to that
    share is within tolerance, so a lucky step after a collapse does not count. ``sign``: +1 if
    a larger value is worse, -1 if a smaller one is (None: the metric's known orientation).
    """
    curve = pruning[pruning["metric"] == metric].dropna(subset=["value"])
    curve = curve.sort_values(["fraction_removed", "heads_removed"])
    if curve.empty:
        return float("nan")
    values = curve["value"].to_numpy(dtype=float)
    sign = ORIENTATION.get(metric, 1) if sign is None else sign
    scale = abs(values[0]) if abs(values[0]) > 1e-12 else 1.0
    worse = sign * (values - values[0]) / scale
    fractions = curve["fraction_removed"].to_numpy(dtype=float)
    over = np.nonzero(worse > tolerance)[0]
    return float(fractions[over[0] - 1]) if len(over) else float(fractions[-1])


def removable_summary(pruning: pd.DataFrame,
                      tolerances: tuple[float, ...] = (0.01, 0.05)) -> dict[str, dict[str, float]]:
    """metric -> {"1%": fraction, "5%": fraction}: what the report and the manifest show."""
    return {m: {f"{t:.0%}": removable_fraction(pruning, m, t) for t in tolerances}
            for m in dict.fromkeys(pruning["metric"])}

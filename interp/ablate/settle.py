"""The precision rule of the exact rounds, on an effects table alone (pandas, no model), so that
the report can read it as the sweep (interp.ablate.sequential) applies it: an effect is settled
when its interval decides it against the tolerance and, where the rule holds it to a precision (a
head that matters, or one of the ``TOP`` largest of its metric), its half-width is at most
``max(P * |delta|, ABS_PRECISION)``. Where the rounds are too few to settle every effect, they
go first to the effects that contend for a place among the ``TOP`` (:func:`contending`). A
settled effect whose interval still overlaps the boundary of the ``RANK`` largest of its metric
reads on too (:func:`rank_open`): which heads are the few largest is what a reader compares
between runs, and two intervals that overlap there do not say it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from interp.ablate.config import ABS_PRECISION, REL_PRECISION

TOP = 20  # the largest effects of each metric are held to the same rule, whatever their decision
# The largest effects whose order the rounds resolve: membership of the TOP is already what the
# rounds serve first (contending), and on SmolLM2's default run the effects near the 20th overlap
# by the dozen, so resolving that boundary too would spend the budget on ranks no reader compares.
RANK = 5


def _half_widths(effects: pd.DataFrame, rel: float) -> tuple[pd.Series, pd.Series, pd.Series]:
    """Per effects row: (its interval's half-width, the half-width the rule allows, whether the
    rule asks it of the row: a head that matters or ranks among the ``TOP`` of its metric)."""
    half = (effects["ci_high"] - effects["ci_low"]) / 2
    allowed = np.maximum(rel * effects["delta"].abs(), ABS_PRECISION)
    needs = (effects["vs_tolerance"] == "above") | among_largest(effects, TOP)
    return half, allowed, needs


def settled(effects: pd.DataFrame, rel: float = REL_PRECISION) -> pd.Series:
    """Per effects row: is the effect settled (see module docstring)? ``rel``: the relative
    precision asked of a head that matters or ranks among the ``TOP`` largest of its metric."""
    half, allowed, needs = _half_widths(effects, rel)
    decided = effects["vs_tolerance"] != "undecided"
    return decided & (~needs | (half <= allowed))


def contending(effects: pd.DataFrame) -> pd.Series:
    """Per effects row: could its effect rank among the ``TOP`` largest |effects| of its metric
    and ablation kind? True where its interval reaches as far from zero as the ``TOP``-th largest
    |delta|: the heads ranked there now, and those whose rank the interval leaves open."""
    size = effects["delta"].abs()
    group = [effects["ablation"], effects["metric"]]
    bar = size.groupby(group).transform(lambda s: s.nlargest(TOP).min())
    reach = np.maximum(effects["ci_low"].abs(), effects["ci_high"].abs())
    return reach >= bar


def among_largest(effects: pd.DataFrame, k: int = RANK) -> pd.Series:
    """Per effects row: is its |delta| among the ``k`` largest of its metric and ablation kind
    (ties in row order)?"""
    size = effects["delta"].abs()
    group = [effects["ablation"], effects["metric"]]
    return size.groupby(group).rank(ascending=False, method="first") <= k


def rank_open(effects: pd.DataFrame, k: int = RANK) -> pd.Series:
    """Per effects row: does its interval leave open whether it ranks among the ``k`` largest
    |effects| of its metric and ablation kind? For one of the ``k`` now, True where the least
    |effect| its interval allows is below the most that another head's, outside the ``k``,
    allows; for one outside, where the most its interval allows is above the least allowed to one
    of the ``k``. A metric with at most ``k`` heads has no boundary: False."""
    lo, hi = _size_bounds(effects)
    group = [effects["ablation"], effects["metric"]]
    inside = among_largest(effects, k)
    # the most an outside head may reach, and the least an inside one may fall to, per group
    outside_reach = hi.where(~inside).groupby(group).transform("max")
    inside_floor = lo.where(inside).groupby(group).transform("min")
    crossing = pd.Series(
        np.where(inside, lo < outside_reach, hi > inside_floor), index=effects.index
    )
    return crossing & outside_reach.notna()


def _size_bounds(effects: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Per effects row, the least and the most |effect| its 95% interval allows (0 where the
    interval holds zero)."""
    low, high = effects["ci_low"], effects["ci_high"]
    least = np.where(low > 0, low, np.where(high < 0, -high, 0.0))
    return pd.Series(least, index=effects.index), np.maximum(low.abs(), high.abs())


def positions_needed(effects: pd.DataFrame, rel: float = REL_PRECISION) -> pd.Series:
    """Per effects row that the rule holds to its precision, decided against the tolerance but
    not yet that precise: how many times the positions it rests on would bring its half-width
    within the rule, at the rate an interval narrows (as one over the square root of the
    positions): (half-width / allowed half-width) squared. NaN on every other row (an undecided
    effect's need depends on how near the tolerance its true value lies)."""
    half, allowed, needs = _half_widths(effects, rel)
    wanting = needs & (effects["vs_tolerance"] != "undecided") & (half > allowed)
    return ((half / allowed) ** 2).where(wanting)

"""The rounds read on where an interval leaves open which heads are the few largest of a metric."""

from __future__ import annotations

import pandas as pd

from interp.ablate.sequential import next_heads, open_heads
from interp.ablate.settle import rank_open, settled


def _effects(deltas: list[float], half: float, metric: str = "retrieval_margin") -> pd.DataFrame:
    """Heads (0, h) with effect ``deltas[h]``, interval +-``half``, all settled as removable or
    mattering by a rule they meet (half-width at most 0.01)."""
    delta = pd.Series(deltas, dtype=float)
    return pd.DataFrame(
        {
            "delta": delta,
            "ci_low": delta - half,
            "ci_high": delta + half,
            "vs_tolerance": "above",
            "metric": metric,
            "ablation": "mean",
            "layer": 0,
            "head": range(len(deltas)),
        }
    )


def test_an_interval_across_the_fifth_largest_is_open_on_both_sides():
    # the 5th (0.0104) and 6th (0.0102) largest overlap; the others are clear of the boundary
    rows = _effects([0.05, 0.04, 0.03, 0.02, 0.0104, 0.0102, 0.005, 0.001], 0.0002)
    assert settled(rows).all()
    assert rank_open(rows).tolist() == [False] * 4 + [True, True] + [False] * 2
    assert open_heads(rows, "retrieval_margin", 0.1) == {(0, 4), (0, 5)}


def test_the_least_and_most_an_interval_allows_are_by_size_whatever_the_sign():
    # the 6th largest is negative: |-0.0102 +- 0.0002| reaches 0.0104, the 5th's least
    rows = _effects([0.05, -0.04, 0.03, -0.02, 0.0105, -0.0102, 0.001], 0.0002)
    assert rank_open(rows).tolist() == [False] * 4 + [True, True, False]
    # an interval holding zero allows any size from 0: the 5th (0.01 +- 0.012) falls below the
    # 6th's most (0.014), as the 4th's least does (0.008); the 3rd's (0.018) does not
    holds_zero = _effects([0.05, 0.04, 0.03, 0.02, 0.01, 0.002], 0.012)
    assert rank_open(holds_zero).tolist() == [False, False, False, True, True, True]


def test_apart_intervals_and_metrics_of_few_heads_have_no_open_rank():
    apart = _effects([0.05, 0.04, 0.03, 0.02, 0.0110, 0.0102], 0.0002)
    assert not rank_open(apart).any()
    assert not rank_open(_effects([0.05, 0.0501, 0.05, 0.04, 0.04], 0.01)).any()  # 5 heads: no 6th
    # each metric and ablation kind ranks its own heads
    two = pd.concat(
        [apart, _effects([0.05, 0.04, 0.03, 0.02, 0.0104, 0.0102], 0.0002, "embedding_cosine")],
        ignore_index=True,
    )
    assert rank_open(two).tolist() == [False] * 10 + [True, True]


def test_an_open_rank_waits_behind_effects_the_rule_still_wants():
    # 25 heads: the 5th and 6th overlap, 18 more settled at 0.005, and head 24 undecided against
    # the tolerance: open too, but too small to contend for the 20 largest
    rows = _effects([0.05, 0.04, 0.03, 0.02, 0.0104, 0.0102] + [0.005] * 18 + [0.0001], 0.0002)
    rows.loc[24, "vs_tolerance"] = "undecided"
    heads = {"retrieval_margin": [(0, h) for h in range(25)]}
    assert next_heads(rows, heads, 0.1) == {"retrieval_margin": [(0, 4), (0, 5)]}
    everyone = next_heads(rows, heads, 0.1, ordered=False)
    assert everyone == {"retrieval_margin": [(0, 4), (0, 5), (0, 24)]}

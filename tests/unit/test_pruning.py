"""Pruning curves on hand-built per-sequence sums: bisection to one head, the removable share and its interval."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from interp.ablate.pruning import Removals, metric_curve, step_sizes
from interp.ablate.removable import (
    change_scale,
    effect_curve,
    improved,
    improvement,
    removable_fraction,
    removable_index,
    share_interval,
)


class Scripted(Removals):
    """Removals whose metric, with the first k heads removed, is ``curve[k]`` on every sequence."""

    def __init__(self, curve: list[float], n_seq: int = 4):
        self.metric, self.curve = "loss_prose", curve
        self.den = np.ones(n_seq)
        self.num: dict = {}
        self.asked: list[int] = []

    def measure(self, sets: dict) -> None:
        for key, heads in sets.items():
            if key not in self.num:
                self.asked.append(key)
                # a little per-sequence noise around the scripted value, averaging to it
                self.num[key] = self.curve[len(heads)] + np.array([-1e-4, 1e-4, -1e-4, 1e-4])


def test_removable_index_takes_the_last_step_before_the_first_crossing():
    values = np.array([2.0, 2.0, 2.01, 2.3, 2.0])  # the lucky last step does not count
    assert removable_index(values, 0.01, "loss_prose") == 2
    assert removable_index(values, 0.2, "loss_prose") == 4
    margin = np.array([1.0, 0.5])  # a margin that shrinks by 50%
    assert removable_index(margin, 0.1, "sv_logit_diff") == 0
    assert removable_index(np.array([0.0, 0.05]), 0.1, "loss_corpus") == 1  # intact 0: absolute


def test_a_divergence_from_the_intact_model_is_an_absolute_change():
    # the KL of a pass over other batches rounds away from 0: as a scale, 1e-8 nats would make
    # 0.005 nats a 500,000-fold change and no step removable
    kl = np.array([1e-8, 3e-8, 0.005, 0.009, 0.03, 0.2])
    assert removable_index(kl, 0.01, "kl_prose") == 3  # within 0.01 nats up to 0.009
    assert removable_index(kl, 0.05, "kl_prose") == 4
    assert removable_index(kl, 0.01, "kl_corpus") == 3
    assert removable_index(kl, 0.01, "loss_prose") == 0  # another metric: 3e-8 is +200%
    assert change_scale("kl_prose", 1e-8) == 1.0
    assert change_scale("embedding_cosine", 0.3) == 1.0
    assert change_scale("loss_prose", 4.0) == 4.0
    assert change_scale("sv_logit_diff", -2.0) == 2.0
    assert change_scale("loss_prose", 0.0) == 1.0


def test_within_the_tolerance_means_on_both_sides():
    # a loss that falls 0.5%, then 2% (better than intact), then rises: 2% better is not "within 1%"
    values = np.array([2.0, 1.99, 1.96, 1.98, 2.5])
    assert removable_index(values, 0.01, "loss_repeated") == 1
    assert removable_index(values, 0.05, "loss_repeated") == 3
    curve = pd.DataFrame(
        {
            "fraction_removed": [0.0, 0.25, 0.5, 0.75, 1.0],
            "heads_removed": [0, 1, 2, 3, 4],
            "metric": "loss_repeated",
            "value": values,
        }
    )
    assert removable_fraction(curve, "loss_repeated", 0.01) == 0.25
    assert removable_fraction(curve, "loss_repeated", 0.05) == 0.75
    # the improvement is stated instead: 2% better at half the heads (a loss: lower is better)
    assert improvement(values, 1, "loss_repeated") == (pytest.approx(0.02), 2)
    assert improved(curve, "loss_repeated") == {"by": pytest.approx(0.02), "at": 0.5}
    assert improved(curve, "loss_repeated", tolerance=0.05) is None  # not past 5%
    # a logit difference that rises is the better direction there
    sv = curve.assign(metric="sv_logit_diff", value=[1.0, 1.3, 1.2, 0.9, 0.1])
    assert improvement(sv["value"].to_numpy(), -1, "sv_logit_diff") == (pytest.approx(0.3), 1)
    assert improved(sv, "sv_logit_diff") == {"by": pytest.approx(0.3), "at": 0.25}
    never = np.array([2.0, 2.1, 2.2])
    assert improvement(never, 1, "loss_prose") == (0.0, 0)  # never better: nothing to state


def test_the_removable_share_has_a_bootstrap_interval():
    counts, n = [0, 1, 2, 3, 4], 4
    values = np.array([2.0, 2.01, 2.015, 2.3, 3.0])  # within 1% up to 2 heads
    # four bootstrap draws of the curve: removable 1, 2, 2 and 3 heads at 1%
    boot = np.array(
        [
            [2.0, 2.0, 2.0, 2.0],
            [2.01, 2.01, 2.01, 2.0],
            [2.03, 2.015, 2.015, 2.01],
            [2.3, 2.3, 2.3, 2.01],
            [3.0, 3.0, 3.0, 3.0],
        ]
    )
    out = share_interval(counts, n, values, boot, 0.01, "loss_prose")
    assert out["share"] == 0.5
    assert out["ci_low"] == pytest.approx(np.quantile([0.25, 0.5, 0.5, 0.75], 0.025))  # 0.26875
    assert out["ci_high"] == pytest.approx(np.quantile([0.25, 0.5, 0.5, 0.75], 0.975))  # 0.73125
    assert (out["ci_low"], out["ci_high"]) == (pytest.approx(0.26875), pytest.approx(0.73125))
    # a draw whose curve improves past 1% stops there too (both sides)
    better = boot.copy()
    better[1, :] = 1.97
    assert share_interval(counts, n, values, better, 0.01, "loss_prose")["ci_high"] == 0.0


def test_bisection_finds_the_crossing_to_one_head():
    n = 100
    curve = [1.0] + [
        1.0 + 0.001 * k - 0.0005 for k in range(1, n + 1)
    ]  # past +1% from 11 heads, +5% from 51
    order = [(k, 0) for k in range(n)]
    removals = Scripted(curve)
    rows, shares = metric_curve(removals, order, 0.25, n_boot=50, seed=0, progress=False)
    assert step_sizes(n, 0.25) == [25, 50, 75, 100]
    assert shares["1%"]["share"] == 0.10 and shares["5%"]["share"] == 0.50
    # the grid, then one bisection per tolerance: never every head
    assert set(removals.asked) >= {0, 25, 50, 75, 100, 10, 11} and len(removals.asked) < 20
    assert rows["heads_removed"].is_monotonic_increasing and (rows["removed_by"] == "effect").all()
    assert (
        removable_fraction(rows, "loss_prose", 0.01) == 0.10
    )  # the report's rule on the table agrees
    assert shares["1%"]["ci_low"] <= 0.10 <= shares["1%"]["ci_high"]
    heads = " ".join(rows["last_removed"].dropna()).split()
    assert len(heads) == len(set(heads)) == n  # each head removed exactly once along the curve


def test_bisection_finds_a_crossing_for_the_better_too():
    n = 100
    curve = [1.0] + [
        1.0 - 0.001 * k + 0.0005 for k in range(1, n + 1)
    ]  # 1% better from 11 heads, 5% from 51
    removals = Scripted(curve)
    rows, shares = metric_curve(
        removals, [(k, 0) for k in range(n)], 0.25, n_boot=50, seed=0, progress=False
    )
    assert shares["1%"]["share"] == 0.10 and shares["5%"]["share"] == 0.50
    assert improved(rows, "loss_prose") == {"by": pytest.approx(0.0995), "at": 1.0}


def test_effect_curve_leaves_out_role_rows():
    table = pd.DataFrame(
        {
            "fraction_removed": [0.0, 0.5, 0.25],
            "heads_removed": [0, 2, 1],
            "metric": "m",
            "value": [1.0, 2.0, 9.0],
            "removed_by": ["effect", "effect", "role:broad"],
        }
    )
    assert effect_curve(table, "m")["heads_removed"].tolist() == [0, 2]
    assert (
        removable_fraction(table, "m", 0.5) == 0.0
    )  # 1.0 -> 2.0 crosses at once; the role row is ignored
    assert (
        removable_fraction(table.drop(columns="removed_by").iloc[:2], "m", 1.5) == 0.5
    )  # older tables


class Fixed(Removals):
    """Removals with given per-sequence sums (one position per sequence) per key."""

    def __init__(self, num: dict):
        self.metric, self.num = "loss_prose", {k: np.asarray(v, float) for k, v in num.items()}
        self.den = np.ones(len(next(iter(self.num.values()))))


def test_a_steps_change_interval_pairs_the_sequences_the_level_interval_does_not():
    # sequences spread from 1 to 7 nats, and removing the heads adds exactly 0.5 to every one:
    # the level's interval holds the spread, the change's is the 0.5 itself
    removals = Fixed({0: [1.0, 3.0, 5.0, 7.0], "role:x": [1.5, 3.5, 5.5, 7.5]})
    spans = removals.intervals([0, "role:x"], n_boot=200, seed=0)
    assert spans.columns["change_low"].tolist() == pytest.approx([0.0, 0.5])
    assert spans.columns["change_high"].tolist() == pytest.approx([0.0, 0.5])
    assert spans.columns["ci_high"][1] - spans.columns["ci_low"][1] > 2.0
    # the draws are the level's: the intact row's spans its own spread
    assert spans.boot.shape == (2, 200)
    assert spans.columns["ci_low"][0] == pytest.approx(np.nanquantile(spans.boot[0], 0.025))


def test_role_rows_carry_the_paired_change_interval():
    from interp.ablate.pruning import role_rows

    class Measured(Fixed):
        def measure(self, sets: dict) -> None:  # the role's sums are given
            assert set(sets) <= set(self.num)

    removals = Measured({0: [1.0, 3.0, 5.0, 7.0], "role:x": [0.5, 3.5, 5.5, 7.5]})
    rows = role_rows(removals, {"x": [(0, 1)]}, n_heads=4, n_boot=500, seed=1)
    (row,) = rows.to_dict("records")
    assert row["value"] == pytest.approx(4.25) and row["removed_by"] == "role:x"
    # per-sequence changes -0.5, 0.5, 0.5, 0.5: each draw's mean change lies in [-0.5, 0.5]
    assert -0.5 <= row["change_low"] < 0.25 < row["change_high"] <= 0.5
    assert row["ci_high"] - row["ci_low"] > 2.0

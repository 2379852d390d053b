"""Pruning curves on hand-built per-sequence sums: bisection to one head, the removable share and its interval."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from interp.ablate.pruning import Removals, metric_curve, step_sizes
from interp.ablate.removable import effect_curve, removable_fraction, removable_index


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
    assert removable_index(values, 1, 0.01) == 2
    assert removable_index(values, 1, 0.2) == 4
    assert removable_index(np.array([1.0, 0.5]), -1, 0.1) == 0  # a margin that shrinks gets worse
    assert removable_index(np.array([0.0, 0.05]), 1, 0.1) == 1  # intact 0: an absolute change


def test_bisection_finds_the_crossing_to_one_head():
    n = 100
    curve = [1.0] + [1.0 + 0.001 * k - 0.0005 for k in range(1, n + 1)]  # past +1% from 11 heads, +5% from 51
    order = [(k, 0) for k in range(n)]
    removals = Scripted(curve)
    rows, shares = metric_curve(removals, order, 0.25, n_boot=50, seed=0, progress=False)
    assert step_sizes(n, 0.25) == [25, 50, 75, 100]
    assert shares["1%"]["share"] == 0.10 and shares["5%"]["share"] == 0.50
    # the grid, then one bisection per tolerance: never every head
    assert set(removals.asked) >= {0, 25, 50, 75, 100, 10, 11} and len(removals.asked) < 20
    assert rows["heads_removed"].is_monotonic_increasing and (rows["removed_by"] == "effect").all()
    assert removable_fraction(rows, "loss_prose", 0.01) == 0.10  # the report's rule on the table agrees
    assert shares["1%"]["ci_low"] <= 0.10 <= shares["1%"]["ci_high"]
    heads = " ".join(rows["last_removed"].dropna()).split()
    assert len(heads) == len(set(heads)) == n  # each head removed exactly once along the curve


def test_effect_curve_leaves_out_role_rows():
    table = pd.DataFrame({"fraction_removed": [0.0, 0.5, 0.25], "heads_removed": [0, 2, 1], "metric": "m",
                          "value": [1.0, 2.0, 9.0], "removed_by": ["effect", "effect", "role:broad"]})
    assert effect_curve(table, "m")["heads_removed"].tolist() == [0, 2]
    assert removable_fraction(table, "m", 0.5) == 0.0  # 1.0 -> 2.0 crosses at once; the role row is ignored
    assert removable_fraction(table.drop(columns="removed_by").iloc[:2], "m", 1.5) == 0.5  # older tables

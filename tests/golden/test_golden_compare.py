"""The golden comparison (compare.py) lets through what float32 rounding may change, and only
that: each test perturbs the golden tables and checks what the comparison reports."""

from __future__ import annotations

import pandas as pd
import pytest
from compare import ATOL, RTOL, differences, read_table, report
from make_golden import HERE, TABLES


@pytest.fixture
def golden() -> dict[str, pd.DataFrame]:
    return {table: read_table(HERE / "tiny-bert" / f"{table}.csv") for table in TABLES}


def copied(tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    return {name: frame.copy() for name, frame in tables.items()}


def swap_steps(pruning: pd.DataFrame, metric: str, first: int, second: int) -> pd.DataFrame:
    """The curve as if the heads removed at steps ``first`` and ``second`` came in the other order."""
    curve = (pruning["metric"] == metric) & (pruning["removed_by"] == "effect")
    i = pruning.index[curve & (pruning["heads_removed"] == first)][0]
    j = pruning.index[curve & (pruning["heads_removed"] == second)][0]
    out = pruning.copy()
    out.loc[[i, j], "last_removed"] = pruning.loc[[j, i], "last_removed"].to_numpy()
    out.loc[i, ["value", "ci_low", "ci_high"]] *= (
        0.9  # the step between measures another set of heads
    )
    return out


def test_the_golden_tables_equal_themselves(golden):
    assert differences(copied(golden), golden).empty


def test_nan_equals_nan_and_nothing_else(golden):
    now = copied(golden)
    assert now["roles"]["second_role"].isna().any() and now["pruning"]["last_removed"].isna().any()
    assert differences(now, golden).empty
    now["roles"]["second_role"] = now["roles"]["second_role"].astype(object)
    now["roles"].loc[0, "second_role"] = "induction"
    now["effects"].loc[0, "estimate"] = 0.0
    diff = differences(now, golden)
    assert sorted(diff["column"]) == ["estimate", "second_role"]


def test_floats_within_the_tolerance_pass_and_beyond_it_fail(golden):
    now = copied(golden)
    value = golden["features"].loc[5, "value"]
    now["features"].loc[5, "value"] = value + 0.5 * (ATOL + RTOL * abs(value))
    assert differences(now, golden).empty
    now["features"].loc[5, "value"] = value + 2 * (ATOL + RTOL * abs(value))
    diff = differences(now, golden)
    assert diff[["table", "column"]].values.tolist() == [["features", "value"]]
    assert diff.loc[0, "golden"] == value and diff.loc[0, "now"] == now["features"].loc[5, "value"]


def test_labels_and_counts_are_exact(golden):
    now = copied(golden)
    now["roles"].loc[3, "role"] = "induction"
    now["effects"].loc[2, "n_tokens"] += 1
    assert sorted(differences(now, golden)["column"]) == ["n_tokens", "role"]


def test_heads_whose_effects_tie_may_swap_in_a_pruning_curve(golden):
    # embedding_cosine effects: L1H1 2.0266e-06, L0H3 2.0464e-06 (steps 3 and 4), a tie.
    now = copied(golden)
    now["pruning"] = swap_steps(golden["pruning"], "embedding_cosine", 3, 4)
    assert differences(now, golden).empty


def test_heads_whose_effects_differ_may_not_swap(golden):
    # L2H0 (-7.10e-05) goes first and L1H3 (1.16e-04) last: apart by more than twice the tolerance.
    now = copied(golden)
    now["pruning"] = swap_steps(golden["pruning"], "retrieval_margin", 1, 12)
    diff = differences(now, golden)
    assert (diff["column"] == "(order)").any()
    assert "L2H0 before L1H3" in diff.loc[diff["column"] == "(order)", "golden"].tolist()


def test_values_of_steps_that_remove_the_same_heads_are_compared(golden):
    now = copied(golden)
    now["pruning"] = swap_steps(golden["pruning"], "embedding_cosine", 7, 8)
    step = (now["pruning"]["metric"] == "embedding_cosine") & (now["pruning"]["heads_removed"] == 8)
    now["pruning"].loc[step & (now["pruning"]["removed_by"] == "effect"), "value"] += 1e-4
    diff = differences(now, golden)
    assert diff[["table", "column"]].values.tolist() == [["pruning", "value"]]
    assert "heads_removed=8" in diff.loc[0, "row"]


def test_a_decision_may_flip_only_at_its_threshold(golden):
    effects = golden["effects"]
    below = effects.index[(effects["vs_zero"] == "below") & (effects["ci_high"] < -1e-5)][0]
    now = copied(golden)
    now["effects"].loc[below, "vs_zero"] = "undecided"
    assert differences(now, golden)["column"].tolist() == ["vs_zero"]
    # The same flip where the interval's upper bound is at zero within the tolerance: either is right.
    at_zero = effects.copy()
    at_zero.loc[below, "ci_high"] = -0.5 * ATOL
    now["effects"].loc[below, "ci_high"] = -0.5 * ATOL
    assert differences(now, {**golden, "effects": at_zero}).empty


def test_the_report_shows_only_the_differing_rows_side_by_side(golden):
    now = copied(golden)
    now["roles"].loc[3, "confidence"] = 0.5
    text = report(differences(now, golden), {"pandas": "2.2.3"}, {"pandas": "3.1.1"})
    lines = text.splitlines()
    assert lines[0].startswith("1 cell(s) differ")
    row = next(line for line in lines if "confidence" in line)
    assert (
        "layer=0 head=3" in row
        and repr(float(golden["roles"].loc[3, "confidence"])) in row
        and "0.5" in row
    )
    assert sum("layer=" in line for line in lines) == 1
    assert any(
        "pandas" in line and "2.2.3" in line and "3.1.1" in line and "differs" in line
        for line in lines
    )

"""The report says where the intervals leave open which heads are a metric's few largest effects."""

from __future__ import annotations

import pandas as pd

from interp.report import summary as S
from interp.report.notes import open_ranks_note


def _effects(
    metric: str, deltas: list[float], half: float, estimator: str = "exact"
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "layer": 1,
            "head": range(len(deltas)),
            "ablation": "mean",
            "metric": metric,
            "estimator": estimator,
            "delta": deltas,
            "ci_low": [d - half for d in deltas],
            "ci_high": [d + half for d in deltas],
        }
    )


def test_open_ranks_name_the_heads_across_the_fifth_place_largest_first():
    effects = pd.concat(
        [
            # the 5th (-0.0104) and 6th (0.0102) overlap; heads 0 to 3 and 6 are clear
            _effects("retrieval_margin", [0.05, 0.04, 0.03, 0.02, 0.0102, -0.0104, 0.001], 0.0002),
            _effects("embedding_cosine", [0.05, 0.04, 0.03, 0.02, 0.011, 0.009], 0.0002),
            # estimates are not read: their order rests on no exact interval
            _effects("loss_prose", [0.05, 0.04, 0.03, 0.02, 0.0102, 0.0104], 0.01, "attribution"),
        ],
        ignore_index=True,
    )
    assert S.open_ranks(effects) == [
        {"ablation": "mean", "metric": "retrieval_margin", "inside": ["L1H5"], "outside": ["L1H4"]}
    ]
    assert S.open_ranks(None) == [] and S.open_ranks(effects.iloc[:0]) == []
    assert open_ranks_note(S.open_ranks(effects)) == (
        "Which heads are the 5 largest effects is not settled where their intervals overlap "
        "across the 5th place: retrieval_margin (mean): L1H5 of the 5 largest overlaps L1H4. The "
        "rounds read these heads on first after the effects the precision rule wants; another "
        "run, on other sequences, may order them otherwise. More sequences (--precise, "
        "--max-rounds, or your own --eval-corpus) can part them."
    )


def test_a_budget_bound_metric_names_the_nearest_heads_beyond_its_largest_and_counts_the_rest():
    # heads 3 and 4 (0.3, 0.2) reach down to 0.19 and 0.09, below head 5's 0.26; heads 5 to 10
    # (0.15 .. 0.02) all reach up past 0.09
    deltas = [0.9, 0.8, 0.7, 0.3, 0.2, 0.15, 0.12, 0.1, 0.08, 0.05, 0.02]
    effects = _effects("kl_prose", deltas, 0.11)
    effects.loc[:2, ["ci_low", "ci_high"]] = [[0.89, 0.91], [0.79, 0.81], [0.69, 0.71]]
    rows = S.open_ranks(effects)
    assert rows == [
        {
            "ablation": "mean",
            "metric": "kl_prose",
            "inside": ["L1H3", "L1H4"],
            "outside": ["L1H5", "L1H6", "L1H7", "L1H8", "L1H9", "L1H10"],
        }
    ]
    assert (
        "kl_prose (mean): L1H3 and L1H4 of the 5 largest overlap 6 heads beyond them (the "
        "nearest: L1H5, L1H6, L1H7)." in open_ranks_note(rows)
    )

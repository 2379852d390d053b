"""The report says where the intervals leave open which heads are a metric's few largest effects."""

from __future__ import annotations

import pandas as pd

from interp.report import summary as S
from interp.report.document import open_ranks_note


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
        {"ablation": "mean", "metric": "retrieval_margin", "heads": ["L1H5", "L1H4"]}
    ]
    assert S.open_ranks(None) == [] and S.open_ranks(effects.iloc[:0]) == []
    assert open_ranks_note(S.open_ranks(effects)) == (
        "Which heads are the 5 largest effects is not settled where their intervals overlap "
        "across the 5th place: retrieval_margin (mean): L1H5, L1H4. The rounds read these heads "
        "on first after the effects the precision rule wants; another run, on other sequences, "
        "may order them otherwise. More sequences (--precise, --max-rounds, or your own "
        "--eval-corpus) can part them."
    )

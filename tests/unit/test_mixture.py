"""Mixed heads (interp.classify.mixture): exact answers on hand-built detectors and tables, and
the shipped detectors on planted blends of a seed they never saw."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from interp.classify.combine import combine
from interp.classify.mixture import (
    BLEND_ROLES,
    FEATURES,
    MIXED,
    MIXTURE_FILE,
    Detectors,
    blend_key,
    component_roles,
    default_detectors,
    expand,
    name_mixtures,
    relabel_blends,
)
from interp.classify.reference import REFERENCE_VERSION
from interp.classify.reference.blends import build_blends, spec_shares
from interp.classify.reference.fit import default_classifier, reference_dir
from interp.classify.reference.mixture_fit import (
    calibration_error,
    measure,
    refit_mixture,
    unexplained,
)


def own_feature_detectors() -> Detectors:
    """Each role's logit is 10 x (its own feature) - 2; its share is its own feature."""
    n_inputs = expand(np.zeros((1, len(FEATURES)))).shape[1]
    coef = np.zeros((len(BLEND_ROLES), n_inputs))
    for j, role in enumerate(BLEND_ROLES):
        coef[j, FEATURES.index(role)] = 1.0
    return Detectors(
        np.zeros(n_inputs), np.ones(n_inputs), 10 * coef, np.full(len(BLEND_ROLES), -2.0),
        coef, np.zeros(len(BLEND_ROLES)),
    )  # fmt: skip


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + np.exp(-z))


def test_expand_appends_every_pairwise_product_squares_included():
    assert expand(np.array([[1.0, 2.0, 3.0]])).tolist() == [[1, 2, 3, 1, 2, 3, 4, 6, 9]]


def head_matrix(rows: dict[tuple[int, int], dict[str, float]]) -> pd.DataFrame:
    index = pd.MultiIndex.from_tuples(list(rows), names=["layer", "head"])
    frame = pd.DataFrame([{f: 0.0 for f in FEATURES} | r for r in rows.values()], index=index)
    return frame.assign(syntactic=0.0)


def test_an_unexplained_head_with_two_roles_becomes_mixed():
    matrix = head_matrix(
        {
            (0, 0): {"delimiter": 0.4, "local": 0.3},  # two roles hold
            (0, 1): {"delimiter": 0.4},  # one role is no blend
            (0, 2): {"previous_token": 0.9, "local": 0.5},  # the classifier named it already
            (0, 3): {"current_token": 0.5, "local": 0.35},  # a blend that also sinks
            (0, 4): {"delimiter": np.nan, "local": 0.4, "current_token": 0.5},  # not measured
        }
    )
    roles = pd.DataFrame(
        {
            "layer": [0] * 5,
            "head": [4, 3, 2, 1, 0],  # any order
            "role": ["unexplained", "unexplained", "previous_token", "unexplained", "unexplained"],
            "confidence": [0.6, 0.7, 0.9, 0.8, 0.65],
            "second_role": [np.nan, "first_token", np.nan, "delimiter", "delimiter"],
        }
    )
    out = name_mixtures(roles, matrix, own_feature_detectors()).set_index("head")
    assert out["role"].tolist() == ["unexplained", MIXED, "previous_token", "unexplained", MIXED]
    assert out.loc[0, "components"] == "delimiter 0.40 + local 0.30"
    assert out.loc[0, "confidence"] == pytest.approx(sigmoid(1.0))  # the less sure of the two
    assert pd.isna(out.loc[0, "second_role"])  # its components say it
    assert out.loc[3, "components"] == "current_token 0.50 + local 0.35"
    assert out.loc[3, "second_role"] == "first_token"  # the sink still counts
    assert out.loc[3, "confidence"] == pytest.approx(sigmoid(1.5))
    assert out.loc[[1, 2, 4], "components"].isna().all()
    assert out.loc[1, "confidence"] == 0.8 and out.loc[1, "second_role"] == "delimiter"


def test_a_blend_is_known_by_its_roles_in_catalogue_order():
    assert blend_key(["local", "delimiter"]) == "mixed:delimiter+local"
    assert component_roles("delimiter 0.41 + local 0.24") == ["delimiter", "local"]
    assert blend_key(component_roles("local 0.30 + previous_token 0.21")) == (
        "mixed:previous_token+local"
    )


def test_replicates_read_blends_only_where_the_data_could_be_one():
    rows = head_matrix(
        {
            (0, 0): {"delimiter": 0.4, "local": 0.3},  # a blend
            (0, 1): {"local": 0.5},  # one role: stays unexplained
            (0, 2): {"delimiter": 0.4, "local": 0.3},  # named by the classifier
            (0, 3): {"delimiter": 0.4, "local": 0.3},  # not eligible (features unmeasured)
            (0, 4): {"delimiter": np.nan, "local": 0.3, "current_token": 0.5},  # NaN
        }
    )[list(FEATURES)].to_numpy()
    labels = np.array(["unexplained", "unexplained", "local", "unexplained", "unexplained"])
    eligible = np.array([True, True, True, False, True])
    out = relabel_blends(labels, rows, eligible, own_feature_detectors())
    assert out.tolist() == [
        "mixed:delimiter+local", "unexplained", "local", "unexplained", "unexplained"
    ]  # fmt: skip


def test_a_head_whose_blend_features_were_not_measured_stays_unexplained():
    matrix = head_matrix({(0, 0): {"delimiter": 0.4, "local": 0.3}, (0, 1): {"local": 0.4}})
    matrix.loc[(0, 1), "current_token"] = 0.5
    roles = pd.DataFrame(
        {
            "layer": [0, 0],
            "head": [0, 1],
            "role": ["unexplained", "unexplained"],
            "confidence": [0.6, 0.6],
            "second_role": [np.nan, np.nan],
            # without repeated tokens a copy role could be one of its parts; syntax is no part
            "unmeasured": ["duplicate_token induction", "syntactic"],
        }
    )
    out = name_mixtures(roles, matrix, own_feature_detectors())
    assert out["role"].tolist() == ["unexplained", MIXED]


def test_what_a_mixed_head_writes_outranks_it_and_it_stays_the_second_role():
    looks = pd.DataFrame(
        {
            "layer": [0, 0],
            "head": [0, 1],
            "role": [MIXED, MIXED],
            "confidence": [0.7, 0.8],
            "second_role": [np.nan, np.nan],
        }
    )
    writes = pd.DataFrame(
        {"writes": ["copying", np.nan], "writes_confidence": [0.95, 0.6]},
        index=pd.MultiIndex.from_tuples([(0, 0), (0, 1)], names=["layer", "head"]),
    )
    out = combine(looks, writes, None)
    assert out["role"].tolist() == ["copying", MIXED]
    assert out["second_role"].tolist()[0] == MIXED
    assert out["evidence"].tolist() == ["weights", "attention"]
    assert out["looks"].tolist() == [MIXED, MIXED]


def test_calibration_error_weights_each_bin_by_its_predictions():
    p = np.array([0.1, 0.15, 0.9, 0.95])
    y = np.array([False, True, True, True])
    # bin 1: mean p 0.125, rate 0.5; bin 9: mean p 0.925, rate 1
    assert calibration_error(p, y) == pytest.approx((2 * 0.375 + 2 * 0.075) / 4)


def test_spec_shares_read_a_bank_head_off_its_sink():
    shares = spec_shares("0.50 offset[-1, 'self'] + 0.25 first + 0.25 broad[False]")
    assert shares == pytest.approx({"previous_token": 2 / 3, "background": 1 / 3})
    other = spec_shares("0.70 shuffled['offset', (-1, 'self')] + 0.30 same_token")
    assert other == pytest.approx({"other": 0.7, "duplicate_token": 0.3})
    with pytest.raises(ValueError, match="not a bank head"):
        spec_shares("offset")


def test_detectors_refuse_a_file_of_other_roles():
    data = own_feature_detectors().to_dict()
    assert np.allclose(Detectors.from_dict(data).coef, own_feature_detectors().coef)
    with pytest.raises(ValueError, match="other roles or features"):
        Detectors.from_dict({**data, "roles": data["roles"][:-1]})


def test_shipped_detectors_name_planted_blends_of_an_unseen_seed():
    """Blends of seed 2 (the detectors saw seed 0; seed 1 is the recorded held-out split)."""
    blends = build_blends(2, 150)
    figures = measure(blends, unexplained(default_classifier(), blends), default_detectors())
    assert figures["claims"] >= 30
    assert figures["precision"] >= 0.9 and figures["recall"] >= 0.8, figures
    assert figures["share_error"] < 0.1 and figures["calibration_error"] < 0.05, figures


def test_shipped_mixture_file_records_its_held_out_figures():
    content = json.loads((reference_dir() / MIXTURE_FILE).read_text())
    assert content["version"] == REFERENCE_VERSION
    for split in ("blends", "bank"):
        held = content["held_out"][split]
        assert held["precision"] >= 0.95 and held["recall"] >= 0.9, (split, held)


@pytest.mark.slow
def test_refitting_reproduces_the_shipped_detectors(tmp_path):
    content = refit_mixture(tmp_path)
    shipped = json.loads((reference_dir() / MIXTURE_FILE).read_text())
    # the solver's last digits may follow the machine's BLAS; the figures may not move
    for split, figures in shipped["held_out"].items():
        for name in ("precision", "recall", "share_error", "calibration_error"):
            assert content["held_out"][split][name] == pytest.approx(figures[name], abs=0.01)
    for name in ("coef", "intercept", "share_coef", "mean", "scale"):
        assert np.allclose(content["detectors"][name], shipped["detectors"][name], atol=1e-3)

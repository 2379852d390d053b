"""Half precision against float32 on the CPU (the same code paths a GPU takes): the attention-mass
features agree within FEATURE_TOL, the effects within EFFECT_TOL of the largest effect. The
syntactic features are argmax accuracies over a few arcs, so one flipped argmax moves them by a
whole arc's share: they are compared in the packaged-model check (benchmarks/gpu_check.py), not here."""

from __future__ import annotations

import pytest
from tiny_models import save_tiny_llama

from interp import AblateConfig, CollectConfig, ModelSpec, load_model
from interp.ablate.stage import ablate
from interp.collect.features import STATIC_FEATURES
from interp.collect.stage import collect

FEATURE_TOL = 1e-3  # measured on this model: 2.8e-5 (bfloat16), 5.1e-6 (float16)
EFFECT_TOL = 0.05  # of the largest |effect|; measured: 2.0% (bfloat16), 0.4% (float16)
KEYS = ["layer", "head", "ablation", "metric", "estimator"]


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    path = save_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))
    found = {}
    for dtype in ("float32", "bfloat16", "float16"):
        model = load_model(ModelSpec(name=str(path), dtype=dtype))
        features = collect(
            model, CollectConfig(n_syntax=20, n_repeated=8, max_sentences=40), progress=False
        ).features
        effects = ablate(
            model,
            AblateConfig(n_prose=4, n_repeated=4, n_syntax=8, prune=False, threads=1, max_rounds=1),
            progress=False,
        ).effects
        found[dtype] = features, effects
    return found


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_features_agree_with_float32(tables, dtype):
    reference, half = tables["float32"][0], tables[dtype][0]
    joined = reference.merge(half, on=["layer", "head", "feature"], suffixes=("", "_half"))
    joined = joined[joined["feature"].isin(STATIC_FEATURES)]
    assert len(joined) == len(reference[reference["feature"].isin(STATIC_FEATURES)]) > 0
    assert (joined["value"] - joined["value_half"]).abs().max() <= FEATURE_TOL


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_effects_agree_with_float32(tables, dtype):
    reference, half = tables["float32"][1], tables[dtype][1]
    joined = reference.merge(half, on=KEYS, suffixes=("", "_half"))
    assert len(joined) == len(reference) > 0
    scale = joined["delta"].abs().max()
    assert (joined["delta"] - joined["delta_half"]).abs().max() <= EFFECT_TOL * scale

"""The weights stage on every family a user may bring (the families test's tiny random models):
it runs, a head whose slice of the output projection is zero writes exactly nothing and composes
with no one, and the scores a family cannot have are NaN with a reason."""

from __future__ import annotations

import numpy as np
import pytest

from interp.model.load import load_model
from interp.model.tiny import build_tiny
from interp.weights.config import WeightsConfig
from interp.weights.stage import weights

FAMILIES = {  # family -> key-value heads (None: one per query head), as tests/e2e/test_families.py
    "llama": 2,
    "qwen2": 2,
    "qwen3": 2,
    "mistral": 1,
    "gemma": 1,
    "gemma3_text": 2,
    "olmo": None,
    "gpt2": None,
    "gpt_neox": None,
    "phi": None,
    "bert": None,
}
SMALL = WeightsConfig(n_tokens=128, n_null=10, n_bootstrap=10, n_prose=3, n_repeated=3)
SILENT = (1, 2)


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_silent_head_writes_nothing_in_every_family(family, tmp_path):
    path = build_tiny(family, tmp_path / family, n_kv_heads=FAMILIES[family], silent=(SILENT,))
    result = weights(load_model(str(path)), SMALL, progress=False)
    table = result.weights.set_index(["layer", "head", "score"])
    assert table.loc[(*SILENT, "output_size"), "value"] == 0.0
    size = result.weights[result.weights["score"] == "output_size"]
    assert (size.drop(size.index[(size["layer"] == 1) & (size["head"] == 2)])["value"] > 0).all()
    comp = result.composition
    assert np.isfinite(comp["value"]).all()
    assert len(comp) == 3 * 4 * 4  # 2 layers x 4 heads: layer 1 reads layer 0
    if family == "bert":
        assert set(result.unscored) == {"copying", "copy_rate", "suppression_rate", "successor"}
    else:
        assert result.unscored == {}  # the word-level vocabulary spells numbers, days, letters
        assert table.loc[(*SILENT, "copying"), "value"] == 0.0
        scored = result.weights[result.weights["score"] != "output_size"]
        assert np.isfinite(scored["value"]).all()

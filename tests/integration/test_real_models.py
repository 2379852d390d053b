"""The packaged real models: numerics against plain transformers, and the textbook heads they are known to have."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from interp import CollectConfig
from interp.collect.stage import collect
from interp.model.load import PACKAGED, packaged_path

pytestmark = pytest.mark.slow


def test_smollm2_bridge_logits_equal_transformers_from_the_gguf(smollm2):
    from transformers import AutoModelForCausalLM

    path = packaged_path(PACKAGED["smollm2-135m"])
    hf = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    ids = smollm2.tokenizer(
        "The cat sat on the mat because it was warm.", return_tensors="pt"
    ).input_ids
    ids = torch.cat([torch.tensor([[smollm2.bos_token_id]]), ids], 1)
    with torch.inference_mode():
        assert torch.equal(smollm2.bridge(ids), hf(ids).logits)
    assert (smollm2.n_layers, smollm2.n_heads, smollm2.n_kv_heads, smollm2.causal) == (
        30,
        9,
        3,
        True,
    )


def test_minilm_hidden_states_equal_bertmodel(minilm):
    from transformers import BertModel

    ref = BertModel.from_pretrained(
        packaged_path(PACKAGED["minilm-l6"]), attn_implementation="eager"
    ).eval()
    enc = minilm.tokenizer(["A man is playing a guitar.", "Hi"], return_tensors="pt", padding=True)
    with torch.inference_mode():
        _, cache = minilm.bridge.run_with_cache(
            enc.input_ids,
            attention_mask=enc.attention_mask,
            names_filter=lambda n: n == "blocks.5.hook_resid_post",
        )
        expected = ref(**enc).last_hidden_state
    assert torch.allclose(cache["blocks.5.hook_resid_post"], expected, atol=1e-5)
    assert (minilm.n_layers, minilm.n_heads, minilm.causal) == (6, 12, False)


def score(features, feature, layer, head):
    row = features[
        (features.feature == feature) & (features.layer == layer) & (features["head"] == head)
    ]
    return float(row.value.iloc[0])


def test_smollm2_textbook_heads(smollm2):
    cfg = CollectConfig(suites=("repeated",), n_repeated=48, n_bootstrap=50)
    features = collect(smollm2, cfg, suites=[], progress=False).features
    assert score(features, "induction", 18, 6) >= 0.6
    assert score(features, "induction", 17, 3) >= 0.6
    assert score(features, "previous_token", 16, 0) >= 0.7
    assert score(features, "previous_token", 11, 1) >= 0.7


def test_minilm_features_are_complete(minilm):
    cfg = CollectConfig(n_repeated=16, n_syntax=200, max_sentences=60, n_bootstrap=50)
    result = collect(minilm, cfg, progress=False)
    f = result.features
    assert len(f) == 6 * 12 * len(result.names)
    named = f[
        f.feature.isin(
            ["previous_token", "next_token", "first_token", "delimiter", "induction", "broad"]
        )
    ]
    assert named[["value", "baseline", "ci_low", "ci_high"]].notna().all().all()
    assert (named.n > 0).all()
    assert (named.ci_low <= named.value + 1e-9).all() and (
        named.value <= named.ci_high + 1e-9
    ).all()
    assert any(name.startswith("syntactic:nsubj") for name in result.names)
    assert result.replicates.shape == (50, 6, len(result.names), 12)
    assert np.isfinite(result.replicates[:, :, result.names.index("first_token")]).all()

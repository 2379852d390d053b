"""Every family a user may bring, from a Hugging Face directory whose config names no
architecture (as transformers writes a GGUF's), through collect -> weights -> classify -> ablate;
in every family a head whose slice of the output projection is zero comes out ``inactive``.

The models are random-init and tiny (2 layers, d_model 32, :mod:`interp.model.tiny`): the test is
about loading and shapes (grouped-query and multi-query attention, encoders, families the
bridge only knows by their auto class), not about which roles random weights have.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from interp import AblateConfig, CollectConfig
from interp.ablate.stage import ablate
from interp.classify.evidence import Evidence
from interp.classify.stage import classify
from interp.cli import main
from interp.collect.stage import collect
from interp.errors import ModelError
from interp.model.load import load_model
from interp.model.tiny import N_HEADS, N_LAYERS, build_tiny
from interp.weights.config import WeightsConfig
from interp.weights.stage import weights

# family -> key-value heads (None: the family has one per query head)
FAMILIES = {
    "llama": 2,  # grouped-query: 4 query heads share 2 KV heads
    "qwen2": 2,
    "qwen3": 2,
    "mistral": 1,  # multi-query: one KV head for all 4 query heads
    "gemma": 1,
    "gemma2": 2,  # norms after attention and MLP as well as before
    "gemma3_text": 2,  # TransformerLens' model-type table lacks it: derived from transformers' auto class
    "olmo": None,
    "gpt2": None,
    "gpt_neox": None,
    "phi": None,
    "phi3": 2,  # one fused query-key-value projection, grouped-query
    "bert": None,  # an encoder
}
SILENT = (1, 2)  # its slice of o_proj is zero
WEIGHTS = WeightsConfig(n_tokens=256, n_null=20, n_bootstrap=10, n_prose=4, n_repeated=4)
COLLECT = CollectConfig(
    n_repeated=4, repeated_lengths=(6,), n_syntax=10, max_sentences=10, n_bootstrap=10
)
ABLATE = AblateConfig(
    n_prose=3, n_repeated=3, repeated_lengths=(6,), n_syntax=8, n_bootstrap=10, threads=1
)


@pytest.fixture
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(
        1
    )  # tiny ops on a shared 2-core box: OpenMP stalls cost more than they give
    yield
    torch.set_num_threads(old)


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_family_without_architectures_runs_every_stage(family, tmp_path):
    path = build_tiny(
        family,
        tmp_path / family,
        n_kv_heads=FAMILIES[family],
        architectures=False,
        silent=(SILENT,),
    )
    assert "architectures" not in json.loads((path / "config.json").read_text())
    model = load_model(str(path))
    assert (model.n_layers, model.n_heads) == (N_LAYERS, N_HEADS)
    assert model.n_kv_heads == (FAMILIES[family] or N_HEADS)
    assert model.causal is (family != "bert")
    assert model.spec.name == str(path.resolve()) and model.source == "hf-dir"

    features = collect(model, COLLECT, progress=False)
    heads = {(layer, head) for layer in range(N_LAYERS) for head in range(N_HEADS)}
    assert set(zip(features.features["layer"], features.features["head"])) == heads
    evidence = weights(model, WEIGHTS, progress=False)
    roles = classify(
        features.features,
        features.replicates,
        features.names,
        evidence=Evidence(evidence.weights, evidence.composition),
    ).roles.set_index(["layer", "head"])
    assert len(roles) == len(heads) and roles["role"].notna().all()
    # the head whose slice of the output projection is zero writes nothing, wherever it looks
    assert roles.loc[SILENT, "role"] == "inactive" and roles.loc[SILENT, "output_size"] == 0.0
    assert roles.loc[SILENT, "evidence"] == "output" and pd.notna(roles.loc[SILENT, "looks"])
    assert (roles.drop(index=[SILENT])["role"] != "inactive").all()
    result = ablate(model, ABLATE, progress=False)
    exact = result.effects[result.effects["estimator"] == "exact"]
    assert len(exact) == len(heads) * len(result.summary["metrics"])
    assert np.isfinite(exact["baseline"]).all() and np.isfinite(exact["ablated"]).all()
    # the directory is the user's: the derived architecture is never written back into it
    assert "architectures" not in json.loads((path / "config.json").read_text())


def test_models_families_lists_what_the_bridge_wraps_and_what_loads_from_gguf():
    result = CliRunner().invoke(main, ["models", "--families"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line.split()[1:] for line in result.output.splitlines()[1:]}
    assert set(FAMILIES) <= set(rows)
    assert rows["llama"] == ["LlamaForCausalLM", "yes"] and rows["gemma3_text"] == [
        "Gemma3ForCausalLM",
        "yes",
    ]
    assert rows["gpt_neox"][-1] == "no"  # transformers reads no GPT-NeoX GGUF


def test_a_family_the_bridge_cannot_wrap_is_refused_in_one_line(tmp_path):
    path = build_tiny(
        "biogpt", tmp_path / "biogpt", architectures=False
    )  # transformers builds it; the bridge has no adapter
    with pytest.raises(ModelError) as caught:
        load_model(str(path))
    message = str(caught.value)
    assert "\n" not in message and len(message) < 300
    assert str(path) in message and "'biogpt'" in message and "interp models --families" in message

"""Complete weights or a clear error (interp.model.weights), for each model source that reads files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file
from tiny_models import save_tiny_llama

from interp.errors import ModelError
from interp.model.weights import check_complete, summarize

ROOT = Path(__file__).resolve().parents[2]


def info(missing=(), unexpected=(), mismatched=()):
    return {
        "missing_keys": set(missing),
        "unexpected_keys": set(unexpected),
        "mismatched_keys": set(mismatched),
    }


def test_missing_layers_are_named_in_one_line():
    keys = [
        f"model.layers.{i}.self_attn.{p}.weight" for i in (3, 4, 5) for p in ("q_proj", "k_proj")
    ]
    with pytest.raises(ModelError) as err:
        check_complete(info(missing=keys), "m.safetensors", encoder=False)
    assert str(err.value) == (
        "m.safetensors lacks 6 weights the model needs (model.layers.{3,4,5}.* (6 weights)): they "
        "would be random; the file is incomplete: export it again"
    )


def test_an_encoders_unused_head_may_be_missing_but_a_causal_models_may_not():
    head = ["cls.predictions.bias", "cls.predictions.transform.dense.weight"]
    check_complete(info(missing=head, unexpected=["pooler.dense.weight"]), "bert", encoder=True)
    with pytest.raises(ModelError, match="lacks 2 weights"):
        check_complete(info(missing=head), "gpt", encoder=False)


def test_unexpected_and_misshapen_weights_are_errors():
    with pytest.raises(
        ModelError, match=r"holds 1 weight the model does not use \(lm_head.extra\)"
    ):
        check_complete(info(unexpected=["lm_head.extra"]), "m", encoder=False)
    with pytest.raises(
        ModelError, match=r"model.norm.weight: \(7,\) in the file, \(32,\) in the model"
    ):
        check_complete(info(mismatched=[("model.norm.weight", (7,), (32,))]), "m", encoder=False)


def test_summarize_groups_layers_and_counts_the_rest():
    keys = [f"blocks.{i}.w" for i in range(4)] + ["a", "b", "c"]
    assert summarize(keys) == "a, b, blocks.{0,1,2,3}.* (4 weights), and 1 more"


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return save_tiny_llama(tmp_path_factory.mktemp("tiny") / "tiny-llama")


def test_a_hub_model_from_the_local_cache_is_checked_too(tmp_path, llama_dir):
    """The Hub source (through the Hugging Face cache, offline): a cached model missing two layers."""
    snapshot = tmp_path / "hub" / "models--test-org--tiny" / "snapshots" / "abc123"
    shutil.copytree(llama_dir, snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("abc123")
    tensors = load_file(snapshot / "model.safetensors")
    save_file(
        {k: v for k, v in tensors.items() if ".layers.2." not in k}, snapshot / "model.safetensors"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "HF_HUB_OFFLINE": "1",
    }
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "interp",
            "run",
            "--model",
            "test-org/tiny",
            "--out",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip() == (
        "error: test-org/tiny lacks 9 weights the model needs (model.layers.{2}.* (9 weights)): "
        "they would be random; the file is incomplete: export it again"
    )
    assert not (tmp_path / "runs").exists()


def test_the_packaged_encoder_loads_complete_but_for_its_unused_head():
    from interp.model.load import load_model

    model = load_model("minilm-l6")  # its MLM head is absent from the file: allowed, never read
    assert model.n_layers == 6 and not model.causal

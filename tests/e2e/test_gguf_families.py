"""GGUF files of families the packaged models do not cover, from a fresh cache.

transformers builds a GGUF's config without ``architectures`` (a Gemma 3 file reads as
``gemma3_text``, which TransformerLens' model-type table lacks): interp derives it, writes it
into the cached copy, and every later load (from that cache) works too. A file of a family
transformers cannot read from GGUF is refused in one line naming the file, the family and
what to do. The files are written here with the gguf package (:func:`interp.model.tiny.write_tiny_gguf`).
"""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner
from transformers.convert_slow_tokenizer import bytes_to_unicode

from interp.cli import main
from interp.errors import ModelError
from interp.model.load import load_model
from interp.model.tiny import N_HEADS, N_LAYERS, write_tiny_gguf

BYTES = list(
    bytes_to_unicode()
)  # the byte each of the file's 256 byte tokens stands for, in file order


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_CACHE", str(tmp_path / "cache"))
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield tmp_path / "cache"
    torch.set_num_threads(old)


@pytest.mark.parametrize(
    "family, n_kv_heads, model_type", [("gemma3", 1, "gemma3_text"), ("llama", 2, "llama")]
)
def test_a_gguf_loads_then_loads_again_from_its_cache(
    tmp_path, fresh_cache, family, n_kv_heads, model_type
):
    path = write_tiny_gguf(tmp_path / f"tiny-{family}.gguf", family, n_kv_heads=n_kv_heads)
    for _ in range(2):  # read and cached, then from the cache
        model = load_model(str(path))
        assert (model.source, model.causal, model.bos_policy) == ("gguf", True, "tokenizer")
        assert (model.n_layers, model.n_heads, model.n_kv_heads, model.d_vocab) == (
            N_LAYERS,
            N_HEADS,
            n_kv_heads,
            259,
        )
        assert model.tokenizer("ab").input_ids == [1] + [
            3 + BYTES.index(b) for b in b"ab"
        ]  # <bos>, a byte each
    [cached] = (fresh_cache / "gguf").iterdir()
    config = json.loads((cached / "config.json").read_text())
    assert config["model_type"] == model_type and config["architectures"] == [
        lens_architecture(model_type)
    ]


def lens_architecture(model_type: str) -> str:
    return {"gemma3_text": "Gemma3ForCausalLM", "llama": "LlamaForCausalLM"}[model_type]


def test_interp_run_on_a_gemma3_gguf(tmp_path):
    path = write_tiny_gguf(tmp_path / "tiny-gemma3.gguf", "gemma3", n_kv_heads=1)
    out = tmp_path / "runs"
    result = CliRunner().invoke(
        main,
        [
            "run",
            "--model",
            str(path),
            "--out",
            str(out),
            "--name",
            "g",
            "--quick",
            "--skip",
            "report",
            "-q",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "tiny-gemma3.gguf" / "g" / "manifest.json").read_text())
    assert manifest["model"]["source"] == "gguf" and manifest["model"]["spec"]["name"] == str(
        path.resolve()
    )
    assert set(manifest["stages"]) == {"collect", "weights", "classify", "ablate"}


def test_a_family_transformers_cannot_read_from_gguf_is_refused_in_one_line(tmp_path):
    path = write_tiny_gguf(tmp_path / "tiny-neox.gguf", "gptneox")
    with pytest.raises(ModelError) as caught:
        load_model(str(path))
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and "'gptneox' family" in message
    assert "load the model's Hugging Face checkpoint" in message
    result = CliRunner().invoke(
        main, ["run", "--model", str(path), "--out", str(tmp_path / "runs"), "-q"]
    )
    assert result.exit_code != 0 and result.output.strip().splitlines() == [f"error: {message}"]

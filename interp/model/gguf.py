"""GGUF files: read once by transformers (dequantized), then cached as safetensors.

Reading and dequantizing a GGUF takes most of a minute on a small CPU; the cached copy under
:func:`cache_root` loads in seconds and holds exactly the same fp32 weights. Its config.json
names the architecture (transformers builds a GGUF's config without one: see
:mod:`interp.model.families`), and a copy cached without one is repaired when it loads.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from interp.model import families
from interp.errors import ModelError
from interp.model.loading import boot, first_line, quiet
from interp.model.weights import load_checked


def cache_root() -> Path:
    """Where dequantized GGUF models are kept between runs (``$INTERP_CACHE`` or ~/.cache/interp)."""
    return Path(os.environ.get("INTERP_CACHE", Path.home() / ".cache" / "interp"))


def cache_dir(path: Path) -> Path:
    stat = path.stat()
    return cache_root() / "gguf" / f"{path.stem}-{stat.st_size}-{int(stat.st_mtime)}"


def load_gguf(path: Path, device: str, dtype: torch.dtype) -> tuple[Any, Any]:
    """The bridge and tokenizer of a GGUF file: from the cache, else read (family checked
    first) and cached."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    fail = lambda why: ModelError(f"cannot load GGUF file {path}: {why}")  # noqa: E731
    cached = cache_dir(path)
    if (cached / "config.json").exists():
        with quiet():
            tok = AutoTokenizer.from_pretrained(cached)
            hf = load_checked(AutoModelForCausalLM, cached, path, False, dtype=dtype, attn_implementation="eager")
        if families.name_architecture(hf.config, path) and not _cached_architecture(cached):
            _repair(hf, cached)
        return boot(str(cached), device, dtype, hf, tok, fail), tok
    families.check_gguf(path)
    try:
        with quiet():
            tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    except Exception as exc:  # transformers raises many types for a bad file
        raise ModelError(f"cannot read GGUF file {path}: {first_line(exc)} (is the file complete and a supported architecture?)") from None
    with quiet():
        hf = load_checked(AutoModelForCausalLM, path.parent, path, False, gguf_file=path.name, dtype=torch.float32,
                          attn_implementation="eager")
    families.name_architecture(hf.config, path)
    _save_cache(hf, tok, cached)
    return boot(str(path.parent), device, dtype, hf.to(dtype), tok, fail), tok


def _cached_architecture(cached: Path) -> bool:
    try:
        return bool(json.loads((cached / "config.json").read_text(encoding="utf-8")).get("architectures"))
    except (OSError, ValueError):
        return False


def _repair(hf: Any, cached: Path) -> None:
    """Give a copy cached by an older interp (no architecture) its architecture; where the cache
    is read-only it stays as it is, and the architecture is derived again on every load."""
    try:
        _save_config(hf, cached)
    except OSError:
        pass


def _save_config(hf: Any, target: Path) -> None:
    """config.json of the cached copy, written whole (temp file + rename), plain fp32 weights."""
    config = hf.config.to_dict()
    config.pop("quantization_config", None)  # the cached copy holds plain fp32 weights
    tmp = target / "config.json.tmp"
    tmp.write_text(json.dumps(config), encoding="utf-8")
    os.replace(tmp, target / "config.json")


def _save_cache(hf: Any, tok: Any, target: Path) -> None:
    """Write the dequantized model beside the others, atomically; a failure only costs speed."""
    import shutil
    import tempfile

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
        from safetensors.torch import save_model

        _save_config(hf, tmp)
        save_model(hf, str(tmp / "model.safetensors"))  # handles the tied embedding / unembedding
        _save_tokenizer(tok, tmp)
        os.replace(tmp, target)
    except (OSError, ValueError, RuntimeError):
        shutil.rmtree(tmp, ignore_errors=True) if "tmp" in locals() else None


def _save_tokenizer(tok: Any, target: Path) -> None:
    """Save the tokenizer so that it reads back encoding exactly as it does now.

    A tokenizer class may rebuild its pipeline from the saved vocabulary instead of taking the
    saved one (transformers' GemmaTokenizer does, for a GGUF whose vocabulary is byte-level
    BPE, and then fails on every word); the generic fast tokenizer takes tokenizer.json as
    written. ValueError when neither reads back the same.
    """
    with quiet():
        tok.save_pretrained(target)
    if _same_encoding(tok, target):
        return
    config_file = target / "tokenizer_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_file.write_text(json.dumps(config, indent=2), encoding="utf-8")
    if not _same_encoding(tok, target):
        raise ValueError("the tokenizer does not read back as it was saved")


def _same_encoding(tok: Any, saved: Path) -> bool:
    from transformers import AutoTokenizer

    from interp.probes.prose import prose_suite

    texts = [s.text for s in prose_suite(40).sentences] + ["Ünïcode — 3.14 {x: [1, 2]}\ttabs  and  spaces"]
    try:
        with quiet():
            back = AutoTokenizer.from_pretrained(saved)
        return all(back(t).input_ids == tok(t).input_ids for t in texts)
    except Exception:  # noqa: BLE001  (a tokenizer that fails to read back or to encode is not the same)
        return False

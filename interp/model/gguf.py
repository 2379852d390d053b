"""GGUF files: read once by transformers (dequantized), then cached as safetensors.

Reading and dequantizing a GGUF takes most of a minute on a small CPU; the cached copy under
:func:`interp.model.cache.cache_root` loads in seconds and holds exactly the same fp32 weights. Its config.json
names the architecture (transformers builds a GGUF's config without one: see
:mod:`interp.model.families`), and a copy cached without one is repaired when it loads.

The cache is keyed on content: the copy's folder is named by the sha256 of the GGUF file
(hashed once per process, about 1 GB/s), and ``source.json`` beside the copy records that hash,
which must match before the copy is used. Another file under the same name, size and time
therefore never loads as the model that was cached.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch

from interp.errors import ModelError, first_line
from interp.model import families
from interp.model.cache import cache_root
from interp.model.loading import boot, quiet
from interp.model.weights import load_checked

SOURCE = "source.json"  # beside a cached copy: the GGUF file's name, size and sha256


def cache_dir(path: Path) -> Path:
    """The folder of the cached copy of a GGUF file: its name and the start of its content hash."""
    return cache_root() / "gguf" / f"{path.stem}-{content_hash(path)[:16]}"


def content_hash(path: Path) -> str:
    """sha256 of the file's bytes, computed once per process for a file unchanged on disk (its
    change time is part of the key: a rewrite cannot put it back, as it can the modification time)."""
    st = path.stat()
    return _sha256(str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


@functools.lru_cache(maxsize=16)
def _sha256(path: str, size: int, mtime_ns: int, ctime_ns: int, inode: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def is_cached(path: Path) -> bool:
    """Whether a cached copy of this very file (same content hash) is ready."""
    cached = cache_dir(path)
    try:
        source = json.loads((cached / SOURCE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(source, dict)
        and source.get("sha256") == content_hash(path)
        and (cached / "config.json").exists()
    )


def load_gguf(path: Path, device: str, dtype: torch.dtype) -> tuple[Any, Any]:
    """The bridge and tokenizer of a GGUF file: from the cache, else read (family checked
    first) and cached."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    fail = lambda why: ModelError(f"cannot load GGUF file {path}: {why}")  # noqa: E731
    cached = cache_dir(path)
    if is_cached(path):
        with quiet():
            tok = AutoTokenizer.from_pretrained(cached)
            hf = load_checked(
                AutoModelForCausalLM, cached, path, False, dtype=dtype, attn_implementation="eager"
            )
        if families.name_architecture(hf.config, path) and not _cached_architecture(cached):
            _repair(hf, cached)
        return boot(str(cached), device, dtype, hf, tok, fail), tok
    families.check_gguf(path)
    try:
        with quiet():
            tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    except Exception as exc:  # transformers raises many types for a bad file
        raise ModelError(
            f"cannot read GGUF file {path}: {first_line(exc)} (is the file complete and a supported architecture?)"
        ) from None
    with quiet():
        hf = load_checked(
            AutoModelForCausalLM,
            path.parent,
            path,
            False,
            gguf_file=path.name,
            dtype=torch.float32,
            attn_implementation="eager",
        )
    families.name_architecture(hf.config, path)
    _save_cache(hf, tok, cached, path)
    return boot(str(path.parent), device, dtype, hf.to(dtype), tok, fail), tok


def _cached_architecture(cached: Path) -> bool:
    try:
        return bool(
            json.loads((cached / "config.json").read_text(encoding="utf-8")).get("architectures")
        )
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


def _save_cache(hf: Any, tok: Any, target: Path, source: Path) -> None:
    """Write the dequantized model beside the others, atomically, with the hash of the file it
    came from (``source.json``); a failure only costs speed. A folder of that name left by a
    copy that did not verify is replaced."""
    import shutil
    import tempfile

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
        from safetensors.torch import save_model

        _save_config(hf, tmp)
        save_model(hf, str(tmp / "model.safetensors"))  # handles the tied embedding / unembedding
        _save_tokenizer(tok, tmp)
        st = source.stat()
        (tmp / SOURCE).write_text(
            json.dumps({"file": source.name, "size": st.st_size, "sha256": content_hash(source)}),
            encoding="utf-8",
        )
        if target.exists():
            shutil.rmtree(target)
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

    texts = [s.text for s in prose_suite(40).sentences] + [
        "Ünïcode — 3.14 {x: [1, 2]}\ttabs  and  spaces"
    ]
    try:
        with quiet():
            back = AutoTokenizer.from_pretrained(saved)
        return all(back(t).input_ids == tok(t).input_ids for t in texts)
    except Exception:  # noqa: BLE001  (a tokenizer that fails to read back or to encode is not the same)
        return False

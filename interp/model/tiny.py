"""Tiny random-init models of any family, saved as Hugging Face model directories.

A model directory of a family (``llama``, ``qwen2``, ``gpt2``, ``bert``, ...) with two layers
of 32 dimensions loads in a fraction of a second and runs every stage in seconds: a way to
check that a family works with the installed TransformerLens and transformers before fetching
a real checkpoint, and the models of the families test. The weights are random, so the roles
found mean nothing; the shapes, the tokenizer contract and the loading path are the real ones.

The tokenizer is word-level over the words of the shipped probe corpora (about 2,000 words):
a fast tokenizer (character offsets for the syntax features), with a BOS for causal models and
``[CLS] ... [SEP]`` for encoders, and ``[UNK]`` for any other word.

:func:`write_tiny_gguf` writes the same kind of model as a GGUF file, in llama.cpp's tensor
names, with a byte-level vocabulary (256 byte tokens, no merges): the GGUF source, end to end.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch

from interp.model import lens

D_MODEL, N_HEADS, N_LAYERS = 32, 4, 2


def word_tokenizer(encoder: bool = False, extra_words: tuple[str, ...] = ()) -> Any:
    """A word-level ``PreTrainedTokenizerFast`` over the probe corpora's words (and ``extra_words``)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    from interp.probes.grammar import syntax_suite
    from interp.probes.prose import prose_suite

    words: set[str] = set(extra_words)
    for s in list(prose_suite().sentences) + list(syntax_suite(300, 0).sentences):
        words.update(re.findall(r"\w+|[^\w\s]", s.text))
    specials = (
        ["[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]"] if encoder else ["[UNK]", "[PAD]", "[BOS]"]
    )
    vocab = {w: i for i, w in enumerate(specials + sorted(words - set(specials)))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if encoder:
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
        )
        return PreTrainedTokenizerFast(
            tokenizer_object=tok,
            unk_token="[UNK]",
            pad_token="[PAD]",
            cls_token="[CLS]",
            sep_token="[SEP]",
            mask_token="[MASK]",
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", bos_token="[BOS]"
    )


def tiny_config(
    family: str,
    vocab_size: int,
    n_layers: int = N_LAYERS,
    d_model: int = D_MODEL,
    n_heads: int = N_HEADS,
    n_kv_heads: int | None = None,
    n_ctx: int = 128,
) -> Any:
    """A transformers config of ``family`` (its ``model_type``) at this size; ``n_kv_heads``
    (grouped-query attention, 1: multi-query) only where the family has key-value heads."""
    from transformers import AutoConfig

    if d_model % n_heads:
        raise ValueError(f"d_model {d_model} is not a multiple of n_heads {n_heads}")
    config = AutoConfig.for_model(
        family,
        vocab_size=vocab_size,
        hidden_size=d_model,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        intermediate_size=2 * d_model,
        max_position_embeddings=n_ctx,
    )
    if hasattr(
        config, "head_dim"
    ):  # families that default it to a fixed size (Gemma, Qwen3: 256, 128)
        config.head_dim = d_model // n_heads
    if n_kv_heads is not None:
        if not hasattr(config, "num_key_value_heads"):
            raise ValueError(
                f"the {family!r} family has no key-value heads to set (n_kv_heads={n_kv_heads})"
            )
        if n_heads % n_kv_heads:
            raise ValueError(f"n_heads {n_heads} is not a multiple of n_kv_heads {n_kv_heads}")
        config.num_key_value_heads = n_kv_heads
    elif hasattr(config, "num_key_value_heads"):
        config.num_key_value_heads = n_heads
    return config


def build_tiny(
    family: str,
    path: str | Path,
    n_kv_heads: int | None = None,
    n_layers: int = N_LAYERS,
    seed: int = 0,
    architectures: bool = True,
    silent: tuple[tuple[int, int], ...] = (),
) -> Path:
    """Save a random-init model of ``family`` with :func:`word_tokenizer` to the directory
    ``path`` (config.json, model.safetensors, tokenizer files) and return it.

    ``architectures=False`` leaves ``architectures`` out of config.json, as in a config
    transformers builds from a GGUF file: interp then derives it (:mod:`interp.model.families`).
    ``silent``: (layer, head) whose slice of the attention output projection is zero: heads that
    attend as usual and write nothing.
    """
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    encoder = family in lens.ENCODER_MODEL_TYPES
    tok = word_tokenizer(encoder)
    config = tiny_config(family, len(tok), n_layers=n_layers, n_kv_heads=n_kv_heads)
    config.pad_token_id = tok.pad_token_id
    config.bos_token_id = tok.cls_token_id if encoder else tok.bos_token_id
    torch.manual_seed(seed)
    hf = (AutoModelForMaskedLM if encoder else AutoModelForCausalLM).from_config(
        config, attn_implementation="eager"
    )
    for layer, head in silent:
        zero_output(hf, layer, head, config.hidden_size // config.num_attention_heads)
    path = Path(path)
    hf.save_pretrained(path)
    tok.save_pretrained(path)
    if not architectures:
        saved = json.loads((path / "config.json").read_text(encoding="utf-8"))
        saved.pop("architectures", None)
        (path / "config.json").write_text(json.dumps(saved, indent=2), encoding="utf-8")
    return path


# the attention output projection of a block, by family (GPT-2's Conv1D is [in, out])
_OUTPUT = re.compile(
    r"\.(\d+)\.(self_attn\.o_proj|attn\.c_proj|attention\.dense|self_attn\.dense|"
    r"attention\.output\.dense)\.weight$"
)


def zero_output(hf: Any, layer: int, head: int, d_head: int) -> None:
    """Zero the slice of layer ``layer``'s attention output projection that reads ``head``."""
    found = [
        (name, w)
        for name, w in hf.named_parameters()
        if (m := _OUTPUT.search(name)) and int(m[1]) == layer
    ]
    if len(found) != 1:
        raise ValueError(f"no single attention output projection in layer {layer}: {found}")
    name, weight = found[0]
    cut = slice(head * d_head, (head + 1) * d_head)
    with torch.no_grad():
        if name.endswith("attn.c_proj.weight"):
            weight[cut] = 0.0
        else:
            weight[:, cut] = 0.0


# llama.cpp's names of the per-block tensors, by family: (name, shape) with d = d_model, q = query
# heads x d_head, kv = key-value heads x d_head, f = feed-forward width, h = d_head.
_GGUF_BLOCK = {
    "llama": (
        "attn_norm:d",
        "attn_q:q,d",
        "attn_k:kv,d",
        "attn_v:kv,d",
        "attn_output:d,q",
        "ffn_norm:d",
        "ffn_gate:f,d",
        "ffn_up:f,d",
        "ffn_down:d,f",
    ),
    "gemma3": (
        "attn_norm:d",
        "attn_q:q,d",
        "attn_k:kv,d",
        "attn_v:kv,d",
        "attn_output:d,q",
        "attn_q_norm:h",
        "attn_k_norm:h",
        "post_attention_norm:d",
        "ffn_norm:d",
        "ffn_gate:f,d",
        "ffn_up:f,d",
        "ffn_down:d,f",
        "post_ffw_norm:d",
    ),
}


def write_tiny_gguf(
    path: str | Path,
    family: str = "llama",
    n_kv_heads: int = 2,
    n_layers: int = N_LAYERS,
    seed: int = 0,
) -> Path:
    """A random-init GGUF file of ``family`` (llama.cpp's name: ``llama`` or ``gemma3``), float32
    tensors, a byte-level vocabulary with <pad> <bos> <eos>; ``family`` may be any other name
    with no tensors at all, for a file transformers cannot read."""
    import gguf
    import numpy as np
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    rng = np.random.default_rng(seed)
    tokens = ["<pad>", "<bos>", "<eos>"] + list(bytes_to_unicode().values())
    d, h = D_MODEL, D_MODEL // N_HEADS
    sizes = {"d": d, "q": N_HEADS * h, "kv": n_kv_heads * h, "f": 2 * d, "h": h}
    writer = gguf.GGUFWriter(str(path), family)
    writer.add_context_length(128)
    writer.add_block_count(n_layers)
    writer.add_embedding_length(d)
    writer.add_feed_forward_length(2 * d)
    writer.add_head_count(N_HEADS)
    writer.add_head_count_kv(n_kv_heads)
    writer.add_key_length(h)
    writer.add_value_length(h)
    writer.add_rope_dimension_count(h)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_merges([])
    writer.add_token_scores([0.0] * len(tokens))
    writer.add_token_types(
        [gguf.TokenType.CONTROL] * 3 + [gguf.TokenType.NORMAL] * (len(tokens) - 3)
    )
    writer.add_pad_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)

    def tensor(name: str, shape: str) -> None:
        dims = tuple(sizes[s] for s in shape.split(","))
        values = (
            np.ones(dims) if len(dims) == 1 else rng.standard_normal(dims) * 0.05
        )  # norms 1, weights small
        writer.add_tensor(name, values.astype(np.float32))

    if family in _GGUF_BLOCK:
        writer.add_tensor(
            "token_embd.weight", (rng.standard_normal((len(tokens), d)) * 0.05).astype(np.float32)
        )
        tensor("output_norm.weight", "d")
        for layer in range(n_layers):
            for entry in _GGUF_BLOCK[family]:
                name, shape = entry.split(":")
                tensor(f"blk.{layer}.{name}.weight", shape)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(path)

"""Tiny randomly initialised models (Llama with grouped-query attention, GPT-2, BERT) over a
word-level tokenizer of the probe corpora: fast stand-ins for the ablation tests."""

from __future__ import annotations

import tempfile

import torch

N_LAYERS, N_HEADS, D_MODEL = 3, 4, 32
D_HEAD = D_MODEL // N_HEADS


def _word_tokenizer(encoder: bool = False):
    """A word-level fast tokenizer over the probe corpora's words (offsets work, vocab ~2k)."""
    from interp.model.tiny import word_tokenizer

    return word_tokenizer(encoder)


def _boot(hf, tok, name: str):
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import AutoTokenizer

    from interp.model.load import from_bridge

    with tempfile.TemporaryDirectory() as tmp:
        hf.config.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        tok = AutoTokenizer.from_pretrained(tmp)  # TransformerLens reloads it by path
        bridge = TransformerBridge.boot_transformers(tmp, hf_model=hf, tokenizer=tok)
    bridge.eval()
    return from_bridge(bridge, tok, name=name)


def tiny_llama_hf(seed: int = 0):
    """The Hugging Face model and tokenizer of :func:`tiny_llama` (to save as a model directory)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = _word_tokenizer()
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=D_MODEL,
        intermediate_size=64,
        num_hidden_layers=N_LAYERS,
        num_attention_heads=N_HEADS,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=tok.bos_token_id,
        pad_token_id=tok.pad_token_id,
        eos_token_id=None,
        attn_implementation="eager",
    )
    return LlamaForCausalLM(cfg).eval(), tok


def tiny_llama(seed: int = 0):
    """Grouped-query Llama: 4 query heads share 2 KV heads."""
    return _boot(*tiny_llama_hf(seed), "tiny-llama")


def save_tiny_llama(path, seed: int = 0):
    """:func:`tiny_llama` saved as a Hugging Face model directory (config, safetensors, tokenizer)."""
    hf, tok = tiny_llama_hf(seed)
    hf.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def tiny_gpt2(seed: int = 0):
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = _word_tokenizer()
    torch.manual_seed(seed)
    cfg = GPT2Config(
        vocab_size=len(tok),
        n_embd=D_MODEL,
        n_layer=N_LAYERS,
        n_head=N_HEADS,
        n_positions=128,
        bos_token_id=tok.bos_token_id,
        eos_token_id=None,
        attn_implementation="eager",
    )
    return _boot(GPT2LMHeadModel(cfg).eval(), tok, "tiny-gpt2")


def tiny_bert(seed: int = 0, n_layers: int = N_LAYERS):
    from transformers import BertConfig, BertForMaskedLM

    tok = _word_tokenizer(encoder=True)
    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=len(tok),
        hidden_size=D_MODEL,
        num_hidden_layers=n_layers,
        num_attention_heads=N_HEADS,
        intermediate_size=64,
        max_position_embeddings=128,
        pad_token_id=tok.pad_token_id,
        attn_implementation="eager",
    )
    return _boot(BertForMaskedLM(cfg).eval(), tok, "tiny-bert")


def tiny_native(
    n_layers: int = N_LAYERS,
    n_ctx: int = 128,
    d_vocab_out: int = -1,
    seed: int = 0,
    tokenizer=None,
    **config,
):
    """A TransformerLens-native model (``boot_native``: no Hugging Face model inside), rotary,
    4 query heads sharing 2 KV heads; its blocks return 1-tuples, not bare tensors.
    ``d_vocab_out``: fewer logits than token ids (-1: as many); ``config``: more native settings."""
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import AutoTokenizer

    from interp.model.load import from_bridge

    with tempfile.TemporaryDirectory() as tmp:  # TransformerLens reloads a tokenizer by its path
        (tokenizer or _word_tokenizer()).save_pretrained(tmp)
        tok = AutoTokenizer.from_pretrained(tmp)
        config = (
            dict(
                n_layers=n_layers,
                d_model=D_MODEL,
                n_heads=N_HEADS,
                d_head=D_HEAD,
                n_key_value_heads=2,
                n_ctx=n_ctx,
                d_vocab=len(tok),
                d_vocab_out=d_vocab_out,
                act_fn="gelu",
                normalization_type="LN",
                positional_embedding_type="rotary",
                seed=seed,
            )
            | config
        )
        bridge = TransformerBridge.boot_native(config, tokenizer=tok)
    bridge.eval()
    return from_bridge(bridge, tok, name="tiny-native")

"""The tokenizer contract: what interp needs from a model's tokenizer, checked when the model loads.

A tokenizer is a Hugging Face tokenizer (``PreTrainedTokenizer[Fast]``: the one TransformerLens
takes) that provides

- **ids**: ``tok(text).input_ids``, ``len(tok)``, ``convert_ids_to_tokens`` and
  ``all_special_ids``; every id the model sees must lie inside its embedding (``d_vocab``);
- **BOS** (causal models): a BOS id, prepended when the tokenizer does not add it itself, so
  that position 0 is the same token in every probe and first-token (sink) scores compare; a
  model without one is probed from its first text token, with a warning;
- **[CLS] ... [SEP]** (encoders): added by the tokenizer itself;
- **padding**: any id inside the embedding (padded positions are masked); when the tokenizer
  has none, or one outside the embedding, EOS, UNK or BOS stands in;
- **offsets** (only for the word-level features: the syntax suite and CoNLL-U corpora): a fast
  tokenizer's ``return_offsets_mapping``; a slow tokenizer's probes carry no words, and the
  suites that need them are skipped with a warning (:mod:`interp.probes.align`);
- **UNK** is optional: a probe the tokenizer cannot encode is left out, and a suite that cannot
  be expressed in the model's vocabulary is skipped, each with a warning.

:func:`check_tokenizer` checks the first four against the model at load time: a BOS, [CLS] or
[SEP] the tokenizer adds outside the embedding is an error (every probe would index past it); a
tokenizer whose own vocabulary is larger than the embedding warns; probes containing an id
beyond the embedding are left out (:mod:`interp.probes.align`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from interp.errors import InterpWarning, ModelError

NEEDED = ("convert_ids_to_tokens", "all_special_ids", "__len__", "__call__")


@dataclass(frozen=True)
class TokenizerFacts:
    bos_policy: str  # prepend (we add BOS) | tokenizer (it adds BOS) | cls ([CLS] ... [SEP]) | none
    bos_token_id: int | None
    pad_token_id: int


def check_tokenizer(tok: Any, d_vocab: int, causal: bool, where: str) -> TokenizerFacts:
    """The BOS policy and padding of ``tok`` for a model whose embedding takes ``d_vocab`` ids;
    ModelError (naming ``where``) where the tokenizer cannot serve this model."""
    missing = [name for name in NEEDED if not hasattr(tok, name)]
    if missing:
        raise ModelError(
            f"{where}: the tokenizer ({type(tok).__name__}) lacks {', '.join(missing)}: pass a Hugging Face "
            f"tokenizer (transformers.PreTrainedTokenizerFast) as tokenizer="
        )
    added = _added_by_tokenizer(tok)
    outside = [i for i in added if not 0 <= i < d_vocab]
    if outside:
        raise ModelError(
            f"{where}: the tokenizer adds token id {outside[0]} to every text, but the model's embedding "
            f"takes ids 0..{d_vocab - 1}: the tokenizer does not belong to this model"
        )
    policy = _bos_policy(tok, causal, added)
    bos = tok.bos_token_id
    if policy == "prepend" and not 0 <= bos < d_vocab:
        warnings.warn(
            f"{where}: the BOS id {bos} lies outside the model's {d_vocab}-id embedding: probes start "
            f"with their first text token (first-token scores then measure a word, not a fixed token)",
            InterpWarning,
            stacklevel=3,
        )
        policy, bos = "none", None
    _warn_ids_beyond(tok, d_vocab, where)
    return TokenizerFacts(policy, bos, _pad_id(tok, d_vocab))


def _added_by_tokenizer(tok: Any) -> list[int]:
    """The ids the tokenizer adds to any text by itself (BOS, or [CLS] and [SEP])."""
    try:
        return list(tok("").input_ids)
    except Exception:  # noqa: BLE001  (a tokenizer that refuses empty text adds nothing we can see)
        return []


def _bos_policy(tok: Any, causal: bool, added: list[int]) -> str:
    """How position 0 is filled, so that first-token scores always mean the same token."""
    if not causal:
        return "cls"
    if tok.bos_token_id is not None and added[:1] == [tok.bos_token_id]:
        return "tokenizer"
    return "prepend" if tok.bos_token_id is not None else "none"


def _pad_id(tok: Any, d_vocab: int) -> int:
    """The tokenizer's pad id, made one the embedding takes (padded positions are masked, so
    which token stands in does not matter, only that it indexes the embedding)."""
    if tok.pad_token_id is not None and 0 <= tok.pad_token_id < d_vocab:
        return tok.pad_token_id
    stand_in = next(
        (
            t
            for t in (tok.eos_token, tok.unk_token, tok.bos_token)
            if t is not None and 0 <= tok.convert_tokens_to_ids(t) < d_vocab
        ),
        None,
    )
    tok.pad_token = stand_in if stand_in is not None else tok.convert_ids_to_tokens(0)
    return tok.pad_token_id


def _warn_ids_beyond(tok: Any, d_vocab: int, where: str) -> None:
    """Warn when the tokenizer's own vocabulary outgrows the embedding. Tokens added on top of it
    (TransformerLens adds an EOS to a tokenizer without one; some tokenizer classes add their
    defaults) appear only where a text spells them out, and such a probe is left out anyway."""
    skip = set(getattr(tok, "get_added_vocab", dict)().values()) | set(tok.all_special_ids)
    beyond = [i for i in range(d_vocab, len(tok)) if i not in skip]
    if beyond:
        warnings.warn(
            f"{where}: the tokenizer has {len(tok)} ids but the model's embedding takes {d_vocab}: probes "
            f"that contain one of the {len(beyond)} ordinary ids beyond it are left out (does the tokenizer "
            f"belong to this model?)",
            InterpWarning,
            stacklevel=3,
        )


def ordinary_ids(tok: Any, d_vocab: int) -> list[int]:
    """Ids of ordinary (non-special) tokens the embedding takes: the pool of random-token probes."""
    special = set(tok.all_special_ids)
    return [i for i in range(min(len(tok), d_vocab)) if i not in special]

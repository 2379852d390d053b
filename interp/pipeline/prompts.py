"""The researcher's own prompts through a model: tokenized the way the probes are, one pass
with hooks, every stored head's attention pattern.

``interp show`` (:mod:`interp.pipeline.show`) calls :func:`prompt_patterns`; the patterns come
back as numpy arrays in an :class:`interp.report.prompt_store.PromptSet`, which the report reads
without torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from interp.errors import PromptError
from interp.model import lens
from interp.probes.align import Aligner, Unencodable
from interp.probes.base import NATURAL, Sentence, Suite
from interp.report.prompt_store import Head, Prompt, PromptSet

BATCH = 8  # prompts per forward pass


def encode_prompts(model: Any, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each prompt, with the special tokens the model's probes get (BOS, or
    ``[CLS] ... [SEP]``); :class:`PromptError` for an empty prompt, one the tokenizer cannot
    encode, or one longer than the model's context."""
    aligner = Aligner(model)
    suite = Suite("prompts", NATURAL)
    encoded = []
    for i, text in enumerate(texts, 1):
        if all(ch.isspace() or not ch.isprintable() for ch in text):  # blanks, NULs, controls
            raise PromptError(f"prompt {i} is empty: give some text")
        try:
            seq = aligner.encode(Sentence(text, source=f"prompt {i}"), suite)
        except Unencodable as exc:
            raise PromptError(f"prompt {i} cannot be encoded for this model: {exc}") from None
        if aligner.n_truncated:
            raise PromptError(
                f"prompt {i} is longer than the model's context of {model.n_ctx} tokens; shorten it"
            )
        encoded.append(seq.tokens.tolist())
    return encoded


def prompt_patterns(
    model: Any,
    texts: Sequence[str],
    heads: Callable[[list[int]], Sequence[Head]],
    progress: bool = True,
) -> PromptSet:
    """Run the prompts once (in batches of :data:`BATCH`, padded on the right) and keep the
    attention of the heads ``heads(lengths)`` names on each prompt's own tokens; ``progress``:
    a bar over the prompts."""
    ids = encode_prompts(model, texts)
    kept = tuple(heads([len(i) for i in ids]))
    labels = [tuple(model.tokenizer.decode([t]) for t in seq) for seq in ids]
    patterns = [np.zeros((len(kept), len(seq), len(seq)), dtype=np.float16) for seq in ids]
    by_layer: dict[int, list[tuple[int, int]]] = {}
    for slot, (layer, head) in enumerate(kept):
        by_layer.setdefault(layer, []).append((slot, head))
    pad = model.tokenizer.pad_token_id if model.tokenizer.pad_token_id is not None else 0
    bar = tqdm(total=len(ids), desc="show", unit="prompt", disable=not progress)
    for start in range(0, len(ids), BATCH):
        chunk = ids[start : start + BATCH]
        width = max(len(seq) for seq in chunk)
        tokens = torch.full((len(chunk), width), pad, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for row, seq in enumerate(chunk):
            tokens[row, : len(seq)] = torch.tensor(seq)
            mask[row, : len(seq)] = 1

        def keep(layer: int, pattern: torch.Tensor) -> None:  # pattern [batch, head, q, k]
            for slot, head in by_layer.get(layer, ()):
                for row, seq in enumerate(chunk):
                    n = len(seq)
                    patterns[start + row][slot] = pattern[row, head, :n, :n].float().cpu().numpy()

        lens.run_patterns(model, tokens, mask, keep)
        bar.update(len(chunk))
    bar.close()
    prompts = tuple(Prompt(text, label, kept, p) for text, label, p in zip(texts, labels, patterns))
    return PromptSet((model.n_layers, model.n_heads), prompts)

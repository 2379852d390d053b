"""Synthetic probe sequences for the reference bank, built without a tokenizer.

The bank's heads must be scored by the very feature code that scores real heads, on probes of
the same three kinds. Here every word is one token (token id = word id), so the grammar's
word-level arcs map 1:1 onto tokens and no alignment step can blur them:

- repeated random tokens ``[BOS] r r`` (``[CLS] r r [SEP]`` in an encoder), kind REPEATED;
- generated syntax sentences (interp.probes.grammar), kind SYNTAX, with their gold arcs;
- the shipped prose lines split into words and punctuation, kind NATURAL, punctuation
  flagged as delimiters (and [SEP], as the encoder aligner does).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

import torch

from interp.probes.base import NATURAL, REPEATED, SYNTAX, ProbeSequence
from interp.probes.frequent import mark_frequent
from interp.probes.grammar import generate_syntax

BOS, SEP, PAD = 0, 1, 2
FIRST_WORD_ID = 10
RANDOM_TOKENS = (20_000, 30_000)  # ids of repeated random tokens, disjoint from words
_WORD = re.compile(r"\w+|[^\w\s]")


class _Vocab:
    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __call__(self, word: str) -> int:
        return self.ids.setdefault(word.lower(), FIRST_WORD_ID + len(self.ids))


def _sequence(
    ids: list[int],
    kind: str,
    suite: str,
    causal: bool,
    punct: list[bool],
    words: bool = False,
    arcs: Sequence[tuple[int, int, int]] = (),
) -> ProbeSequence:
    """Wrap word ids in [BOS] (causal) or [CLS] ... [SEP] (encoder), with one token per word."""
    suffix = [] if causal else [SEP]
    tokens = torch.tensor([BOS] + ids + suffix, dtype=torch.long)
    n = len(tokens)
    is_special = torch.zeros(n, dtype=torch.bool)
    is_special[0] = True
    is_delim = torch.zeros(n, dtype=torch.bool)
    is_delim[1 : 1 + len(ids)] = torch.tensor(punct, dtype=torch.bool)
    if not causal:
        is_special[-1] = is_delim[-1] = True
    word_of_token = torch.full((n,), -1, dtype=torch.long)
    word_pos = torch.zeros(0, dtype=torch.long)
    if words:
        word_of_token[1 : 1 + len(ids)] = torch.arange(len(ids))
        word_pos = torch.arange(len(ids)) + 1
    return ProbeSequence(
        tokens=tokens,
        suite=suite,
        kind=kind,
        is_delim=is_delim,
        is_special=is_special,
        word_of_token=word_of_token,
        word_pos=word_pos,
        arcs=torch.tensor(list(arcs), dtype=torch.long).reshape(-1, 3),
        source=suite,
    )


def synthetic_sequences(
    causal: bool,
    seed: int = 0,
    n_repeated: int = 24,
    n_syntax: int = 160,
    n_prose: int = 48,
    repeated_lengths: tuple[int, ...] = (8, 12, 16),
    max_len: int = 40,
) -> tuple[list[ProbeSequence], tuple[str, ...]]:
    """Probe sequences of all three kinds and the relation names (ids in arcs index into them)."""
    from interp.probes.prose import prose_suite

    rng = random.Random(seed)
    vocab = _Vocab()
    relations: dict[str, int] = {}
    seqs: list[ProbeSequence] = []
    for i in range(n_repeated):
        half = [
            rng.randrange(*RANDOM_TOKENS)
            for _ in range(repeated_lengths[i % len(repeated_lengths)])
        ]
        seqs.append(_sequence(half + half, REPEATED, "repeated", causal, [False] * 2 * len(half)))
    for sentence in generate_syntax(n_syntax, seed):
        words = [sentence.text[s:e] for s, e in sentence.words]
        arcs = [
            (a.dep, a.head, relations.setdefault(a.relation, len(relations))) for a in sentence.arcs
        ]
        seqs.append(
            _sequence(
                [vocab(w) for w in words],
                SYNTAX,
                "syntax",
                causal,
                [w in ".," for w in words],
                words=True,
                arcs=arcs,
            )
        )
    lines = [s.text for s in prose_suite().sentences]
    for text in rng.sample(lines, min(n_prose, len(lines))):
        words = _WORD.findall(text)[: max_len - 2]
        if len(words) >= 2:
            seqs.append(
                _sequence(
                    [vocab(w) for w in words],
                    NATURAL,
                    "prose",
                    causal,
                    [not w[0].isalnum() and w[0] != "_" for w in words],
                )
            )
    mark_frequent(seqs)
    return seqs, tuple(relations)

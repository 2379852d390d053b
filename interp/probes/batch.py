"""Padding and per-batch masks.

Sequences are bucketed by length (sorted, then cut under a token budget) so that padding is
small, padded on the right, and every mask that a feature reads is built once per batch here,
not once per layer. Padding positions are never valid queries nor valid keys.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Bool, Int

from interp.probes.base import PROBE_KINDS, ProbeSequence


@dataclass
class ProbeBatch:
    """Padded tokens and annotations of a batch. Shapes use: batch, pos (q and k index pos)."""

    tokens: Int[torch.Tensor, "batch pos"]
    valid: Bool[torch.Tensor, "batch pos"]  # not padding
    is_delim: Bool[torch.Tensor, "batch pos"]
    is_special: Bool[torch.Tensor, "batch pos"]
    kind: Int[torch.Tensor, " batch"]  # index into PROBE_KINDS
    word_of_token: Int[torch.Tensor, "batch pos"]  # -1 outside words and in padding
    word_pos: list[torch.Tensor]  # per sequence, long [word]
    arcs: list[torch.Tensor]  # per sequence, long [arc, 3]
    index: Int[torch.Tensor, " batch"]  # position of each sequence in the corpus list
    causal: bool
    # rank among the corpus's most frequent token types, -1 for others and padding
    # (interp.probes.frequent); None: none marked
    frequent_rank: Int[torch.Tensor, "batch pos"] = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.frequent_rank is None:
            self.frequent_rank = torch.full_like(self.tokens, -1)

    @property
    def lengths(self) -> torch.Tensor:
        return self.valid.sum(-1)

    @property
    def attention_mask(self) -> torch.Tensor:
        return self.valid.long()


def make_batch(
    seqs: list[ProbeSequence], index: list[int], causal: bool, pad_id: int
) -> ProbeBatch:
    n, width = len(seqs), max(len(s) for s in seqs)
    tokens = torch.full((n, width), pad_id, dtype=torch.long)
    valid = torch.zeros((n, width), dtype=torch.bool)
    is_delim = torch.zeros((n, width), dtype=torch.bool)
    is_special = torch.zeros((n, width), dtype=torch.bool)
    frequent_rank = torch.full((n, width), -1, dtype=torch.long)
    word_of_token = torch.full((n, width), -1, dtype=torch.long)
    for i, s in enumerate(seqs):
        m = len(s)
        tokens[i, :m], valid[i, :m] = s.tokens, True
        frequent_rank[i, :m] = s.frequent_rank
        is_delim[i, :m], is_special[i, :m], word_of_token[i, :m] = (
            s.is_delim,
            s.is_special,
            s.word_of_token,
        )
    kind = torch.tensor([PROBE_KINDS.index(s.kind) for s in seqs], dtype=torch.long)
    return ProbeBatch(
        tokens,
        valid,
        is_delim,
        is_special,
        kind,
        word_of_token,
        [s.word_pos for s in seqs],
        [s.arcs for s in seqs],
        torch.tensor(index),
        causal,
        frequent_rank,
    )


def bucket(seqs: list[ProbeSequence], max_tokens: int) -> list[list[int]]:
    """Indices of sequences grouped by similar length, each group under ``max_tokens`` padded tokens."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    groups: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = len(seqs[i])  # sorted ascending: the newest is the widest
        if current and width * (len(current) + 1) > max_tokens:
            groups.append(current)
            current = []
        current.append(i)
    if current:
        groups.append(current)
    return groups

"""Hand-built probe sequences for feature tests (no model involved)."""

from __future__ import annotations

import torch

from interp.probes.base import NATURAL, REPEATED, SYNTAX, ProbeSequence


def seq(tokens, kind=NATURAL, delim=(), special=(0,), words=None, arcs=()):
    """A ProbeSequence with the given token ids; ``words`` maps token position -> word (1:1 by default)."""
    n = len(tokens)
    is_delim = torch.zeros(n, dtype=torch.bool)
    is_delim[list(delim)] = True
    is_special = torch.zeros(n, dtype=torch.bool)
    is_special[list(special)] = True
    word_of_token = torch.full((n,), -1, dtype=torch.long)
    word_pos = torch.zeros(0, dtype=torch.long)
    if words is not None:
        word_of_token = torch.tensor(words, dtype=torch.long)
        n_words = int(word_of_token.max()) + 1
        word_pos = torch.tensor([int((word_of_token == w).nonzero()[-1]) for w in range(n_words)])
    return ProbeSequence(
        tokens=torch.tensor(tokens, dtype=torch.long),
        suite=kind,
        kind=kind,
        is_delim=is_delim,
        is_special=is_special,
        word_of_token=word_of_token,
        word_pos=word_pos,
        arcs=torch.tensor(list(arcs), dtype=torch.long).reshape(-1, 3),
    )


__all__ = ["seq", "NATURAL", "REPEATED", "SYNTAX"]

"""Poisson bootstrap weights keyed by probe sequence, not by the order the sequences are seen in.

Every accumulator of the collect stage resamples probe sequences with the Poisson bootstrap:
in each replicate a sequence counts Poisson(1) times. Drawing those weights from one generator
batch by batch would tie them to the batching: another batch size, or the sequences cut into
shards that run elsewhere (:mod:`interp.collect.shards`), would resample differently. Here
sequence ``i``'s weights come from a generator seeded by ``(seed, i // CHUNK)``, so they are the
same however the corpus is batched or sharded, and a shard's sums merge with the others'
exactly.
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor

CHUNK = 1024  # sequences per generator draw


def sequence_weights(
    seed: int, index: Int[Tensor, " batch"], n_replicates: int
) -> Float[Tensor, "replicate batch"]:
    """Poisson(1) weights of the sequences ``index`` (positions in the corpus) in each replicate."""
    out = torch.empty((n_replicates, len(index)), dtype=torch.float64)
    index = index.long()
    for chunk in torch.unique(index // CHUNK).tolist():
        generator = torch.Generator().manual_seed(seed * 1_000_003 + chunk)
        draws = torch.poisson(
            torch.ones(n_replicates, CHUNK, dtype=torch.float64), generator=generator
        )
        mine = index // CHUNK == chunk
        out[:, mine] = draws[:, index[mine] % CHUNK]
    return out


def add_sums(
    target: object, source: object, tensors: tuple[str, ...], counters: tuple[str, ...] = ()
) -> None:
    """Add ``source``'s running sums into ``target``'s (the same accumulator class, fed other
    sequences): the named tensors elementwise, the named dicts key by key."""
    if type(source) is not type(target):
        raise TypeError(f"cannot merge a {type(source).__name__} into a {type(target).__name__}")
    for name in tensors:
        getattr(target, name).__iadd__(getattr(source, name))
    for name in counters:
        mine = getattr(target, name)
        for key, value in getattr(source, name).items():
            mine[key] = mine.get(key, 0) + value

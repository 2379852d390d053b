"""What replaces a head's output under each ablation kind.

All three act on ``hook_z`` (``[batch, pos, head, d_head]``, one slice per *query* head, also
in grouped-query models), i.e. on the head's output before the output projection, at every
position:

- ``zero``: the slice is set to 0. Simple, but pushes the model off its input distribution.
- ``mean``: the head's mean output over the evaluation corpus: one ``[d_head]`` vector per
  head, the average over every valid token of every evaluation sequence (all families pooled,
  not per position). Removes what the head says about *this* input, keeps its constant part.
- ``resample``: the head's output on another sequence of the same batch (a fixed derangement:
  the next sequence in the length-sorted batch, same family, see ``corpus.derangement``),
  taken from the intact model. Positions the donor does not have (it is shorter), and
  sequences without a donor, fall back to the mean.
"""

from __future__ import annotations

import torch

from interp.ablation.catalogue import KINDS
from interp.ablation.corpus import EvalBatch
from interp.ablation.forward import Edit

_ZERO = torch.zeros(())


class MeanAccumulator:
    """Running sum of every head's z over valid positions -> ``[layer, head, d_head]`` means."""

    def __init__(self) -> None:
        self.total: torch.Tensor | None = None
        self.count = 0

    def add(self, z_by_layer: list[torch.Tensor], valid: torch.Tensor) -> None:
        mask = valid.to(z_by_layer[0].device)
        sums = torch.stack([z[mask].double().sum(0) for z in z_by_layer])  # [layer, head, d_head]
        self.total = sums if self.total is None else self.total + sums
        self.count += int(mask.sum())

    def means(self) -> torch.Tensor:
        if self.total is None or not self.count:
            raise ValueError("no positions seen: the evaluation corpus is empty")
        return (self.total / self.count).float()


def replacement(kind: str, layer: int, head: int, batch: EvalBatch, clean_z: list[torch.Tensor] | None,
                means: torch.Tensor | None) -> torch.Tensor:
    """The value that stands in for head ``(layer, head)``'s z on ``batch``."""
    if kind == "zero":
        return _ZERO
    if means is None:
        raise ValueError(f"{kind} ablation needs the heads' mean outputs")
    mean = means[layer, head]
    if kind == "mean":
        return mean
    if kind != "resample":
        raise ValueError(f"unknown ablation kind {kind!r}; choose from {KINDS}")
    if clean_z is None:
        raise ValueError("resample ablation needs the intact pass's z")
    z = clean_z[layer][:, :, head]  # [batch, pos, d_head]
    donor = batch.donor.to(z.device)
    valid = batch.valid.to(z.device)
    usable = valid[donor] & (donor != torch.arange(len(donor), device=z.device)).unsqueeze(1)
    return torch.where(usable.unsqueeze(-1), z[donor], mean.to(z.dtype).to(z.device))


def edits_for(kind: str, heads: list[tuple[int, int]], batch: EvalBatch, clean_z: list[torch.Tensor] | None,
              means: torch.Tensor | None, replica: int = 0) -> list[Edit]:
    """Edits that ablate every head of ``heads`` together, in one replica."""
    return [Edit(layer, head, replacement(kind, layer, head, batch, clean_z, means), replica)
            for layer, head in heads]

"""What replaces a head's output under each ablation kind.

All three act on ``hook_z`` (``[batch, pos, head, d_head]``, one slice per *query* head, also
in grouped-query models), i.e. on the head's output before the output projection, at every
position:

- ``zero``: the slice is set to 0. Simple, but pushes the model off its input distribution.
- ``mean``: the head's mean output over the evaluation corpus: one ``[d_head]`` vector per
  head, the average over every valid token of every evaluation sequence (all eval sets pooled,
  not per position). Removes what the head says about *this* input, keeps its constant part.
- ``resample``: the head's output on another sequence of the same batch (a fixed derangement:
  the next sequence in the length-sorted batch, same eval set, see ``corpus.derangement``),
  taken from the intact model. Positions the donor does not have (it is shorter), and
  sequences without a donor, fall back to the mean.
- ``sink``: what the head would output with all of its attention on the first position (BOS /
  [CLS]): that position's value vector, at every position. Removes exactly what the head does
  besides sinking, and keeps the sink's own contribution (in a causal model a constant: the
  first position sees only itself), so it asks "does this head do anything but sink?".
"""

from __future__ import annotations

import torch

from interp.ablate.batches import EvalBatch
from interp.ablate.catalogue import KINDS
from interp.ablate.forward import Edit

# Not one of the stage's KINDS (interp.ablate.catalogue): understood by replacement, edits_for,
# attribution and the exact sweep, for analyses through the Python API (analyses/sinks.py).
SINK = "sink"
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


def replacement(
    kind: str,
    layer: int,
    head: int,
    batch: EvalBatch,
    clean_z: list[torch.Tensor] | None,
    means: torch.Tensor | None,
    sink_v: list[torch.Tensor] | None = None,
) -> torch.Tensor:
    """The value that stands in for head ``(layer, head)``'s z on ``batch``."""
    if kind == "zero":
        return _ZERO
    if kind == SINK:
        if sink_v is None:
            raise ValueError(
                "sink ablation needs the intact pass's value vectors at the first position"
            )
        return sink_v[layer][:, head, None, :]  # [batch, 1, d_head]
    if means is None:
        raise ValueError(f"{kind} ablation needs the heads' mean outputs")
    mean = means[layer, head]
    if kind == "mean":
        return mean
    if kind != "resample":
        raise ValueError(f"unknown ablation kind {kind!r}; choose from {KINDS + (SINK,)}")
    if clean_z is None:
        raise ValueError("resample ablation needs the intact pass's z")
    z = clean_z[layer][:, :, head]  # [batch, pos, d_head]
    donor = batch.donor.to(z.device)
    valid = batch.valid.to(z.device)
    usable = valid[donor] & (donor != torch.arange(len(donor), device=z.device)).unsqueeze(1)
    return torch.where(usable.unsqueeze(-1), z[donor], mean.to(z.dtype).to(z.device))


def edits_for(
    kind: str,
    heads: list[tuple[int, int]],
    batch: EvalBatch,
    clean_z: list[torch.Tensor] | None,
    means: torch.Tensor | None,
    replica: int = 0,
    sink_v: list[torch.Tensor] | None = None,
) -> list[Edit]:
    """Edits that ablate every head of ``heads`` together, in one replica."""
    return [
        Edit(layer, head, replacement(kind, layer, head, batch, clean_z, means, sink_v), replica)
        for layer, head in heads
    ]

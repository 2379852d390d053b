"""GradDrop of AtP* (Kramár et al. 2024): the gradient through one layer dropped at a time.

A head can matter while its first-order estimate is near zero: what it writes directly into the
output and what a later layer makes of it cancel (a later head that copies its work, or repairs
its absence). The two paths are there, they only add up to little at the intact model, and an
ablation need not cancel as neatly. GradDrop exposes such a head: for every block ``l`` the
estimate is taken again with the gradient through block ``l`` zeroed, so whatever path runs
through that block is left out; a head whose estimate grows when one block is left out had
paths that cancelled. Its score is the mean over the other ``L - 1`` blocks of the estimate's
size,

    graddrop_h = 1 / (L - 1) * sum over blocks l != layer(h) of | estimate_h with block l dropped |,

where dropping a block at or below the head's own layer leaves its estimate unchanged, and the
head's own block (which would leave it no path at all) is not counted. The score is a size, not
a signed effect: the stage uses it, beside the estimate, to choose the heads it ablates exactly.

Cost: one backward pass from each block down, about ``L / 2`` backward passes per batch on top
of the estimate's own, so the stage computes it on the first sequences of its corpus only
(:mod:`interp.ablate.atp_star`).
"""

from __future__ import annotations

import torch

from interp.ablate.forward import GradPass


def dropped_estimates(
    passed: GradPass,
    grad_resid: list[torch.Tensor],
    grad_z: list[torch.Tensor],
    dz: dict[str, list[torch.Tensor]],
    linear: dict[str, torch.Tensor],
) -> dict[str, torch.Tensor]:
    """Per ablation kind, ``[dropped block, layer, batch, head]``: each head's first-order estimate
    (``linear[kind]`` ``[layer, batch, head]``, from ``dz[kind]`` per layer) with the gradient
    through the dropped block zeroed. ``grad_resid``: the gradient of the metric with respect to
    the residual entering each block and leaving the last (``passed.resid``); the graph must
    still be alive."""
    n = len(passed.z)
    out = {kind: est.unsqueeze(0).repeat(n, 1, 1, 1) for kind, est in linear.items()}
    for block in range(1, n):
        # the gradient that reaches the residual below the block through the block itself
        through = grad_resid[block] - grad_resid[block + 1]
        below = torch.autograd.grad(
            passed.resid[block], passed.z[:block], grad_outputs=through, retain_graph=True
        )
        with torch.no_grad():
            for kind, changes in dz.items():
                for layer in range(block):
                    kept = grad_z[layer] - below[layer]
                    out[kind][block, layer] = (kept.float() * changes[layer]).sum((1, 3))
    return out


def scores(sums: torch.Tensor, den: float) -> torch.Tensor:
    """``[layer, head]``: the GradDrop score from ``sums`` ``[dropped block, layer, head]`` (the
    estimates with each block dropped, summed over a metric's sequences) and its scored
    positions ``den`` (a metric that is a mean per position is estimated per position)."""
    n = sums.shape[0]
    if n < 2:
        return sums[0].abs() / den
    size = sums.abs() / den
    own = torch.eye(n, dtype=torch.bool)[:, :, None].expand_as(size)  # block == layer
    return size.masked_fill(own, 0).sum(0) / (n - 1)

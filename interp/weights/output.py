"""How much each head writes into the residual stream, measured on a few probe sequences.

A head's output at a position is ``z W_O`` (``z``: its attention-weighted values, one slice
per query head); its *output size* is the root-mean-square of that vector over the probes'
content positions (not the first position, not special tokens, not padding) over the
root-mean-square of the residual stream entering its layer at the same positions:
``sqrt(sum |z W_O|^2 / sum |resid_pre|^2)``. A head that attends but writes nothing (a zero
slice of ``o_proj``, zero values) scores exactly 0; a constant write (a value bias) counts as
writing. What a head writes is taken before any norm after attention (Gemma's), and its share
of the output bias, which belongs to no head, is left out.

This is the only part of the weight evidence that runs the model: one forward pass over the
probes (:func:`output_sums`, through :mod:`interp.model.lens`, no logits computed), whose
per-sequence sums give the value and its bootstrap over sequences (:func:`output_size`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float

from interp.model import lens
from interp.probes.base import ProbeSequence
from interp.probes.batch import bucket, make_batch

Tensor = torch.Tensor


@dataclass(frozen=True)
class OutputSums:
    """Per probe sequence: the summed squared norms of what each head wrote and of the residual
    stream entering each layer, over the sequence's content positions."""

    written: Float[Tensor, "seq layer head"]
    resid: Float[Tensor, "seq layer"]
    positions: int  # content positions summed over, all sequences together


def output_sums(model: Any, seqs: list[ProbeSequence], max_tokens: int) -> OutputSums:
    """One forward pass over ``seqs`` (in length buckets of at most ``max_tokens`` padded tokens)
    that sums ``|z_h W_O^h|^2`` and ``|resid_pre|^2`` per sequence over content positions."""
    w_o = lens.output_weights(model.bridge)  # [layer, head, d_head, d_model]
    gram = w_o @ w_o.transpose(-1, -2)  # [layer, head, d_head, d_head]: |z W_O|^2 = z G z^T
    written = torch.zeros(len(seqs), model.n_layers, model.n_heads, dtype=torch.float64)
    resid = torch.zeros(len(seqs), model.n_layers, dtype=torch.float64)
    positions = 0
    for group in bucket(seqs, max_tokens):
        batch = make_batch([seqs[i] for i in group], group, model.causal, model_pad(model))
        content = (batch.valid & ~batch.is_special).to(model.device)
        where = torch.tensor(group)
        positions += int(content.sum())

        def on_z(z: Tensor, layer: int) -> None:  # [batch, pos, head, d_head]
            z = z.float()
            norms = torch.einsum("bphi,hij,bphj->bph", z, gram[layer].to(z.device), z)
            written[where, layer] += (norms * content[..., None]).sum(1).double().cpu()

        def on_resid(x: Tensor, layer: int) -> None:  # [batch, pos, d_model]
            norms = x.float().pow(2).sum(-1)
            resid[where, layer] += (norms * content).sum(1).double().cpu()

        with torch.inference_mode():
            lens.run(
                model,
                batch.tokens.to(model.device),
                batch.attention_mask.to(model.device),
                [lens.Tap("z", on_z), lens.Tap("resid_pre", on_resid)],
                lens.FinalHidden(),
            )
    return OutputSums(written, resid, positions)


def model_pad(model: Any) -> int:
    return model.tokenizer.pad_token_id or 0


def output_size(
    sums: OutputSums, weights: Float[Tensor, "replicate seq"] | None = None
) -> Float[Tensor, "... layer head"]:
    """``sqrt(sum |z W_O|^2 / sum |resid_pre|^2)`` over the sequences, each head of each layer;
    with ``weights`` (bootstrap weights of the sequences) one value per replicate."""
    if weights is None:
        written, resid = sums.written.sum(0), sums.resid.sum(0)
    else:
        w = weights.double()
        written = torch.einsum("rs,slh->rlh", w, sums.written)
        resid = w @ sums.resid
    ratio = written / resid[..., None].where(resid[..., None] > 0, float("nan"))
    return ratio.sqrt().float()

"""Every head's OV scores, their bootstrap replicates and their null, layer by layer.

The pure scores of :mod:`interp.weights.ov` are applied to each head of each layer, reading the
tokens as that layer's heads see them (:class:`interp.weights.read.TokenInputs`, normalised as
their input norm does) and writing through the folded unembedding. Every score comes with

- ``replicates``: the score on Poisson-bootstrap resamples of what it is an average over (the
  sampled tokens for the rates, blocks of them for copying, the ordinal pairs for successor),
  for an interval;
- ``null``: the same score of :data:`N_NULL <interp.weights.config.WeightsConfig.n_null>` heads
  with i.i.d. Gaussian ``W_V`` and ``W_O`` of the same shape reading the same tokens, once for
  the layer-0 inputs and once for the later layers' (row 0 and 1): what a head with no
  preference scores, given the embedding's own structure (some tokens' unembeddings are large
  for every input, and a tied embedding makes a row's own token special).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float

from interp.weights import ov
from interp.weights.ordinals import Ordinal
from interp.weights.read import HeadWeights, TokenInputs, normalise

Tensor = torch.Tensor
OV_SCORES = ("copying", "copy_rate", "suppression_rate", "successor")
# The copying score's bootstrap resamples blocks of sampled tokens (ov.copying_replicates), 64
# small matrices per head instead of one per token: on SmolLM2 (45 heads of 5 layers, 1024 tokens,
# 200 replicates each) its 95% interval was as wide as single tokens' (median ratio 1.03).
BOOTSTRAP_BLOCKS = 64


@dataclass(frozen=True)
class Score:
    """One score of every head: value ``[layer, head]``, bootstrap replicates ``[replicate,
    layer, head]``, its null ``[inputs, draw]`` (row 0: layer 0's inputs, row 1: later layers';
    None: no null, the baseline is the model's median head) and what it rests on (``n``)."""

    value: Float[Tensor, "layer head"]
    replicates: Float[Tensor, "replicate layer head"]
    null: Float[Tensor, "inputs draw"] | None
    n: int


@dataclass(frozen=True)
class Tokens:
    """Which rows of the token inputs each score reads, and the unembedding's columns for them."""

    sample: Tensor  # long [n]: rows of the sampled ordinary tokens
    sample_ids: Tensor  # long [n]: their token ids (the unembedding's columns)
    ordinal_rows: Tensor  # long [m]: rows of every ordinal item, in sequence order
    ordinal_ids: Tensor  # long [m]
    sequences: list[list[int]]  # positions into ordinal_rows, one list per ordinal sequence

    @classmethod
    def of(cls, sample_ids: Tensor, ordinals: list[Ordinal]) -> tuple[Tokens, Tensor]:
        """The tokens and the ids whose inputs must be made (sample first, then ordinals)."""
        flat = [i for o in ordinals for i in o.ids]
        ids = torch.cat([sample_ids, torch.tensor(flat, dtype=torch.long)])
        sequences, start = [], 0
        for o in ordinals:
            sequences.append(list(range(start, start + len(o.ids))))
            start += len(o.ids)
        rows = torch.arange(len(sample_ids), len(ids))
        tokens = cls(
            torch.arange(len(sample_ids)),
            sample_ids,
            rows,
            ids[len(sample_ids) :],
            sequences,
        )
        return tokens, ids


def _rates(hits: Tensor, weights: Tensor | None) -> tuple[Tensor, Tensor | None]:
    """(share of hits per head [head], per bootstrap replicate [replicate, head] or None)."""
    h = hits.float()
    if weights is None:
        return h.mean(-1), None
    return h.mean(-1), (weights @ h.T) / weights.sum(-1, keepdim=True).clamp(min=1e-12)


def _scores(
    inputs: Tensor,
    unembed: Tensor,
    tokens: Tokens,
    w_v: Tensor,
    w_o: Tensor,
    top_k: int,
    token_weights: tuple[Tensor, Tensor] | None,
    pair_weights: Tensor | None,
) -> dict[str, tuple[Tensor, Tensor | None]]:
    """Each OV score of the heads ``w_v`` ``[head, d_model, d_head]``, ``w_o`` reading the
    normalised ``inputs``: (value [head], replicates [replicate, head] or None). The bootstrap
    weights are per token and per block of tokens (copying), and per ordinal pair."""
    reads = torch.einsum("nd,hde->hne", inputs, w_v)
    writes = w_o @ unembed[:, tokens.sample_ids]
    sample_reads = reads[:, tokens.sample]
    out: dict[str, tuple[Tensor, Tensor | None]] = {}
    out["copying"] = (
        ov.copying(sample_reads, writes),
        None
        if token_weights is None
        else ov.copying_replicates(sample_reads, writes, token_weights[1]),
    )
    if top_k < len(tokens.sample):  # else every token would be among the top k of its row
        top, bottom = ov.self_ranks(sample_reads, writes, top_k)
        out["copy_rate"] = _rates(top, None if token_weights is None else token_weights[0])
        out["suppression_rate"] = _rates(
            bottom, None if token_weights is None else token_weights[0]
        )
    if tokens.sequences:
        hits = ov.successor_hits(
            reads[:, tokens.ordinal_rows],
            w_o @ unembed[:, tokens.ordinal_ids],
            tokens.sequences,
        )
        out["successor"] = _rates(hits, pair_weights)
    # a head with a NaN or infinite weight has no score (its ranks would read as misses)
    broken = ~(reads.isfinite().all(-1).all(-1) & writes.isfinite().all(-1).all(-1))
    return {name: _unless(broken, *pair) for name, pair in out.items()}


def _unless(
    broken: Tensor, value: Tensor, replicates: Tensor | None
) -> tuple[Tensor, Tensor | None]:
    """The value and replicates with NaN for the ``broken`` heads."""
    value = value.masked_fill(broken, float("nan"))
    if replicates is not None:
        replicates = replicates.masked_fill(broken, float("nan"))
    return value, replicates


def ov_evidence(
    heads: HeadWeights,
    unembed: Tensor,
    inputs: TokenInputs,
    tokens: Tokens,
    top_k: int,
    n_null: int,
    n_bootstrap: int,
    generator: torch.Generator,
) -> dict[str, Score]:
    """Every OV score of every head (successor only where there are ordinal sequences, the rates
    only where there are more tokens than ``top_k``)."""
    n_pairs = sum(len(s) - 1 for s in tokens.sequences)
    blocks = min(BOOTSTRAP_BLOCKS, len(tokens.sample))
    token_weights = (
        _poisson(n_bootstrap, len(tokens.sample), generator),
        _poisson(n_bootstrap, blocks, generator),
    )
    pair_weights = _poisson(n_bootstrap, n_pairs, generator) if n_pairs else None
    read = [normalise(inputs.first, heads.centres), normalise(inputs.later, heads.centres)]
    w_v = heads.per_query(heads.w_v)
    per_layer = [
        _scores(
            read[min(layer, 1)],
            unembed,
            tokens,
            w_v[layer],
            heads.w_o[layer],
            top_k,
            token_weights,
            pair_weights,
        )
        for layer in range(heads.n_layers)
    ]
    d_model, d_head = heads.w_v.shape[2:]
    random_v, random_o = ov.random_heads(n_null, d_model, d_head, generator)
    null = [_scores(read[0], unembed, tokens, random_v, random_o, top_k, None, None)]
    same = torch.equal(inputs.first, inputs.later)
    null.append(
        null[0]
        if same
        else _scores(read[1], unembed, tokens, random_v, random_o, top_k, None, None)
    )
    n_of = {"copying": len(tokens.sample), "successor": n_pairs}
    return {
        name: Score(
            torch.stack([scores[name][0] for scores in per_layer]),
            _by_layer([scores[name][1] for scores in per_layer]),
            torch.stack([row[name][0] for row in null]),
            n_of.get(name, len(tokens.sample)),
        )
        for name in OV_SCORES
        if name in per_layer[0]
    }


def _by_layer(replicates: list[Tensor | None]) -> Tensor:
    """Each layer's ``[replicate, head]`` stacked ``[replicate, layer, head]`` (the heads' scores
    always have replicates; only the null's have none)."""
    found = [r for r in replicates if r is not None]
    if len(found) < len(replicates):
        raise ValueError("a layer's score has no bootstrap replicates")
    return torch.stack(found, dim=1)


def _poisson(n: int, size: int, generator: torch.Generator) -> Tensor:
    """Poisson(1) bootstrap weights ``[replicate, size]``: a resample with replacement."""
    return torch.poisson(torch.ones(n, size), generator=generator)

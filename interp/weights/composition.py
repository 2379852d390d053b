"""Q-, K- and V-composition between heads of different layers (Elhage et al. 2021).

An earlier head A writes ``x W_OV^A`` (``W_OV = W_V W_O``, ``d_model x d_model``) into the
residual stream; a later head B reads that stream three ways: through its queries, its keys
and its values. How much of what B reads could come from A is

- Q-composition ``|W_OV^A W_QK^B|_F / (|W_OV^A|_F |W_QK^B|_F)``, with ``W_QK = W_Q W_K^T``;
- K-composition ``|W_OV^A (W_QK^B)^T|_F / (...)``: A's output read as B's keys (an induction
  head's keys read the previous-token head);
- V-composition ``|W_OV^A W_OV^B|_F / (...)``: A's output moved on by B.

Each is at most 1 (Cauchy-Schwarz), and ``1 / sqrt(r)`` when B reads exactly the ``r``
directions A writes with the same weight (both isometries of rank ``r``); about
``1 / sqrt(d_model)`` for unrelated random matrices (:func:`random_scores` is the baseline);
0 when either head has no weights, or B reads nothing A writes. Grouped-query heads
are read with their own key-value head; the reading head's input norm is folded into its
weights (:mod:`interp.weights.read`).

Every pair is a Frobenius inner product of two ``d_model x d_model`` Gram matrices:
``|W_OV^A X|_F^2 = <P_A, X X^T>`` with ``P_A = (W_OV^A)^T W_OV^A``, so the score of every
writer with every reader is one matrix product over the Grams' upper triangles, ``d_model^2 / 2``
per pair instead of ``d_head^2 d_model`` for the factored products: 270 x 270 heads of SmolLM2
cost seconds. Everything here is a pure function of tensors.
"""

from __future__ import annotations

from typing import Any

import torch
from jaxtyping import Float

Tensor = torch.Tensor
KINDS = ("q", "k", "v")


def _gram(
    left: Float[Tensor, "head d_model d_head"], middle: Float[Tensor, "head d_head d_head"]
) -> Float[Tensor, "head d_model d_model"]:
    """``left @ middle @ left^T`` per head."""
    return left @ middle @ left.transpose(-1, -2)


def writer_grams(
    w_v: Float[Tensor, "head d_model d_head"], w_o: Float[Tensor, "head d_head d_model"]
) -> Float[Tensor, "head d_model d_model"]:
    """``P = (W_V W_O)^T (W_V W_O)`` of each head (``w_v`` one slice per query head)."""
    return _gram(w_o.transpose(-1, -2), w_v.transpose(-1, -2) @ w_v)


def reader_grams(
    kind: str,
    w_q: Float[Tensor, "head d_model d_head"],
    w_k: Float[Tensor, "head d_model d_head"],
    w_v: Float[Tensor, "head d_model d_head"],
    w_o: Float[Tensor, "head d_head d_model"],
) -> Float[Tensor, "head d_model d_model"]:
    """``X X^T`` for what a reading head multiplies a writer's output with: ``X = W_QK`` (q),
    ``W_QK^T`` (k) or ``W_OV`` (v); every argument one slice per query head."""
    if kind == "q":
        return _gram(w_q, w_k.transpose(-1, -2) @ w_k)
    if kind == "k":
        return _gram(w_k, w_q.transpose(-1, -2) @ w_q)
    if kind == "v":
        return _gram(w_v, w_o @ w_o.transpose(-1, -2))
    raise ValueError(f"unknown composition kind {kind!r}; choose from {KINDS}")


class Packed:
    """Symmetric ``d_model x d_model`` Grams kept as their upper triangles (the writers' with
    off-diagonal entries doubled, so that a dot product of two packed rows is the Frobenius
    inner product of the full matrices) and their traces (the squared Frobenius norms)."""

    def __init__(self, d_model: int) -> None:
        self.rows, self.cols = torch.triu_indices(d_model, d_model)
        self.factor = torch.where(self.rows == self.cols, 1.0, 2.0)

    def __call__(
        self, grams: Float[Tensor, "head d_model d_model"], doubled: bool
    ) -> tuple[Tensor, Tensor]:
        upper = grams[:, self.rows, self.cols]
        return (upper * self.factor if doubled else upper), grams.diagonal(0, -2, -1).sum(-1)


def scores(
    writers: tuple[Tensor, Tensor], readers: tuple[Tensor, Tensor], pairwise: bool = True
) -> Tensor:
    """Composition scores from packed Grams (:class:`Packed`: the writers' doubled):
    ``[writer, reader]`` for every pair, or (``pairwise=False``) ``[pair]`` for writer i with
    reader i. 0 where either head has no weights, NaN where one has a NaN weight."""
    (left, norm_w), (right, norm_r) = writers, readers
    inner = left @ right.T if pairwise else (left * right).sum(-1)
    denominator = norm_w[:, None] * norm_r[None, :] if pairwise else norm_w * norm_r
    silent = denominator == 0  # NaN (a NaN weight) is not silent: it stays NaN
    ratio = inner.clamp(min=0) / denominator.masked_fill(silent, 1.0)
    return ratio.masked_fill(silent, 0.0).sqrt()


def random_scores(
    kind: str, n: int, d_model: int, d_head: int, generator: torch.Generator
) -> Tensor:
    """``n`` composition scores of independent pairs of heads with i.i.d. standard normal
    weights of these shapes: the random-matrix baseline of ``kind``."""

    def draw(*shape: int) -> Tensor:
        return torch.randn(n, *shape, generator=generator)

    pack = Packed(d_model)
    writer = pack(writer_grams(draw(d_model, d_head), draw(d_head, d_model)), doubled=True)
    reader = reader_grams(
        kind,
        draw(d_model, d_head),
        draw(d_model, d_head),
        draw(d_model, d_head),
        draw(d_head, d_model),
    )
    return scores(writer, pack(reader, doubled=False), pairwise=False)


def all_scores(heads: Any, max_bytes: int = 2**28) -> Float[Tensor, "kind layer head layer head"]:
    """Every kind's score of every writer ``[..., writer_layer, writer_head]`` with every reader
    ``[kind, layer, head, ...]`` in a later layer; NaN where the writer is not earlier.
    ``heads``: :class:`interp.weights.read.HeadWeights`. The writers' packed Grams are held at
    most ``max_bytes`` at a time (the readers' are made again for each chunk of writers)."""
    n_layers, n_heads, d_model = heads.n_layers, heads.n_heads, heads.w_q.shape[2]
    pack = Packed(d_model)
    w_v, w_k = heads.per_query(heads.w_v), heads.per_query(heads.w_k)
    out = torch.full((len(KINDS), n_layers, n_heads, n_layers, n_heads), float("nan"))
    chunk = max(1, max_bytes // (n_heads * len(pack.rows) * 4))
    for first in range(0, n_layers - 1, chunk):
        layers = list(range(first, min(first + chunk, n_layers - 1)))
        made = [pack(writer_grams(w_v[w], heads.w_o[w]), doubled=True) for w in layers]
        upper, norms = torch.cat([m[0] for m in made]), torch.cat([m[1] for m in made])
        del made
        for reader in range(first + 1, n_layers):
            mine = [w for w in layers if w < reader]  # a prefix of the chunk's layers
            rows = upper[: len(mine) * n_heads], norms[: len(mine) * n_heads]
            for k, kind in enumerate(KINDS):
                grams = reader_grams(
                    kind, heads.w_q[reader], w_k[reader], w_v[reader], heads.w_o[reader]
                )
                block = scores(rows, pack(grams, doubled=False))  # [writer, reader head]
                out[k, reader, :, layers[0] : layers[0] + len(mine)] = block.T.reshape(
                    n_heads, len(mine), n_heads
                )
    return out

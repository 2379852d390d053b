"""What a head's OV circuit does to the token it attends to, read from its weights alone.

A head that attends to a token ``t`` adds ``e_t W_V W_O`` to the residual stream, and through
the unembedding that raises the logits ``e_t W_V W_O W_U``. Over a set of tokens this is the
OV circuit ``M = E W_V W_O U`` (rows: the token attended to, columns: the token whose logit it
moves; Elhage et al. 2021). Every function here is a pure function of tensors, in the factored
form a head gives: ``reads = E W_V`` ``[head, n, d_head]`` and ``writes = W_O U``
``[head, d_head, m]``, so that ``M = reads @ writes``.

- :func:`copying`: Elhage et al.'s summary of whether ``M`` copies: its eigenvalues' sum over
  the sum of their moduli, ``Re(sum lambda) / sum |lambda|`` in [-1, 1]: +1 for a circuit that
  maps every token to itself (positive eigenvalues only), -1 for one that writes against every
  token it attends to (copy suppression, McDougall et al. 2023), near 0 for no preference. The
  non-zero eigenvalues of the ``n x n`` circuit are those of ``writes @ reads`` (``d_head x
  d_head``), which is what is decomposed. A head that writes nothing scores 0.
- :func:`self_ranks`: where each token's own logit ranks in its row: the top-k self-prediction
  rate (copying) and the bottom-k rate (suppression). Ties count against the token, so a row
  of equal logits (a head that writes nothing) ranks it last both ways.
- :func:`successor_hits`: whether the circuit raises the next item of an ordinal sequence
  above every other item of that sequence (Gould et al. 2023).

Rows and columns are chosen by the caller (:mod:`interp.weights.stage`: a sample of ordinary
tokens; ordinal sequences for successors). All scores are unchanged by rescaling a head's
weights, so a null made of random Gaussian matrices of the same shape (:func:`random_heads`)
is the baseline of every head.
"""

from __future__ import annotations

import torch
from jaxtyping import Bool, Float

from interp.synthetic.train import single_thread

Tensor = torch.Tensor


def copying(
    reads: Float[Tensor, "head n d_head"], writes: Float[Tensor, "head d_head n"]
) -> Float[Tensor, " head"]:
    """``Re(sum lambda) / sum |lambda|`` of each head's circuit over the same ``n`` tokens in rows
    and columns (0 for a head that writes nothing)."""
    return _eigen_share(writes @ reads)


def copying_replicates(
    reads: Float[Tensor, "head n d_head"],
    writes: Float[Tensor, "head d_head n"],
    weights: Float[Tensor, "replicate block"],
) -> Float[Tensor, "replicate head"]:
    """:func:`copying` on bootstrap resamples of the tokens, resampled in ``block`` contiguous
    blocks (the caller's tokens are in random order, so blocks are exchangeable): the circuit of
    a resample is ``sum_b w_b writes_b @ reads_b``, made from one small matrix per block, so a
    replicate costs ``block x d_head^2`` instead of a pass over the tokens."""
    n_heads, n, d_head = reads.shape
    blocks = weights.shape[1]
    size = -(-n // blocks)
    pad = blocks * size - n  # zero tokens at the end add nothing to any block
    r = torch.nn.functional.pad(reads, (0, 0, 0, pad)).view(n_heads, blocks, size, d_head)
    w = torch.nn.functional.pad(writes, (0, pad)).view(n_heads, d_head, blocks, size)
    parts = torch.einsum("hibt,hbtj->hbij", w, r)  # [head, block, d_head, d_head]
    return _eigen_share(torch.einsum("rb,hbij->rhij", weights.to(parts.dtype), parts))


def _eigen_share(small: Float[Tensor, "... d_head d_head"]) -> Tensor:
    # One thread: LAPACK decomposes each small matrix alone, and a second thread only waits
    # at OpenMP barriers (2,000 eigendecompositions: 1.7 s on one thread, 34 s on two, float32).
    small = small.double()
    finite = small.isfinite().all(-1).all(-1)  # LAPACK cannot take NaN: such a head scores NaN
    with single_thread():
        eig = torch.linalg.eigvals(small.where(finite[..., None, None], 0.0))
    mass = eig.abs().sum(-1)
    # The sum of the eigenvalues is the trace, which is exact; the moduli of a nilpotent
    # circuit's (a successor's shift) are rounding noise, over which a noisy sum would be chance.
    trace = small.diagonal(0, -2, -1).sum(-1)
    share = trace / mass.where(mass > 0, 1.0)
    return share.where(finite, float("nan")).float()


def self_ranks(
    reads: Float[Tensor, "head n d_head"],
    writes: Float[Tensor, "head d_head n"],
    k: int,
    heads_at_once: int = 16,
) -> tuple[Bool[Tensor, "head n"], Bool[Tensor, "head n"]]:
    """(top, bottom): whether token ``t``'s own logit is among the ``k`` highest, or the ``k``
    lowest, of its row over the ``n`` tokens (rows and columns the same tokens, in order)."""
    top, bottom = [], []
    for r, w in zip(reads.split(heads_at_once), writes.split(heads_at_once)):
        circuit = r @ w  # [head, n, n]
        diagonal = circuit.diagonal(0, -2, -1)
        own = diagonal.clone()
        # own is among the k highest, ties against it, iff it beats the k-th highest of the rest
        diagonal.fill_(float("-inf"))
        top.append(own > circuit.topk(k, dim=-1).values[..., -1])
        diagonal.fill_(float("inf"))
        bottom.append(own < circuit.topk(k, dim=-1, largest=False).values[..., -1])
    return torch.cat(top), torch.cat(bottom)


def successor_hits(
    reads: Float[Tensor, "head n d_head"],
    writes: Float[Tensor, "head d_head n"],
    sequences: list[list[int]],
) -> Bool[Tensor, "head pair"]:
    """For every consecutive pair ``(a, b)`` of every sequence (positions into the ``n`` rows and
    columns): whether ``b`` gets a higher logit than every other item of its sequence when the
    head attends to ``a`` (a strict maximum: a head that writes nothing hits nothing). The last
    item has no successor (Sunday -> Monday is not asked: not every model's sequence wraps)."""
    rows, after, members = [], [], []
    for seq in sequences:
        for a, b in zip(seq, seq[1:]):
            rows.append(a)
            after.append(b)
            members.append(seq)
    n = reads.shape[1]
    rivals = torch.zeros(len(rows), n, dtype=torch.bool)  # [pair, n]: the sequence but the next
    for p, (seq, nxt) in enumerate(zip(members, after)):
        rivals[p, seq] = True
        rivals[p, nxt] = False
    circuit = reads[:, rows] @ writes  # [head, pair, n]
    target = circuit[:, torch.arange(len(rows)), after]
    best_rival = circuit.masked_fill(~rivals, float("-inf")).max(-1).values
    return target > best_rival


def random_heads(
    n: int, d_model: int, d_head: int, generator: torch.Generator
) -> tuple[Float[Tensor, "head d_model d_head"], Float[Tensor, "head d_head d_model"]]:
    """``n`` heads with i.i.d. standard normal ``W_V`` and ``W_O``: the null of every score here
    (all of them are blind to the scale of the weights)."""
    w_v = torch.randn(n, d_model, d_head, generator=generator)
    w_o = torch.randn(n, d_head, d_model, generator=generator)
    return w_v, w_o

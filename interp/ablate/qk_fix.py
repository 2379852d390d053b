"""The QK fix of AtP* (Kramár et al. 2024): the attention softmax recomputed exactly.

First-order attribution (:mod:`interp.ablate.attribution`) sees a head's effect through
another head's attention only through the gradient of that softmax at the intact model. Where
the later head attends sharply (a saturated softmax), the gradient is near zero however much
the head's queries and keys move: ablating a layer-0 previous-token head rewrites what a
layer-1 induction head's keys match on, its attention moves to other tokens, and the loss
rises, while attribution sees almost nothing.

Here the softmax is taken exactly. For every pair of an ablated head ``h`` (layer ``l``) and a
later head ``h'`` (layer ``l' > l``):

1. what ``h``'s ablation writes into the residual stream, ``dz_h W_O^h`` at every position, is
   added to the residual entering layer ``l'`` (the direct path, as in a residual network;
   what the layers in between make of it stays first order, with the rest of the estimate);
2. the norm before ``h'``'s attention is recomputed exactly on that residual (its divisor from
   the squared norm, which is a cheap function of ``dz_h``), then the query and key
   projections, rotary embedding and score scale, so the changed queries and keys of ``h'``
   are exact along that path (grouped-query models: ``h'`` reads its key-value group's keys);
3. ``h'``'s attention ``A'`` is the exact softmax of the new scores, and its change enters the
   estimate through the gradient of the metric with respect to the attention pattern, ``G``:
   ``sum (A' - A) . G`` replaces the first-order term ``sum (J ds) . G`` of the same path.

So each head's estimate gains, summed over the later heads,

    correction_h = sum over h' of  [ (A'_{h'} - A_{h'}) . G_{h'}  -  dS^lin_{h'} . dM/dS_{h'} ].

On a two-layer attention-only model the recomputed pattern is the ablated model's pattern
exactly (tests/unit/test_qk_fix.py). The recomputation is checked on the first batch against
what the model itself computes (norm, projections, rotary, scale, softmax; and that the
attention pattern is what the model goes on with, which a post-norm BERT does not expose):
where any of it does not hold, :func:`check` says why and the estimate stays first order.

**Which pairs.** Every pair costs a ``d_head``-vector per position and a softmax per query, so
the exact term is taken for the pairs most likely to need it: per batch, each pair is scored
by ``sum |dz_h / r|^2`` (how far the ablation moves the residual the later layer normalises)
times ``|C_q|^2 + |C_k|^2`` (how strongly the earlier head writes into the later head's
queries and keys: ``C = W_O^h diag(gain) W_Q^{h'}``) times the later head's leverage
``sum over queries of (max - min) of G`` (how much its attention can matter at all), and the
top ``PAIR_SHARE`` of the pairs by that score are recomputed; the other pairs keep their first-order
term. On SmolLM2 a tenth of the pairs carries the large corrections (the previous-token head
L16H0 through the induction heads L17H3, L18H7: -3.3 nats per position on repeated tokens);
the pairs left out change no head's repeated-token estimate by more than 0.046 nats per position,
and none of its prose estimates by more than 0.006 (both on one batch of 60 and of 3 sequences,
against every pair recomputed).

The reconstruction of a layer's attention is checked by :mod:`interp.ablate.qk_check`;
everything here is a pure function of tensors a gradient pass kept (:class:`LayerInputs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from interp.ablate.qk_check import LayerInputs, QKModel, angles, live_keys, rotate, rotated

PAIR_SHARE = 0.1  # of the (earlier head, later head) pairs, those recomputed exactly (by score),
PAIR_FLOOR = 1000  # but at least this many (a small model's pairs are all cheap: all of them)
PAIRS_PER_CHUNK = 256  # pairs whose scores are held at once
TOKENS_PER_CHUNK = 512  # positions whose residual writes are held at once


@dataclass
class Upstream:
    """What every ablated head contributes to the later layers' norms, for one batch (heads
    flattened layer-major: index ``layer * n_heads + head``)."""

    dz: torch.Tensor  # [batch, pos, head_up, d_head]: the ablation's change of z (0 at padding)
    dx2: torch.Tensor  # [batch, pos, head_up]: |dz W_O|^2 (W_O centred for a LayerNorm)
    xdx: torch.Tensor  # [batch, pos, head_up, layer]: (dz W_O) . x_layer (the same centring)


def upstream(dz: list[torch.Tensor], model: QKModel, layers: list[LayerInputs]) -> Upstream:
    """The ablated heads' writes, reduced to what every later layer's norm needs."""
    W = _written_by(model)  # [head_up, d_head, d_model]
    flat = torch.stack(dz, dim=2).flatten(2, 3)  # [batch, pos, head_up, d_head]
    gram = torch.einsum("hdD,heD->hde", W, W)
    dx2 = torch.einsum("bthd,hde,bthe->bth", flat, gram, flat)
    resid = torch.stack([inputs.resid for inputs in layers], dim=2)  # [batch, pos, layer, d_model]
    xdx = torch.empty(*flat.shape[:3], len(layers))
    rows = max(1, TOKENS_PER_CHUNK // flat.shape[1])
    for start in range(0, flat.shape[0], rows):  # the writes [.., head_up, d_model] are large
        part = slice(start, start + rows)
        written = torch.einsum("bthd,hdD->bthD", flat[part], W)
        xdx[part] = torch.einsum("bthD,btlD->bthl", written, resid[part])
    return Upstream(flat, dx2, xdx)


def _written_by(model: QKModel) -> torch.Tensor:
    """Every head's output projection as the norms see it (centred for a LayerNorm)."""
    W_O = model.weights.W_O.flatten(0, 1)
    return W_O - W_O.mean(-1, keepdim=True) if model.norms[0].centred else W_O


# --- choosing the pairs -----------------------------------------------------------------------


class Composition:
    """``|C_q|^2 + |C_k|^2`` of every (earlier head, later head) pair, per later layer: weights
    only, so computed once per model and kept (``[head_up, head]`` per layer)."""

    def __init__(self, model: QKModel):
        self.model = model
        self.layers: dict[int, torch.Tensor] = {}

    def __getitem__(self, layer: int) -> torch.Tensor:
        if layer not in self.layers:
            gained = _written_by(self.model)[: layer * self.model.weights.W_Q.shape[1]]
            gained = gained * self.model.norms[layer].gain
            W_Q, W_K = self.model.weights.W_Q[layer], self.model.weights.W_K[layer]
            C_q = torch.einsum("hdD,qDe->hqde", gained, W_Q).pow(2).sum((-1, -2))
            C_k = torch.einsum("hdD,qDe->hqde", gained, W_K).pow(2).sum((-1, -2))
            group = W_Q.shape[0] // W_K.shape[0]
            self.layers[layer] = C_q + C_k.repeat_interleave(group, dim=1)
        return self.layers[layer]


def choose_pairs(
    composition: Composition,
    layers: list[LayerInputs],
    up: Upstream,
    leverage: list[torch.Tensor],
    share: float = PAIR_SHARE,
) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """later layer -> (earlier head index, later head) of the pairs recomputed exactly: the top
    ``share`` of every pair of the batch by score (module docstring); ``leverage``: per layer
    ``[head]``."""
    scores, where = [], []
    moved = up.dz.pow(2).sum(-1)  # [batch, pos, head_up]
    for layer in range(1, len(layers)):
        n_up = composition[layer].shape[0]
        r2 = layers[layer].scale.pow(2)  # [batch, pos, 1]
        size = (moved[:, :, :n_up] / r2).sum((0, 1))  # [head_up]
        score = size[:, None] * composition[layer] * leverage[layer][None, :]
        scores.append(score.flatten())
        where += [layer] * score.numel()
    flat = torch.cat(scores)
    keep = min(len(flat), max(PAIR_FLOOR, int(share * len(flat))))
    chosen = torch.topk(flat, keep).indices.sort().values
    layer_of = torch.tensor(where)[chosen]
    out = {}
    offset = 0
    for layer, score in zip(range(1, len(layers)), scores):
        mine = chosen[layer_of == layer] - offset
        n_heads = composition[layer].shape[1]
        if len(mine):
            out[layer] = (mine // n_heads, mine % n_heads)
        offset += score.numel()
    return out


def leverage(pattern_grad: torch.Tensor, valid: torch.Tensor, causal: bool) -> torch.Tensor:
    """``[head]``: summed over the batch's queries, the spread (max - min) of a functional's
    gradient with respect to the attention over the keys a query may see: the most a change of
    that head's attention could move the functional, per unit of attention moved."""
    live = live_keys(valid, causal)[:, None]
    high = pattern_grad.masked_fill(~live, float("-inf")).amax(-1)
    low = pattern_grad.masked_fill(~live, float("inf")).amin(-1)
    spread = (high - low).nan_to_num(0.0, posinf=0.0, neginf=0.0).clamp_min(0)
    return (spread * valid[:, None, :]).sum((0, 2))


# --- the correction ---------------------------------------------------------------------------


def correction(
    model: QKModel,
    layer: int,
    inputs: LayerInputs,
    up: Upstream,
    pairs: tuple[torch.Tensor, torch.Tensor],
    grads: list[torch.Tensor],
    valid: torch.Tensor,
    causal: bool,
) -> torch.Tensor:
    """``[functional, batch, head_up]``: the QK fix of the earlier heads through the heads of
    ``layer`` they are paired with (``pairs``: earlier head indices, later heads), for each
    functional whose gradient with respect to this layer's pattern is in ``grads``."""
    n_up = layer * inputs.q.shape[2]
    A = inputs.pattern
    sensitivity = [_sensitivity(model, layer, inputs, G) for G in grads]
    baseline = [(A * G).sum((-1, -2)) for G in grads]  # [batch, head]
    live = live_keys(valid, causal)
    free = _free(model, layer, inputs)
    out = torch.zeros(len(grads), valid.shape[0], n_up, dtype=torch.float64)
    ups, heads = pairs
    for start in range(0, len(ups), PAIRS_PER_CHUNK):
        part = slice(start, start + PAIRS_PER_CHUNK)
        u, h = ups[part], heads[part]
        changed = changed_attention(model, layer, inputs, up, u, h, live, sensitivity, free)
        for f, G in enumerate(grads):
            exact = torch.einsum("bpts,bpts->bp", changed.pattern, G[:, h]) - baseline[f][:, h]
            found = (exact - changed.linear[f]).double()
            out[f].index_add_(1, u, found)
    return out


@dataclass
class Sensitivity:
    """A functional's first-order sensitivity to one layer's queries and keys (pre-rotary),
    through its softmax; per query head (a key head's change reaches every head of its group)."""

    g_q: torch.Tensor  # [batch, pos, head, d_head]: with respect to the queries
    g_k: torch.Tensor  # [batch, pos, head, d_head]: with respect to the keys each head reads
    qb_g: torch.Tensor  # [batch, pos, head]: (q - b) . g_q
    kb_g: torch.Tensor  # [batch, pos, head]: (k - b) . g_k


def _sensitivity(model: QKModel, layer: int, inputs: LayerInputs, G: torch.Tensor) -> Sensitivity:
    A, scale = inputs.pattern, model.scales[layer]
    rq, rk = rotated(inputs)
    group = rq.shape[2] // rk.shape[2]
    rk = rk.repeat_interleave(group, dim=2)
    G_s = A * (G - (A * G).sum(-1, keepdim=True))  # with respect to the scores
    g_q = scale * torch.einsum("bhts,bshd->bthd", G_s, rk)
    g_k = scale * torch.einsum("bhts,bthd->bshd", G_s, rq)
    if model.rotary:  # a rotation's transpose turns by minus the angle
        cos, sin = angles(inputs)
        g_q = rotate(g_q, cos, -sin, model.rotary)
        g_k = rotate(g_k, cos, -sin, model.rotary)
    q_b, k_b = _unbiased(model, layer, inputs)
    return Sensitivity(
        g_q, g_k, (q_b * g_q).sum(-1), (k_b.repeat_interleave(group, dim=2) * g_k).sum(-1)
    )


def _free(model: QKModel, layer: int, inputs: LayerInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """The residual's share of the queries and keys, ``(q - b, k - b)``, as the scores see them
    (rotated in a rotary model)."""
    q_b, k_b = _unbiased(model, layer, inputs)
    if model.rotary:
        cos, sin = angles(inputs)
        q_b = rotate(q_b, cos, sin, model.rotary)
        k_b = rotate(k_b, cos, sin, model.rotary)
    return q_b, k_b


def _unbiased(model: QKModel, layer: int, inputs: LayerInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Queries and keys minus what the projections add whatever the residual (the norm's bias
    through them, and their own): ``r (q - b)`` is the residual's share, ``gain x W_Q``."""
    weights, norm = model.weights, model.norms[layer]
    q_b = inputs.q - (norm.bias @ weights.W_Q[layer] + weights.b_Q[layer])
    k_b = inputs.k - (norm.bias @ weights.W_K[layer] + weights.b_K[layer])
    return q_b, k_b


@dataclass
class Changed:
    """What ablating an earlier head does to a later head, for a list of pairs."""

    pattern: torch.Tensor  # [batch, pair, q, k]: the later head's exact attention
    linear: list[torch.Tensor]  # per functional [batch, pair]: the first-order term it replaces


def changed_attention(
    model: QKModel,
    layer: int,
    inputs: LayerInputs,
    up: Upstream,
    ups: torch.Tensor,
    heads: torch.Tensor,
    live: torch.Tensor,
    sensitivity: Sequence[Sensitivity] = (),
    free: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> Changed:
    """For each pair (earlier head ``ups[i]``, head ``heads[i]`` of ``layer``): the later head's
    attention with the earlier head ablated along the direct path (norm, projections, rotary
    embedding and softmax exact), and each functional's first-order change through it."""
    weights, norm, scale = model.weights, model.norms[layer], model.scales[layer]
    rq, rk = rotated(inputs)
    group = rq.shape[2] // rk.shape[2]
    kv = heads // group
    gained = _written_by(model)[ups] * norm.gain  # [pair, d_head, d_model]
    C_q = torch.einsum("pdD,pDe->pde", gained, weights.W_Q[layer][heads])
    C_k = torch.einsum("pdD,pDe->pde", gained, weights.W_K[layer][kv])
    dz, dx2, xdx = up.dz[:, :, ups], up.dx2[:, :, ups], up.xdx[:, :, ups, layer]
    r = inputs.scale  # [batch, pos, 1]
    d_model = inputs.resid.shape[-1]
    r_new = torch.sqrt((r**2 + (2 * xdx + dx2) / d_model).clamp_min(1e-30))  # the exact divisor
    z_q = torch.einsum("btpd,pde->btpe", dz, C_q)
    z_k = torch.einsum("btpd,pde->btpe", dz, C_k)
    q_b, k_b = free if free is not None else _free(model, layer, inputs)
    q_b, k_b = q_b[:, :, heads], k_b[:, :, kv]  # [batch, pos, pair, d_head]
    moved_q, moved_k = z_q, z_k
    if model.rotary:
        moved_q = _rotate_product(z_q, dz, C_q, inputs, model.rotary)
        moved_k = _rotate_product(z_k, dz, C_k, inputs, model.rotary)
    # exact: q' = (r (q - b) + dz C) / r' + b, so q' - q = (r / r' - 1)(q - b) + dz C / r'
    ratio = (r / r_new - 1)[..., None]  # [batch, pos, pair, 1]
    q_new = torch.addcmul(rq[:, :, heads], ratio, q_b).addcdiv_(moved_q, r_new[..., None])
    k_new = torch.addcmul(rk[:, :, kv], ratio, k_b).addcdiv_(moved_k, r_new[..., None])
    scores = scale * torch.einsum("btpd,bspd->bpts", q_new, k_new)
    pattern = torch.softmax(scores.masked_fill(~live[:, None], float("-inf")), -1)
    # first order: the divisor moves by -x.dx / (d r^2) of itself, and q by that times (q - b)
    first = -xdx / (d_model * r**2)  # [batch, pos, pair]
    inv_r = 1 / r[..., None]
    linear = [
        torch.einsum("btpd,btpd->bp", z_q, s.g_q[:, :, heads] * inv_r)
        + torch.einsum("btp,btp->bp", first, s.qb_g[:, :, heads])
        + torch.einsum("btpd,btpd->bp", z_k, s.g_k[:, :, heads] * inv_r)
        + torch.einsum("btp,btp->bp", first, s.kb_g[:, :, heads])
        for s in sensitivity
    ]
    return Changed(pattern.nan_to_num(0.0), linear)


def _rotate_product(
    z: torch.Tensor, dz: torch.Tensor, C: torch.Tensor, inputs: LayerInputs, kind: str
) -> torch.Tensor:
    """The rotary embedding of ``z = dz C`` ``[batch, pos, pair, d_head]``, its quarter turn taken
    through ``C P`` (a matrix product; ``P`` only moves and negates columns) rather than by
    moving the entries of ``z``."""
    cos, sin = angles(inputs)
    dims = cos.shape[-1]
    part = C[..., :dims]
    if kind == "half":
        a, b = part.chunk(2, dim=-1)
        turned = torch.cat((-b, a), dim=-1)
    else:
        pairs = part.unflatten(-1, (-1, 2))
        turned = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)
    if dims < z.shape[-1]:  # a partial rotary model: the other dims turn by angle 0
        pad = z.shape[-1] - dims
        turned = torch.cat((turned, torch.zeros(*turned.shape[:-1], pad)), dim=-1)
        cos = torch.cat((cos, torch.ones(*cos.shape[:-1], pad)), dim=-1)
        sin = torch.cat((sin, torch.zeros(*sin.shape[:-1], pad)), dim=-1)
    shape = (cos.shape[0], cos.shape[1], 1, cos.shape[-1])
    z_turned = torch.einsum("btpd,pde->btpe", dz, turned)
    return z * cos.reshape(shape) + z_turned * sin.reshape(shape)

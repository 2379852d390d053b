"""What the QK fix (:mod:`interp.ablate.qk_fix`) needs of a model, read off and checked on its
first batch: the norm before each layer's attention (its kind, gain and bias), the query and key
projections, the rotary embedding, the score scale, and that the attention pattern is the softmax
of the scores over the keys a query may see. Where any of these does not hold (a post-norm encoder
whose hooks only observe the pattern, attention logits that are capped, an unknown rotary
embedding), :func:`check` says why in one phrase and the estimate stays first order.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from interp.model.lens import QKWeights

CHECK_TOLERANCE = 1e-3  # relative error allowed where the model's own tensors are reconstructed


@dataclass
class LayerInputs:
    """One layer's attention inputs from the intact pass (detached).

    Shapes use batch, pos, head, kv_head (the key-value heads), d_head, d_model."""

    resid: torch.Tensor  # [batch, pos, d_model]: entering the block
    normalized: torch.Tensor  # [batch, pos, d_model]: the norm's output before its gain
    scale: torch.Tensor  # [batch, pos, 1]: the norm's divisor
    attn_in: torch.Tensor  # [batch, pos, d_model]: what queries and keys are read from
    q: torch.Tensor  # [batch, pos, head, d_head] before rotary embedding
    k: torch.Tensor  # [batch, pos, kv_head, d_head]
    rot_q: torch.Tensor | None  # after rotary embedding (rotary models)
    rot_k: torch.Tensor | None
    cos: torch.Tensor | None  # [1 or batch, pos, rotary dims]
    sin: torch.Tensor | None
    scores: torch.Tensor  # [batch, head, q, k]
    pattern: torch.Tensor  # [batch, head, q, k]


@dataclass(frozen=True)
class Norm:
    """The norm before attention: ``attn_in = gain * normalized + bias``, ``normalized`` the
    residual (centred first when ``centred``: a LayerNorm; not: an RMSNorm) over ``scale``."""

    centred: bool
    gain: torch.Tensor  # [d_model]
    bias: torch.Tensor  # [d_model]


@dataclass(frozen=True)
class QKModel:
    """What the recomputation needs of a model, checked on its first batch (:func:`check`)."""

    weights: QKWeights
    norms: tuple[Norm, ...]  # per layer
    scales: tuple[float, ...]  # per layer: scores = scale * q . k
    rotary: str | None  # None, "half" (Llama, NeoX) or "interleaved" (GPT-J)


def live_keys(valid: torch.Tensor, causal: bool) -> torch.Tensor:
    """bool ``[batch, q, k]``: the keys each query may attend to (padding masked; causal: not ahead)."""
    n = valid.shape[1]
    live = valid[:, None, :].expand(-1, n, -1)
    if causal:
        live = live & torch.ones(n, n, dtype=torch.bool, device=valid.device).tril()
    return live


def check(
    layers: list[LayerInputs],
    patterns_live: bool,
    weights: QKWeights,
    valid: torch.Tensor,
    causal: bool,
) -> QKModel | str:
    """The model's recomputation, or why it cannot be done on this model (one phrase)."""
    if len(layers) < 2:
        return "a one-layer model has no later head"
    if not patterns_live:
        return "the model does not compute with the attention pattern it exposes"
    norms, scales, rotary = [], [], None
    for layer, inputs in enumerate(layers):
        norm = fit_norm(inputs, valid)
        if isinstance(norm, str):
            return f"layer {layer}: {norm}"
        q = torch.einsum("btD,hDe->bthe", inputs.attn_in, weights.W_Q[layer]) + weights.b_Q[layer]
        k = torch.einsum("btD,hDe->bthe", inputs.attn_in, weights.W_K[layer]) + weights.b_K[layer]
        if not (_close(q, inputs.q, valid) and _close(k, inputs.k, valid)):
            return f"layer {layer}: queries or keys are not the projections of the attention input"
        if inputs.rot_q is not None:
            rotary = rotary or _rotary_kind(inputs, valid)
            if rotary is None:
                return f"layer {layer}: the rotary embedding is of an unknown kind"
        scale = _score_scale(inputs, valid, causal)
        if isinstance(scale, str):
            return f"layer {layer}: {scale}"
        norms.append(norm)
        scales.append(scale)
    if len({norm.centred for norm in norms}) > 1:
        return "its layers normalise the residual in different ways"
    return QKModel(weights, tuple(norms), tuple(scales), rotary)


def fit_norm(inputs: LayerInputs, valid: torch.Tensor) -> Norm | str:
    """The norm's kind, gain and bias, read off the intact pass (a least-squares fit per feature
    of ``attn_in`` on ``normalized`` over the batch's tokens), or why it is not such a norm."""
    x, n, r = inputs.resid[valid], inputs.normalized[valid], inputs.scale[valid]
    if len(x) < 2:
        return "too few tokens to read the norm"
    centred = _close((x - x.mean(-1, keepdim=True)) / r, n)
    if not centred and not _close(x / r, n):
        return "the attention does not read a norm of the residual entering the block"
    out = inputs.attn_in[valid]
    n_mean, o_mean = n.mean(0), out.mean(0)
    spread = ((n - n_mean) ** 2).sum(0)
    gain = ((n - n_mean) * (out - o_mean)).sum(0) / spread.clamp_min(1e-30)
    bias = o_mean - gain * n_mean
    if not _close(n * gain + bias, out):
        return "the norm is not a gain and a bias on the normalised residual"
    return Norm(bool(centred), gain, bias)


def _close(ours: torch.Tensor, theirs: torch.Tensor, valid: torch.Tensor | None = None) -> bool:
    if valid is not None:
        ours, theirs = ours[valid], theirs[valid]
    scale = float(theirs.abs().max()) if theirs.numel() else 0.0
    return bool((ours - theirs).abs().max() <= CHECK_TOLERANCE * max(scale, 1e-6))


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, kind: str) -> torch.Tensor:
    """Rotary embedding of ``x`` ``[batch, pos, ..., d_head]`` by ``cos``/``sin`` ``[1 or batch,
    pos, rotary dims]`` (dims beyond them, in a partial rotary model, pass unchanged)."""
    dims = cos.shape[-1]
    shape = (cos.shape[0], cos.shape[1]) + (1,) * (x.dim() - 3) + (dims,)
    c, s = cos.reshape(shape), sin.reshape(shape)
    part, rest = x[..., :dims], x[..., dims:]
    if kind == "half":
        a, b = part.chunk(2, dim=-1)
        turned = torch.cat((-b, a), dim=-1)
    else:
        pairs = part.unflatten(-1, (-1, 2))
        turned = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)
    return torch.cat((part * c + turned * s, rest), dim=-1)


def angles(inputs: LayerInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """The rotary embedding's cosines and sines, which a rotary model's inputs always carry."""
    if inputs.cos is None or inputs.sin is None:
        raise ValueError("these layer inputs carry no rotary angles: the model is not rotary")
    return inputs.cos, inputs.sin


def _rotary_kind(inputs: LayerInputs, valid: torch.Tensor) -> str | None:
    if inputs.rot_q is None or inputs.cos is None or inputs.sin is None:
        return None
    for kind in ("half", "interleaved"):
        if _close(rotate(inputs.q, inputs.cos, inputs.sin, kind), inputs.rot_q, valid):
            return kind
    return None


def rotated(inputs: LayerInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """The queries and keys as the scores read them (after the rotary embedding, if any)."""
    if inputs.rot_q is None or inputs.rot_k is None:
        return inputs.q, inputs.k
    return inputs.rot_q, inputs.rot_k


def _score_scale(inputs: LayerInputs, valid: torch.Tensor, causal: bool) -> float | str:
    """The factor between ``q . k`` and the scores, checked with the softmax against the pattern."""
    rq, rk = rotated(inputs)
    group = rq.shape[2] // rk.shape[2]
    dot = torch.einsum("bthd,bshd->bhts", rq, rk.repeat_interleave(group, dim=2))
    live = live_keys(valid, causal)[:, None].expand_as(dot)
    scores = inputs.scores[live]
    scale = float((scores * dot[live]).sum() / (dot[live] ** 2).sum().clamp_min(1e-30))
    if not _close(scale * dot[live], scores):
        return "the scores are not a scaled product of queries and keys"
    pattern = torch.softmax(inputs.scores.masked_fill(~live, float("-inf")), -1).nan_to_num(0.0)
    if not _close(pattern, inputs.pattern):
        return "the attention pattern is not the softmax of the scores over the keys it may see"
    return scale

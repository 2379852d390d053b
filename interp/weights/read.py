"""Every head's weights, read from a model in the layout the weight scores need, norms folded.

Layout (TransformerLens', row vectors: a head reads ``x @ W``):

- ``w_q`` ``[layer, head, d_model, d_head]``; ``w_k`` and ``w_v`` ``[layer, kv_head, d_model,
  d_head]``; ``w_o`` ``[layer, head, d_head, d_model]``. A grouped-query model keeps each
  key-value head once: query head ``h`` reads key-value head ``h // (n_heads // n_kv_heads)``,
  the grouping transformers' ``repeat_kv`` uses (:meth:`HeadWeights.kv`).
- **Norms folded** (pre-norm models): a head reads ``ln1(x) = g * C x / rms(C x) + b``, where
  ``C`` centres ``x`` for a LayerNorm and is the identity for an RMSNorm. ``C`` and the scale
  ``g`` go into the weights that read the residual stream (``C diag(g) W`` for ``w_q``, ``w_k``
  and ``w_v``); the division by the norm depends on the input and is the caller's (token
  embeddings are normalised before they are read, :func:`normalise`; composition scores are
  ratios and do not see it); the bias adds the same vector for every token and is dropped.
  The final norm is folded into the unembedding the same way, and a norm on what attention
  writes (Gemma 2 and 3's post-attention norm) into ``w_o``.
- **Encoders** are post-norm (BERT: the norm follows the residual addition, so it acts on what
  every earlier head wrote together): nothing is folded, and :attr:`HeadWeights.folded` says so.

Each norm's scale is read by running the norm itself on two vectors of +-1 (mean 0, so that
centring leaves them alone): ``g = (ln(x) - ln(-x)) / (2 x / rms(x))``. That reads any
parametrisation the same way (Gemma's ``1 + w``, OLMo's norm without weights) without knowing
it; whether the norm centres is read the same way (``ln(1) = ln(-1)`` only if it does).

The embedding and unembedding are read where the model has them (:func:`read_vocabulary`);
where it has not, the reason is kept, and the scores that need them are NaN with that reason.
Everything is read into float32 CPU tensors, wherever the model runs: the scores are the same
numbers on any device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float

from interp.model import lens

Tensor = torch.Tensor


@dataclass(frozen=True)
class Norm:
    """What a norm does apart from dividing by the norm of its input: ``x -> C x * scale``."""

    scale: Float[Tensor, " d_model"]
    centres: bool  # a LayerNorm (subtracts the mean); False for an RMSNorm

    def fold(self, w: Float[Tensor, "... d_model d_head"]) -> Tensor:
        """``C diag(scale) w``: the weights that read the normed residual, reading it raw."""
        w = self.scale[:, None] * w
        return w - w.mean(-2, keepdim=True) if self.centres else w


@dataclass(frozen=True)
class HeadWeights:
    """Every head's float32 weights (see the module doc for the layout and what is folded)."""

    w_q: Float[Tensor, "layer head d_model d_head"]
    w_k: Float[Tensor, "layer kv_head d_model d_head"]
    w_v: Float[Tensor, "layer kv_head d_model d_head"]
    w_o: Float[Tensor, "layer head d_head d_model"]
    centres: bool  # the heads' norm centres its input (LayerNorm): read inputs centred
    folded: str  # what was folded into the weights, in words (for the manifest)

    @property
    def n_layers(self) -> int:
        return self.w_q.shape[0]

    @property
    def n_heads(self) -> int:
        return self.w_q.shape[1]

    @property
    def group(self) -> int:
        """Query heads per key-value head."""
        return self.w_q.shape[1] // self.w_k.shape[1]

    def kv(self, head: int) -> int:
        """The key-value head query head ``head`` reads."""
        return head // self.group

    def per_query(self, w: Float[Tensor, "layer kv_head ..."]) -> Tensor:
        """Key-value weights repeated to one slice per query head ``[layer, head, ...]``."""
        return w.repeat_interleave(self.group, dim=1)


def read_heads(model: Any) -> HeadWeights:
    """The heads' weights of a LoadedModel, norms folded where the model is pre-norm."""
    bridge = model.bridge
    with torch.no_grad():
        w_q, w_k, w_v, w_o = (
            getattr(bridge, name).detach().float().cpu() for name in ("W_Q", "W_K", "W_V", "W_O")
        )
        if not model.causal:
            return HeadWeights(
                w_q, w_k, w_v, w_o, False, "nothing: post-norm encoder (the norm follows the sum)"
            )
        found = [block_norm(block, "ln1", w_q.shape[2]) for block in bridge.blocks]
        norms = [n for n in found if n is not None]
        if len(norms) < len(found):
            return HeadWeights(w_q, w_k, w_v, w_o, False, "nothing: a block has no input norm")
        w_q = torch.stack([n.fold(w) for n, w in zip(norms, w_q)])
        w_k = torch.stack([n.fold(w) for n, w in zip(norms, w_k)])
        w_v = torch.stack([n.fold(w) for n, w in zip(norms, w_v)])
        folded = "each layer's input norm (scale, centring) into W_Q, W_K, W_V"
        posts = [block_norm(block, "ln1_post", w_q.shape[2]) for block in bridge.blocks]
        if all(p is not None for p in posts):
            w_o = torch.stack([w * p.scale for p, w in zip(posts, w_o) if p is not None])
            folded += "; the post-attention norm's scale into W_O"
    return HeadWeights(w_q, w_k, w_v, w_o, norms[0].centres, folded)


def block_norm(owner: Any, name: str, d_model: int) -> Norm | None:
    """The norm ``name`` of a block (or of the bridge: ``ln_final``) read as a :class:`Norm`, or
    None where there is none."""
    module = getattr(owner, name, None)
    return read_norm(module, d_model) if isinstance(module, torch.nn.Module) else None


def read_norm(module: Any, d_model: int) -> Norm:
    """Scale and centring of a norm module, read by running it (see the module doc)."""
    x = torch.tensor([(-1.0) ** i for i in range(d_model)])
    if d_model % 2:
        x[-1] = 0.0  # mean 0 for an odd width too; the rolled copy covers the last entry
    probes = torch.stack([x, x.roll(1)])  # [2, d_model]: each entry is +-1 in one probe at least
    unit = probes / probes.pow(2).mean(-1, keepdim=True).sqrt()
    param = next(module.parameters(), None)
    dtype, device = (torch.float32, "cpu") if param is None else (param.dtype, param.device)
    with torch.no_grad():

        def run(v: Tensor) -> Tensor:
            return module(v[None].to(device, dtype)).float().cpu()[0]

        per_probe = (run(probes) - run(-probes)) / 2 / unit.where(unit != 0, 1.0)
        scale = torch.where(probes[0] != 0, per_probe[0], per_probe[1])
        ones = torch.ones(1, d_model)
        gap = float((run(ones) - run(-ones)).abs().max())
    return Norm(scale, gap <= 1e-3 * max(float(scale.abs().max()), 1e-12))


def normalise(x: Float[Tensor, "n d_model"], centres: bool) -> Tensor:
    """Rows as a norm sees them before its scale: centred (LayerNorm) and of root-mean-square 1;
    a zero row stays zero."""
    x = x - x.mean(-1, keepdim=True) if centres else x
    rms = x.pow(2).mean(-1, keepdim=True).sqrt()
    return x / rms.where(rms > 0, 1.0)


@dataclass(frozen=True)
class Vocabulary:
    """The token embedding and the unembedding a head's OV circuit is read through, or why not.

    ``unembed`` is ``[d_model, d_vocab_out]`` with the final norm folded in (scale and centring);
    ``missing`` is empty when both were read, else the reason the scores that need them are NaN.
    """

    embed: Float[Tensor, "d_vocab d_model"] | None
    unembed: Float[Tensor, "d_model d_vocab_out"] | None
    tied: bool | None  # the unembedding is the embedding transposed (None: not both read)
    missing: str = ""


def read_vocabulary(model: Any) -> Vocabulary:
    """The model's embedding and folded unembedding (see :class:`Vocabulary`).

    An encoder's output head is not read: a masked-LM head is a dense layer, an activation and a
    norm before its decoder, not a linear readout of the residual stream, and the packaged
    MiniLM's is random (its checkpoint has none)."""
    if not model.causal:
        return Vocabulary(
            None,
            None,
            None,
            "an encoder: its masked-LM head is no linear readout of the residual stream (and "
            "MiniLM's is random), so no token is read through an unembedding",
        )
    bridge = model.bridge
    embed, unembed = _tensor(bridge, "embed", "W_E"), _tensor(bridge, "unembed", "W_U")
    if embed is None or unembed is None:
        which = "embedding (W_E)" if embed is None else "unembedding (W_U)"
        return Vocabulary(None, None, None, f"the model exposes no {which} to read")
    d_model = embed.shape[1]
    if unembed.shape[0] != d_model:
        return Vocabulary(
            None, None, None, f"the unembedding's shape {tuple(unembed.shape)} does not match"
        )
    tied = embed.shape[0] >= unembed.shape[1] and bool(
        torch.equal(embed[: unembed.shape[1]].T, unembed)
    )
    final = block_norm(bridge, "ln_final", d_model)
    if final is not None:
        unembed = final.fold(unembed)
    return Vocabulary(embed, unembed, tied)


def _tensor(bridge: Any, component: str, name: str) -> Tensor | None:
    """``bridge.<component>.<name>`` as a detached float tensor, or None where it cannot be read."""
    try:
        value = getattr(getattr(bridge, component), name)
    except (AttributeError, NotImplementedError, TypeError, RuntimeError):
        return None
    return value.detach().float().cpu() if isinstance(value, Tensor) else None


@dataclass(frozen=True)
class TokenInputs:
    """What a head attending to a token reads there, before its own norm: ``first`` for the
    heads of layer 0 (the token's embedding), ``later`` for every later layer (the effective
    embedding, see :func:`token_inputs`); ``how`` says which in words."""

    first: Float[Tensor, "n d_model"]
    later: Float[Tensor, "n d_model"]
    how: str


def token_inputs(model: Any, ids: Tensor, chunk: int = 1024) -> TokenInputs:
    """The embedding of ``ids`` as block 0 receives it (``bridge.embed``: a scaled embedding
    stays scaled), and their *effective embedding* ``e + MLP0(ln2(e))``: what the residual
    stream holds at a token once the first MLP has run, as the literature reads a trained
    model's tokens (the first MLP acts as a second embedding: McDougall et al. 2023, Gould et al.
    2023). Layer 0's attention is left out of it (a token attending to itself would add its
    own OV output; how much depends on the context). Positions are left out (GPT-2's learned
    position embedding is added to every token alike)."""
    bridge = model.bridge
    block = bridge.blocks[0]
    mlp = getattr(block, "mlp", None)
    norm = next(
        (
            getattr(block, n)
            for n in ("ln2", "ln1")
            if isinstance(getattr(block, n, None), torch.nn.Module)
        ),
        None,
    )
    firsts, laters = [], []
    with torch.no_grad():
        for part in ids.split(chunk):
            e = bridge.embed(part[None].to(model.device)).float()[0]
            firsts.append(e.cpu())
            if isinstance(mlp, torch.nn.Module) and norm is not None:
                dtype = lens.first_param(bridge).dtype
                e = e + mlp(norm(e[None].to(dtype))).float()[0]
            laters.append(e.cpu())
    how = (
        "layer 0 reads the token embedding; later layers the effective embedding e + MLP0(ln(e))"
        if isinstance(mlp, torch.nn.Module) and norm is not None
        else "every layer reads the token embedding (block 0 has no MLP to read it through)"
    )
    return TokenInputs(torch.cat(firsts), torch.cat(laters), how)

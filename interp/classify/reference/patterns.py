"""Synthetic attention patterns: one builder per archetype and per null behaviour.

Each builder maps a batch's :class:`~interp.collect.features.FeatureContext` to a pattern
``float [batch, q, k]`` whose rows are distributions over the keys the query may see (rows of
padding queries are zero). A bank head mixes several of them with per-query weights
(:func:`mix`), which is how real heads look: a previous-token head that parks the rest of its
mass on BOS, an induction head that falls back to BOS when there is nothing to copy.

Where a builder's target does not exist for a query (no earlier copy, no delimiter in view, no
arc), the query falls back to ``fallback``: ``bos`` (the sink real heads use), ``self`` or
``uniform``. Builders are pure: the same context and arguments give the same pattern, except
the null builders marked random, which draw from the generator they are handed.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from interp.collect.features import FeatureContext

FALLBACKS = ("bos", "self", "uniform")


def _rows(ctx: FeatureContext) -> Tensor:
    return ctx.allowed.float()


def _uniform(ctx: FeatureContext, keys: Tensor | None = None) -> Tensor:
    """Uniform over allowed keys (and ``keys`` bool [batch, q, k] if given); zero rows stay zero."""
    mass = _rows(ctx) if keys is None else (ctx.allowed & keys).float()
    return mass / mass.sum(-1, keepdim=True).clamp(min=1e-12)


def _fallback(ctx: FeatureContext, kind: str) -> Tensor:
    n, width = ctx.allowed.shape[:2]
    if kind == "uniform":
        return _uniform(ctx)
    if kind == "self":
        out = torch.eye(width).expand(n, width, width).clone()
    elif kind == "bos":
        out = torch.zeros(n, width, width)
        out[..., 0] = 1.0
    else:
        raise ValueError(f"fallback must be one of {FALLBACKS}, got {kind!r}")
    return out * ctx.allowed


def _targets(ctx: FeatureContext, keys: Tensor, fallback: str) -> Tensor:
    """Uniform over target ``keys`` bool [batch, q, k] where a query has any, else the fallback."""
    keys = keys & ctx.allowed
    has = keys.any(-1, keepdim=True)
    return torch.where(has, _uniform(ctx, keys), _fallback(ctx, fallback))


def _offset_keys(ctx: FeatureContext, offsets: Tensor) -> Tensor:
    """bool [1, q, k]: k - q in ``offsets``."""
    width = ctx.allowed.shape[-1]
    diff = torch.arange(width)[None, :] - torch.arange(width)[:, None]  # k - q
    return torch.isin(diff, offsets)[None]


# --- archetypes --------------------------------------------------------------------------


def offset(ctx: FeatureContext, delta: int, fallback: str = "self") -> Tensor:
    """All mass on q + delta: previous token (-1), current token (0), next token (+1)."""
    return _targets(ctx, _offset_keys(ctx, torch.tensor([delta])).expand_as(ctx.allowed), fallback)


def first(ctx: FeatureContext) -> Tensor:
    """The attention sink: all mass on position 0 (BOS / [CLS])."""
    return _fallback(ctx, "bos")


def delimiter(ctx: FeatureContext, how: str = "all", fallback: str = "bos") -> Tensor:
    """Mass on punctuation / [SEP] keys: ``all`` of them, the ``nearest`` one, or the ``sep`` only."""
    width = ctx.allowed.shape[-1]
    keys = ctx.batch.is_delim[:, None, :] & ~torch.eye(width, dtype=torch.bool)
    if how == "sep":
        keys = keys & ctx.batch.is_special[:, None, :]
    elif how == "nearest":
        distance = (torch.arange(width)[None, :] - torch.arange(width)[:, None]).abs().float()
        distance = torch.where(keys & ctx.allowed, distance, torch.inf)
        nearest = distance.argmin(-1, keepdim=True)
        keys = keys & torch.zeros_like(keys).scatter_(-1, nearest, True)
    elif how != "all":
        raise ValueError(f"delimiter how must be all | nearest | sep, got {how!r}")
    return _targets(ctx, keys, fallback)


def _earlier(ctx: FeatureContext) -> Tensor:
    return ctx.allowed & torch.ones_like(ctx.allowed[0]).tril(-1)


def duplicate(ctx: FeatureContext, fallback: str = "bos", self_share: float = 0.0) -> Tensor:
    """Mass on earlier copies of the query's token; with ``self_share``, that much of it on the
    query itself too (a token matches itself: real duplicate-token heads often keep some there)."""
    tok = ctx.batch.tokens
    keys = _earlier(ctx) & (tok[:, :, None] == tok[:, None, :]) & ctx.content[:, None, :]
    out = _targets(ctx, keys, fallback)
    if self_share > 0:
        width = ctx.allowed.shape[-1]
        has = keys.any(-1, keepdim=True)
        itself = torch.eye(width).expand_as(out) * ctx.allowed
        out = torch.where(has, (1 - self_share) * out + self_share * itself, out)
    return out


def same_token(ctx: FeatureContext) -> Tensor:
    """Uniform over the query itself and its earlier copies: a head whose query-key circuit
    matches equal tokens, which a token's own position matches as well as any copy does (the
    duplicate-token heads of models trained to spot repeats look like this). Its share on the
    query falls as copies accumulate (1 / (copies + 1)), and a token seen for the first time
    attends to itself."""
    tok = ctx.batch.tokens
    width = ctx.allowed.shape[-1]
    copies = _earlier(ctx) & (tok[:, :, None] == tok[:, None, :]) & ctx.content[:, None, :]
    return _targets(ctx, copies | torch.eye(width, dtype=torch.bool), "self")


def induction(ctx: FeatureContext, fallback: str = "bos") -> Tensor:
    """Mass on the token after an earlier copy of the query's token."""
    tok = ctx.batch.tokens
    prev = torch.roll(tok, 1, dims=1)
    prev_content = torch.roll(ctx.content, 1, dims=1)
    prev_content[:, 0] = False
    keys = _earlier(ctx) & (tok[:, :, None] == prev[:, None, :]) & prev_content[:, None, :]
    return _targets(ctx, keys, fallback)


def syntactic(
    ctx: FeatureContext,
    slots: tuple[int, ...],
    fallback: str = "bos",
    hit: float = 1.0,
    seed: int = 0,
) -> Tensor:
    """Arc queries of the chosen feature slots (relation * 2 + direction) attend to their gold word.

    A share ``1 - hit`` of the arcs (drawn with ``seed``) attend to a word next to the gold one
    instead: a near miss, the error real syntactic heads make.
    """
    keys = torch.zeros_like(ctx.allowed)
    chosen = torch.isin(ctx.arc_slot, torch.tensor(slots, dtype=torch.long))
    if chosen.any():
        b, q, gold = ctx.arc_batch[chosen], ctx.arc_query[chosen], ctx.arc_gold[chosen]
        target = torch.stack([ctx.batch.word_pos[int(i)][int(g)] for i, g in zip(b, gold)])
        if hit < 1.0:
            gen = torch.Generator().manual_seed(seed)
            miss = torch.rand(len(b), generator=gen) >= hit
            side = torch.where(torch.rand(len(b), generator=gen) < 0.5, -1, 1)
            for sign in (side, -side):  # the other side when the first neighbour is no word
                near = target + sign
                ok = (near >= 0) & (near < ctx.allowed.shape[-1]) & (near != q)
                ok &= (
                    ctx.content[b, near.clamp(0, ctx.allowed.shape[-1] - 1)]
                    & ctx.allowed[b, q, near.clamp(0, ctx.allowed.shape[-1] - 1)]
                )
                move = miss & ok
                target = torch.where(move, near, target)
                miss &= ~move
            b, q, target = b[~miss], q[~miss], target[~miss]
        keys[b, q, target] = True
        first_only = (
            keys.cumsum(-1).cumsum(-1) == 1
        )  # a query that is in two arcs keeps one partner
        keys &= first_only
    return _targets(ctx, keys, fallback)


def local(ctx: FeatureContext, window: int = 3, decay: float = 1.0) -> Tensor:
    """Mass spread over the ``window`` content keys before q (either side in an encoder), weight
    decay**(d-1); queries with no such key attend to themselves."""
    width = ctx.allowed.shape[-1]
    d = torch.arange(width)[:, None] - torch.arange(width)[None, :]  # q - k
    if not ctx.batch.causal:
        d = d.abs()
    near = (d >= 1) & (d <= window)
    weights = torch.where(near, decay ** (d.float() - 1), 0.0)[None] * (
        ctx.allowed & ctx.content[:, None, :]
    )
    has = weights.sum(-1, keepdim=True) > 0
    return torch.where(
        has, weights / weights.sum(-1, keepdim=True).clamp(min=1e-12), _fallback(ctx, "self")
    )


def broad(ctx: FeatureContext, content_only: bool = False) -> Tensor:
    """Uniform attention over every visible key (or every visible content key)."""
    if content_only:
        return _targets(ctx, ctx.content[:, None, :].expand_as(ctx.allowed), "uniform")
    return _uniform(ctx)


def position(
    ctx: FeatureContext, k: int | None = None, from_end: int | None = None, fallback: str = "bos"
) -> Tensor:
    """All mass on one fixed position: absolute ``k``, or ``from_end`` before the last token;
    queries that cannot see it use the fallback."""
    n, width = ctx.allowed.shape[:2]
    if from_end is not None:
        target = ctx.batch.lengths - 1 - from_end
    elif k is not None:
        target = torch.full((n,), k)
    else:
        raise ValueError("a fixed-position pattern needs k or from_end")
    keys = torch.arange(width)[None, None, :] == target[:, None, None]
    return _targets(ctx, keys.expand_as(ctx.allowed), fallback)


# --- nulls: behaviours no archetype describes ----------------------------------------------


def far_offset(ctx: FeatureContext, delta: int, fallback: str = "bos") -> Tensor:
    """All mass on a fixed distance beyond the local window (q - delta; q + delta when delta < 0)."""
    return offset(ctx, -delta, fallback)


def token_class(ctx: FeatureContext, modulus: int, residue: int, fallback: str = "bos") -> Tensor:
    """Uniform over keys whose token id falls in an arbitrary class (id % modulus == residue)."""
    keys = (ctx.batch.tokens % modulus == residue)[:, None, :] & ctx.content[:, None, :]
    return _targets(ctx, keys.expand_as(ctx.allowed), fallback)


def frequent(ctx: FeatureContext, sigma: float, seed: int, fallback: str = "bos") -> Tensor:
    """On the keys of the corpus's frequent token types (interp.probes.frequent) other than q,
    each type weighted by its own log-normal preference exp(sigma * N(0, 1)) drawn from ``seed``
    (a real head favours some of them: ``.`` over ``the``), else the fallback."""
    width = ctx.allowed.shape[-1]
    frequent_keys = (ctx.batch.frequent_rank >= 0)[:, None, :]
    keys = frequent_keys & ctx.allowed & ~torch.eye(width, dtype=torch.bool)
    vocab = int(ctx.batch.tokens.max()) + 1
    taste = torch.exp(sigma * torch.randn(vocab, generator=torch.Generator().manual_seed(seed)))
    mass = keys * taste[ctx.batch.tokens][:, None, :]
    total = mass.sum(-1, keepdim=True)
    return torch.where(total > 0, mass / total.clamp(min=1e-30), _fallback(ctx, fallback))


def dirichlet(ctx: FeatureContext, alpha: float, gen: torch.Generator) -> Tensor:
    """Random: each query draws its attention from Dirichlet(alpha) over the keys it sees."""
    mass = torch._standard_gamma(torch.full(ctx.allowed.shape, float(alpha)), generator=gen)
    mass = mass * ctx.allowed
    return mass / mass.sum(-1, keepdim=True).clamp(min=1e-30)


def random_logits(ctx: FeatureContext, sigma: float, gen: torch.Generator) -> Tensor:
    """Random: softmax of sigma * N(0, 1) scores, what a randomly initialised head looks like."""
    z = torch.randn(ctx.allowed.shape, generator=gen) * sigma
    z = z.masked_fill(~ctx.allowed, -torch.inf)
    out = torch.softmax(z, -1)
    return torch.nan_to_num(out, nan=0.0)


def shuffled(ctx: FeatureContext, pattern: Tensor, gen: torch.Generator) -> Tensor:
    """Random: each row of ``pattern`` with its keys permuted among the keys the query sees.

    Keeps every row's entropy and drops where the mass goes: the null for "structured but not an
    archetype". Visible keys form a prefix of positions (causal and padding masks both do).
    """
    scores = torch.rand(ctx.allowed.shape, generator=gen).masked_fill(~ctx.allowed, 2.0)
    perm = scores.argsort(-1)  # visible keys first, in random order
    return pattern.gather(-1, perm) * ctx.allowed


# --- mixing --------------------------------------------------------------------------------

Builder = Callable[..., Tensor]
DETERMINISTIC: dict[str, Builder] = {
    "offset": offset,
    "first": first,
    "delimiter": delimiter,
    "duplicate": duplicate,
    "same_token": same_token,
    "induction": induction,
    "syntactic": syntactic,
    "local": local,
    "broad": broad,
    "position": position,
    "far_offset": far_offset,
    "token_class": token_class,
    "frequent": frequent,
}
RANDOM: dict[str, Builder] = {"dirichlet": dirichlet, "random_logits": random_logits}


def build(ctx: FeatureContext, kind: str, args: tuple, gen: torch.Generator, cache: dict) -> Tensor:
    """One component pattern; deterministic ones are cached per batch under (kind, args)."""
    if kind in DETERMINISTIC:
        key = (kind, args)
        if key not in cache:
            cache[key] = DETERMINISTIC[kind](ctx, *args)
        return cache[key]
    if kind in RANDOM:
        return RANDOM[kind](ctx, *args, gen)
    if kind == "shuffled":  # args: (inner kind, inner args)
        return shuffled(ctx, build(ctx, args[0], args[1], gen, cache), gen)
    raise ValueError(f"unknown pattern kind {kind!r}")


def mix(
    components: list[Tensor],
    weights: Tensor,
    wobble: float | None,
    ctx: FeatureContext,
    gen: torch.Generator,
    jitter: float = 0.0,
) -> Tensor:
    """Per-query mixture of component patterns.

    Each query scales each weight by exp(wobble * N(0, 1)) and renormalises (exact weights when
    wobble is None), so the mixture varies across positions as real heads do. Then every entry
    is scaled by exp(jitter * N(0, 1)) and rows renormalised: no real head attends *exactly*
    uniformly, and without it ties (equal mass on every word) would decide argmax-based scores
    such as the syntactic one by position order instead of by chance.
    """
    n, width = ctx.allowed.shape[:2]
    w = weights.float().clamp(min=1e-6).expand(n, width, len(weights))
    if wobble is not None:
        w = w * torch.exp(wobble * torch.randn(w.shape, generator=gen))
        w = w / w.sum(-1, keepdim=True)
    out = components[0] * w[..., 0, None]
    for c in range(1, len(components)):
        out = out + components[c] * w[..., c, None]
    if jitter > 0:
        out = out * torch.exp(jitter * torch.randn(out.shape, generator=gen))
        out = out / out.sum(-1, keepdim=True).clamp(min=1e-30)
    return out

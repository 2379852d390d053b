# Over 400 lines: every feature beside its baseline and the masks they share.
"""Per-head attention features: pure functions of a pattern tensor and the batch's masks.

Every feature scores a head by where its attention mass goes on a set of eligible query
positions, next to a *baseline*: what a head with no preference would score on the very same
positions, so that a score means the same on short and long sequences. A feature function
returns *sums* over each sequence's eligible queries; the accumulator turns them into means and
bootstrap intervals. Functions never run the model and never write into the pattern.

Sinks. Most heads of a trained model park much of their attention on the first position (BOS /
[CLS]), which is largely a no-op: the value vector there is small and, in a causal model, the
same for every input. So every feature except ``first_token`` reads the head's attention
*renormalised over the non-sink keys*: the mass a query puts on the targets divided by the mass
it puts anywhere but the first position. Summed over queries, ``value = sum(mass on targets) /
sum(non-sink mass)`` (a ratio of sums, so that a query that sinks completely adds nothing rather
than the noise of its crumbs), and ``baseline = sum(non-sink mass * targets / non-sink keys) /
sum(non-sink mass)``: what the head would score if it spread its non-sink mass uniformly over
the non-sink keys (any head that does so scores its baseline exactly, however much it sinks).
``first_token`` is the sink itself: the mean mass on the first position. Each row also records
``sink_mass``: the mean mass on the first position over that feature's eligible queries.

Only the first position is a sink. Measured on SmolLM2-135M and MiniLM-L6 over the default
probes (analyses/sinks.py, analyses/RESULTS.md "Attention sinks"): heads put less mass on
punctuation and [SEP] than their share of the keys (SmolLM2 punctuation 0.026 against a share of
0.029; MiniLM punctuation 0.044 / 0.075, [SEP] 0.029 / 0.052; no head has a lift above 0.3 on
either), and what a head reads from them, its value through W_O, is 0.75-0.88 of an ordinary
token's (median head), against 0.27 (SmolLM2) and 0.05 (MiniLM) at the first position, which
draws 0.54 / 0.43 of all attention: delimiters are ordinary keys in both models.

Raw share. ``raw`` is how much of *all* its attention the head puts on the targets, sink
included: per sequence the feature reads, the mass on the targets summed over every query row
(the first position, rows without a target, special tokens) over the number of rows; then the
mean over those sequences (a sum of shares over a count of sequences: it streams). That is
TransformerLens' ``detect_head`` with its defaults (``error_measure`` "mul": the mass on the
detection pattern over the pattern's total, one per row; prompts averaged), and for
``previous_token``, ``duplicate_token`` and ``induction`` the targets are its detection patterns,
which reach a little further than ``value``'s: q-1 for every q >= 1 (the first position too),
every earlier k with tok[k] == tok[q] (the first position, special tokens), every k <= q with
tok[k-1] == tok[q] (q itself when tok[q-1] == tok[q]). Other mass features: ``value``'s targets on
its eligible queries. Rows without a target count, so an ideal induction head scores about 0.5 on
``[BOS] r r``: compare heads on one feature, not features with each other. ``broad`` (an entropy)
and syntactic features (an accuracy over arcs) are no share of attention: ``raw`` is NaN.

Which score should you read? ``value`` is the share of the head's non-sink attention on the
targets (a perfect previous-token head scores 1.0 on ``previous_token``, however much it also
sinks); ``value - baseline`` is the preference over chance; what the classifier reads. ``raw`` is
how much the head attends there (a head with 0.9 on the sink and 0.09 on the targets: ``value``
0.9, ``raw`` 0.09): rank heads by it, compare it with detect_head and the papers. Syntactic features
follow Clark et al. (2019): the share of arcs whose most-attended word is the gold partner (the
sink is no word, so it needs no renormalising), next to the accuracy of the best fixed rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from interp.probes.base import NATURAL, PROBE_KINDS, REPEATED, SYNTAX
from interp.probes.batch import ProbeBatch
from interp.roles import FEATURE_GROUP_PREFIX

TEXT = (NATURAL, SYNTAX)
# Positional features: a fixed absolute position k != 0, or (encoders, which see the whole
# sequence) a fixed distance before the last token ([SEP]). See :func:`position`.
POSITIONS: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
FROM_END: tuple[int, ...] = (1, 2, 3)
POSITION_PREFIX = FEATURE_GROUP_PREFIX["positional"]

# One layer's attention: [batch, head, q, k], each query row summing to 1 over the keys it may see.
Pattern = Float[Tensor, "batch head q k"]


def position_name(k: int) -> str:
    return f"{POSITION_PREFIX}{k}"


def end_name(j: int) -> str:
    return f"{POSITION_PREFIX}end-{j}"


POSITION_FEATURES: tuple[str, ...] = tuple(position_name(k) for k in POSITIONS) + tuple(
    end_name(j) for j in FROM_END
)
# Which probe kinds each feature reads. Induction and duplicate-token heads are judged on
# repeated random tokens, where a copy is never explained by grammar or topic; the sink on all.
FEATURE_PROBE_KINDS: dict[str, tuple[str, ...]] = {
    "previous_token": TEXT + (REPEATED,),
    "current_token": TEXT,
    "next_token": TEXT,
    "first_token": TEXT + (REPEATED,),
    "delimiter": TEXT,
    "frequent_token": TEXT,
    "duplicate_token": (REPEATED,),
    "induction": (REPEATED,),
    "local": TEXT,
    "broad": TEXT,
    **{name: TEXT for name in POSITION_FEATURES},
}
STATIC_FEATURES: tuple[str, ...] = tuple(FEATURE_PROBE_KINDS)
DIRECTIONS = ("dep2head", "head2dep")
SYNTACTIC_PREFIX = FEATURE_GROUP_PREFIX["syntactic"]
# The version of these definitions is interp.collect.config.FEATURES_VERSION: bump it there when a
# feature's definition changes here.


def syntactic_name(relation: str, direction: str) -> str:
    return f"{SYNTACTIC_PREFIX}{relation}:{direction}"


def probe_kinds_of(feature: str) -> tuple[str, ...]:
    """The probe kinds a feature reads (syntactic features: the syntax probes)."""
    if feature.startswith(SYNTACTIC_PREFIX):
        return (SYNTAX,)
    return FEATURE_PROBE_KINDS.get(feature, ())


@dataclass
class FeatureSums:
    """Per-sequence sums over a feature's eligible queries. ``value / weight`` is the score,
    ``baseline / weight`` the no-preference score, ``sink / count`` the mass on the first position;
    ``raw / rows`` the sequence's raw share (averaged over sequences, see the module docstring)."""

    value: Float[Tensor, "batch head"]  # mass on the targets
    baseline: Float[Tensor, "batch head"]  # the same mass spread uniformly over the counted keys
    weight: Float[Tensor, "batch head"]  # mass on the counted keys (non-sink)
    sink: Float[Tensor, "batch head"]  # mass on the first position
    count: Float[Tensor, " batch"]  # eligible queries
    raw: Float[
        Tensor, "batch head"
    ]  # mass on the raw targets over every query row (NaN: no raw share)
    rows: Float[Tensor, " batch"]  # query rows of the sequences the feature reads (0: not read)


@dataclass
class FeatureContext:
    """Masks shared by all layers of one batch (built once by :func:`context`)."""

    batch: ProbeBatch
    allowed: Bool[Tensor, "batch q k"]
    n_allowed: Float[Tensor, "batch q"]
    content: Bool[Tensor, "batch pos"]  # valid and not special
    sink: Bool[Tensor, "batch pos"]  # the first position
    n_open: Float[Tensor, "batch q"]  # visible keys other than the sink
    local_window: int
    relations: tuple[str, ...]
    # syntactic arcs flattened over the batch: query token, gold word, query word, feature slot
    arc_batch: Int[Tensor, " arc"]
    arc_query: Int[Tensor, " arc"]
    arc_gold: Int[Tensor, " arc"]
    arc_slot: Int[Tensor, " arc"]  # index into syntactic_features()

    def kind_gate(self, feature: str) -> Bool[Tensor, " batch"]:
        """Which sequences this feature reads."""
        ids = torch.tensor([PROBE_KINDS.index(f) for f in probe_kinds_of(feature)])
        return torch.isin(self.batch.kind, ids)

    def syntactic_features(self) -> list[str]:
        return [syntactic_name(r, d) for r in self.relations for d in DIRECTIONS]


def context(
    batch: ProbeBatch, relations: tuple[str, ...] = (), local_window: int = 3
) -> FeatureContext:
    valid = batch.valid
    n, width = valid.shape
    allowed = valid[:, :, None] & valid[:, None, :]
    if batch.causal:
        allowed &= torch.ones(width, width, dtype=torch.bool).tril()
    content = valid & ~batch.is_special
    sink = torch.zeros_like(valid)
    sink[:, 0] = valid[:, 0]
    n_open = (allowed & ~sink[:, None, :]).sum(-1).double()
    ab, aq, ag, aslot = _flatten_arcs(batch, len(relations))
    return FeatureContext(
        batch,
        allowed,
        allowed.sum(-1).clamp(min=1).double(),
        content,
        sink,
        n_open,
        local_window,
        tuple(relations),
        ab,
        aq,
        ag,
        aslot,
    )


def _flatten_arcs(batch: ProbeBatch, n_relations: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Each arc gives one query per direction; in a causal model only partners already seen count."""
    rows = []
    for b, (arcs, word_pos) in enumerate(zip(batch.arcs, batch.word_pos)):
        for dep, head, rel in arcs.tolist():
            for d, (query_word, gold_word) in enumerate(((dep, head), (head, dep))):
                q = int(word_pos[query_word])
                if batch.causal and word_pos[gold_word] > q:
                    continue
                rows.append((b, q, gold_word, rel * len(DIRECTIONS) + d))
    t = torch.tensor(rows, dtype=torch.long).reshape(-1, 4)
    return t[:, 0], t[:, 1], t[:, 2], t[:, 3]


# --- sums over eligible queries ---------------------------------------------------------


def _sums(
    pattern: Pattern,
    ctx: FeatureContext,
    mass: Float[Tensor, "batch head q"],
    queries: Bool[Tensor, "batch q"],
    n_targets: Float[Tensor, "batch q"] | Int[Tensor, "batch q"],
    feature: str,
    skip_self: bool = False,
    raw: Float[Tensor, "batch head"] | None = None,
) -> FeatureSums:
    """Sum over eligible ``queries`` of the ``mass`` each puts on its ``n_targets`` target keys.

    The counted keys are the visible non-sink keys (and not the query itself with ``skip_self``);
    a query needs at least one of them. The raw mass is that same mass unless ``raw`` is given.
    """
    sink = pattern[..., 0].double()
    counted = (1.0 - sink).clamp(min=0.0)
    n_keys = ctx.n_open
    if skip_self:
        counted = (counted - pattern.diagonal(dim1=-2, dim2=-1).double()).clamp(min=0.0)
        n_keys = n_keys - 1
    queries = queries & (n_keys >= 1)
    q = queries.double()[:, None, :]
    share = (n_targets.double() / n_keys.clamp(min=1))[:, None, :]
    value = (mass.double() * q).sum(-1)
    return FeatureSums(
        value,
        (counted * share * q).sum(-1),
        (counted * q).sum(-1),
        (sink * q).sum(-1),
        queries.sum(-1).double(),
        value if raw is None else raw,
        _rows(ctx, feature),
    )


def _rows(ctx: FeatureContext, feature: str) -> Float[Tensor, " batch"]:
    """Every query row (valid position) of the sequences the feature reads: raw's denominator."""
    return (ctx.batch.valid & ctx.kind_gate(feature)[:, None]).sum(-1).double()


def _detection_mass(
    pattern: Pattern, ctx: FeatureContext, targets: Bool[Tensor, "batch q k"], feature: str
) -> Float[Tensor, "batch head"]:
    """detect_head's numerator: the mass on a detection pattern ``targets`` summed over every query
    row of the sequences the feature reads (valid keys only: padding is no key)."""
    rows = ctx.batch.valid & ctx.kind_gate(feature)[:, None]
    cells = targets & rows[:, :, None] & ctx.batch.valid[:, None, :]
    return torch.einsum("bhqk,bqk->bh", pattern, cells.to(pattern.dtype)).double()


def _earlier(ctx: FeatureContext) -> Bool[Tensor, "q k"]:
    """k < q."""
    return torch.ones_like(ctx.allowed[0]).tril(-1)


def _offset_mass(pattern: Pattern, offset: int) -> Float[Tensor, "batch head q"]:
    """The mass on key q+offset (zero where that key does not exist)."""
    width = pattern.shape[-1]
    diag = pattern.diagonal(offset=offset, dim1=-2, dim2=-1)  # [batch, head, width-|offset|]
    out = pattern.new_zeros(pattern.shape[:-1])
    if offset < 0:
        out[..., -offset:] = diag
    else:
        out[..., : width - offset] = diag
    return out


def _shifted(mask: Bool[Tensor, "batch q"], offset: int) -> Bool[Tensor, "batch q"]:
    """The mask at position q+offset (False outside)."""
    out = torch.zeros_like(mask)
    if offset < 0:
        out[:, -offset:] = mask[:, :offset]
    elif offset > 0:
        out[:, :-offset] = mask[:, offset:]
    else:
        out = mask.clone()
    return out


def _queries(ctx: FeatureContext, feature: str) -> Bool[Tensor, "batch q"]:
    """The content queries of the sequences the feature reads."""
    return ctx.content & ctx.kind_gate(feature)[:, None]


# --- mask-based features ----------------------------------------------------------------


def _offset_feature(
    pattern: Pattern,
    ctx: FeatureContext,
    offset: int,
    feature: str,
    raw: Float[Tensor, "batch head"] | None = None,
) -> FeatureSums:
    target_ok = _shifted(ctx.content & ~ctx.sink, offset)
    if ctx.batch.causal and offset > 0:
        target_ok = torch.zeros_like(target_ok)
    queries = _queries(ctx, feature) & target_ok & (ctx.n_open >= 2)
    return _sums(
        pattern,
        ctx,
        _offset_mass(pattern, offset),
        queries,
        torch.ones_like(ctx.n_open),
        feature,
        raw=raw,
    )


def previous_token(pattern: Pattern, ctx: FeatureContext) -> FeatureSums:
    """Mass on q-1, over content queries whose predecessor is a content token (not BOS).

    Raw: detect_head's previous-token pattern, q-1 for every row q >= 1.
    """
    at = torch.arange(ctx.allowed.shape[-1])
    targets = (at[:, None] - at[None, :] == 1)[None]  # k = q-1
    raw = _detection_mass(pattern, ctx, targets, "previous_token")
    return _offset_feature(pattern, ctx, -1, "previous_token", raw)


def current_token(pattern: Pattern, ctx: FeatureContext) -> FeatureSums:
    """Mass on q itself, over content queries that can see another non-sink key."""
    return _offset_feature(pattern, ctx, 0, "current_token")


def next_token(pattern: Pattern, ctx: FeatureContext) -> FeatureSums:
    """Mass on q+1 (encoders only; a causal model cannot see it, so it has no eligible queries)."""
    return _offset_feature(pattern, ctx, 1, "next_token")


def first_token(pattern: Pattern, ctx: FeatureContext) -> FeatureSums:
    """Raw mass on the first position (BOS / [CLS]), over content queries of every kind: the sink."""
    queries = _queries(ctx, "first_token") & (ctx.n_open >= 1) & ~ctx.sink
    q = queries.double()[:, None, :]
    sink = (pattern[..., 0].double() * q).sum(-1)
    count = queries.sum(-1).double()
    heads = torch.ones_like(sink)
    return FeatureSums(
        sink,
        (q / ctx.n_allowed[:, None, :]).sum(-1) * heads,
        count[:, None] * heads,
        sink,
        count,
        sink,
        _rows(ctx, "first_token"),
    )


def _mask_feature(
    pattern: Pattern,
    ctx: FeatureContext,
    targets: Bool[Tensor, "batch q k"],
    feature: str,
    skip_self: bool = False,
    raw: Float[Tensor, "batch head"] | None = None,
) -> FeatureSums:
    """The feature whose targets are a key mask per query (visible non-sink keys)."""
    n_targets = targets.sum(-1)
    queries = _queries(ctx, feature) & (n_targets > 0)
    mass = torch.einsum("bhqk,bqk->bhq", pattern, targets.to(pattern.dtype))
    return _sums(pattern, ctx, mass, queries, n_targets, feature, skip_self, raw)


def _open_keys(ctx: FeatureContext) -> Bool[Tensor, "batch q k"]:
    """The visible keys other than the sink and the query itself."""
    width = ctx.allowed.shape[-1]
    return ctx.allowed & ~ctx.sink[:, None, :] & ~torch.eye(width, dtype=torch.bool)


def delimiter(pattern: Pattern, ctx: FeatureContext) -> FeatureSums:
    """Mass on punctuation (and [SEP]) keys other than q, over queries that can see one."""
    targets = _open_keys(ctx) & ctx.batch.is_delim[:, None, :]
    return _mask_feature(pattern, ctx, targets, "delimiter")


def frequent_token(pattern: Pattern, ctx: FeatureContext) -> FeatureSums:
    """Mass on keys of the corpus's most frequent token types (interp.probes.frequent: function
    words and punctuation) other than q, over queries that can see one."""
    keys = ctx.batch.frequent_rank >= 0
    return _mask_feature(pattern, ctx, _open_keys(ctx) & keys[:, None, :], "frequent_token")


def duplicate_token(pattern: Pattern, ctx: FeatureContext) -> FeatureSums:
    """Mass on earlier keys holding the same token as q, over queries that have such a copy.

    Renormalised over the keys other than the sink *and q itself*: a token matches itself, so a
    duplicate-token head often keeps some mass there, which says nothing about copies (and is
    what ``current_token`` measures). Raw: detect_head's pattern, every earlier k holding q's token.
    """
    tok = ctx.batch.tokens
    same = tok[:, :, None] == tok[:, None, :]
    raw = _detection_mass(pattern, ctx, same & _earlier(ctx), "duplicate_token")
    targets = _open_keys(ctx) & _earlier(ctx) & same & ctx.content[:, None, :]
    return _mask_feature(pattern, ctx, targets, "duplicate_token", skip_self=True, raw=raw)


def induction(pattern: Pattern, ctx: FeatureContext) -> FeatureSums:
    """Mass on keys k < q whose predecessor holds q's token: the token that followed an earlier copy.

    Renormalised over the keys other than the sink and q itself, like duplicate_token (for a
    token right after its own copy the "token that followed" is q itself: not counted). Raw:
    detect_head's pattern, every k in 1..q after a copy of q's token (q itself included).
    """
    tok = ctx.batch.tokens
    follows = tok[:, :, None] == torch.roll(tok, 1, dims=1)[:, None, :]  # tok[k-1] == tok[q]
    upto_q = torch.ones_like(ctx.allowed[0]).tril() & (
        torch.arange(tok.shape[1]) >= 1
    )  # 1 <= k <= q
    raw = _detection_mass(pattern, ctx, follows & upto_q, "induction")
    prev_content = _shifted(ctx.content, -1)
    targets = _open_keys(ctx) & _earlier(ctx) & follows & prev_content[:, None, :]
    return _mask_feature(pattern, ctx, targets, "induction", skip_self=True, raw=raw)


def local(pattern: Pattern, ctx: FeatureContext) -> FeatureSums:
    """Mass on content keys 1..w positions away (before q in a causal model, either side in an encoder).

    Only over queries that can also see a content key further away: where the window holds every
    other content key, "local" cannot be told from "spread over the text" (a short probe).
    """
    width = ctx.allowed.shape[-1]
    offsets = torch.arange(width)[:, None] - torch.arange(width)[None, :]  # q - k
    near = (offsets >= 1) & (offsets <= ctx.local_window)
    if not ctx.batch.causal:
        near |= (-offsets >= 1) & (-offsets <= ctx.local_window)
    content_keys = _open_keys(ctx) & ctx.content[:, None, :]
    targets = content_keys & near
    queries = _queries(ctx, "local") & (targets.sum(-1) > 0) & (content_keys & ~near).any(-1)
    mass = torch.einsum("bhqk,bqk->bhq", pattern, targets.to(pattern.dtype))
    return _sums(pattern, ctx, mass, queries, targets.sum(-1), "local")


def broad(pattern: Pattern, ctx: FeatureContext) -> FeatureSums:
    """Entropy of the attention renormalised over the content keys, divided by log(#content keys).

    1.0 for a head uniform over the content keys at every length, however much it sinks (BOS,
    [CLS] and [SEP] are set aside); 0 for one-hot attention. Averaged over queries with at least
    two content keys, weighted by the mass each puts on content keys; the baseline is 1.
    """
    keys = (ctx.allowed & ctx.content[:, None, :] & ~ctx.sink[:, None, :]).to(
        pattern.dtype
    )  # [batch, q, k]
    n_keys = keys.sum(-1).double()
    queries = _queries(ctx, "broad") & (n_keys >= 2)
    p = pattern * keys[:, None]
    mass = p.sum(-1).double()  # [batch, head, q]
    r = p.double() / mass.clamp(min=1e-30)[..., None]
    entropy = -(r * torch.log(r.clamp(min=1e-30))).sum(-1)
    q = queries.double()[:, None, :]
    value = (mass * entropy / torch.log(n_keys.clamp(min=2))[:, None, :] * q).sum(-1)
    weight = (mass * q).sum(-1)
    return FeatureSums(
        value,
        weight.clone(),
        weight,
        (pattern[..., 0].double() * q).sum(-1),
        queries.sum(-1).double(),
        torch.full_like(value, torch.nan),
        _rows(ctx, "broad"),
    )  # an entropy: no raw share


def position(
    pattern: Pattern, ctx: FeatureContext, k: int | None = None, from_end: int | None = None
) -> FeatureSums:
    """Mass on one fixed position: absolute ``k`` (k >= 1), or ``from_end`` positions before the
    last token ([SEP]; encoders only: a causal query does not see the end).

    Over content queries whose target is a content, non-delimiter key further than the local
    window from q, so that previous-token, local and delimiter heads do not score here; the
    baseline is the uniform share of one key.
    """
    n, width = ctx.content.shape
    if from_end is None:
        if k is None:
            raise ValueError("a position feature needs k or from_end")
        target = torch.full((n,), k)
        name = position_name(k)
    else:
        target = ctx.batch.lengths - 1 - from_end
        name = end_name(from_end)
    rows = torch.arange(n)
    ok = (target >= 1) & (target < width)
    safe = target.clamp(0, width - 1)
    ok &= ctx.content[rows, safe] & ~ctx.batch.is_delim[rows, safe] & ~ctx.sink[rows, safe]
    if ctx.batch.causal and from_end is not None:
        ok = torch.zeros_like(ok)
    far = (torch.arange(width)[None, :] - safe[:, None]).abs() > ctx.local_window  # [batch, q]
    visible = ctx.allowed[rows, :, safe]  # [batch, q]
    queries = _queries(ctx, name) & far & visible & ok[:, None]
    mass = pattern[rows, :, :, safe]  # [batch, head, q]
    return _sums(pattern, ctx, mass, queries, torch.ones_like(ctx.n_open), name)


def _position_fn(
    k: int | None = None, from_end: int | None = None
) -> Callable[[Pattern, FeatureContext], FeatureSums]:
    def fn(pattern: Pattern, ctx: FeatureContext) -> FeatureSums:
        return position(pattern, ctx, k, from_end)

    where = (
        f"absolute position {k}"
        if from_end is None
        else f"the position {from_end} before the last token"
    )
    fn.__doc__ = f"Mass on {where}, over queries it is far from (see position)."
    return fn


MASS_FEATURES: dict[str, Callable[[Pattern, FeatureContext], FeatureSums]] = {
    "previous_token": previous_token,
    "current_token": current_token,
    "next_token": next_token,
    "first_token": first_token,
    "delimiter": delimiter,
    "frequent_token": frequent_token,
    "duplicate_token": duplicate_token,
    "induction": induction,
    "local": local,
    "broad": broad,
    **{position_name(k): _position_fn(k=k) for k in POSITIONS},
    **{end_name(j): _position_fn(from_end=j) for j in FROM_END},
}

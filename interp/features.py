"""Per-head attention features: pure functions of a pattern tensor and the batch's masks.

Every feature scores a head by where its attention mass goes on a set of eligible query
positions, next to a *baseline*: what a head with no preference (uniform attention over the
keys it may see) would score on the very same positions, so that a score means the same on
short and long sequences. A feature function returns *sums* over each sequence's eligible
queries (value per head, baseline, count); the accumulator turns them into means and bootstrap
intervals. Functions never run the model and never write into the pattern.

Which score should you read? ``value`` is the mean attention mass on the targets (a perfect
previous-token head scores 1.0 on ``previous_token``); ``value - baseline`` is the preference
over chance. Syntactic features follow Clark et al. (2019): the share of arcs whose most-attended
word is the gold partner, next to the accuracy of the best fixed word offset for that relation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch import Tensor

from interp.probes.base import FAMILIES, NATURAL, REPEATED, SYNTAX
from interp.probes.batch import ProbeBatch

TEXT = (NATURAL, SYNTAX)
# Which probe families each feature reads. Induction and duplicate-token heads are judged on
# repeated random tokens, where a copy is never explained by grammar or topic.
FEATURE_FAMILIES: dict[str, tuple[str, ...]] = {
    "previous_token": TEXT + (REPEATED,),
    "current_token": TEXT,
    "next_token": TEXT,
    "first_token": TEXT,
    "delimiter": TEXT,
    "duplicate_token": (REPEATED,),
    "induction": (REPEATED,),
    "local": TEXT,
    "broad": TEXT,
}
STATIC_FEATURES: tuple[str, ...] = tuple(FEATURE_FAMILIES)
DIRECTIONS = ("dep2head", "head2dep")
# The version of these definitions is interp.config.FEATURES_VERSION: bump it there when a
# feature's definition changes here.


def syntactic_name(relation: str, direction: str) -> str:
    return f"syntactic:{relation}:{direction}"


@dataclass
class FeatureSums:
    """Per-sequence sums over eligible queries."""

    value: Tensor  # float [batch, head]
    baseline: Tensor  # float [batch]
    count: Tensor  # float [batch]


@dataclass
class FeatureContext:
    """Masks shared by all layers of one batch (built once by :func:`context`)."""

    batch: ProbeBatch
    allowed: Tensor  # bool [batch, q, k]
    n_allowed: Tensor  # float [batch, q]
    content: Tensor  # bool [batch, pos]: valid and not special
    local_window: int
    relations: tuple[str, ...]
    # syntactic arcs flattened over the batch: query token, gold word, query word, feature slot
    arc_batch: Tensor  # long [arc]
    arc_query: Tensor  # long [arc]
    arc_gold: Tensor  # long [arc]
    arc_slot: Tensor  # long [arc]: index into syntactic_features()

    def family_gate(self, feature: str) -> Tensor:
        """bool [batch]: which sequences this feature reads."""
        families = FEATURE_FAMILIES[feature]
        ids = torch.tensor([FAMILIES.index(f) for f in families])
        return torch.isin(self.batch.family, ids)

    def syntactic_features(self) -> list[str]:
        return [syntactic_name(r, d) for r in self.relations for d in DIRECTIONS]


def context(batch: ProbeBatch, relations: tuple[str, ...] = (), local_window: int = 3) -> FeatureContext:
    valid = batch.valid
    n, width = valid.shape
    allowed = valid[:, :, None] & valid[:, None, :]
    if batch.causal:
        allowed &= torch.ones(width, width, dtype=torch.bool).tril()
    content = valid & ~batch.is_special
    ab, aq, ag, aslot = _flatten_arcs(batch, len(relations))
    return FeatureContext(batch, allowed, allowed.sum(-1).clamp(min=1).double(), content, local_window,
                          tuple(relations), ab, aq, ag, aslot)


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


# --- mask-based features ----------------------------------------------------------------


def _sums(mass: Tensor, queries: Tensor, targets_per_query: Tensor, ctx: FeatureContext) -> FeatureSums:
    """mass [batch, head, q] on the targets; queries bool [batch, q]; targets_per_query [batch, q]."""
    q = queries.to(mass.dtype)
    value = (mass * q[:, None, :]).sum(-1)
    baseline = (targets_per_query.double() / ctx.n_allowed * queries).sum(-1)
    return FeatureSums(value.double(), baseline, queries.sum(-1).double())


def _offset_mass(pattern: Tensor, offset: int) -> Tensor:
    """mass [batch, head, q] on key q+offset (zero where that key does not exist)."""
    width = pattern.shape[-1]
    diag = pattern.diagonal(offset=offset, dim1=-2, dim2=-1)  # [batch, head, width-|offset|]
    out = pattern.new_zeros(pattern.shape[:-1])
    if offset < 0:
        out[..., -offset:] = diag
    else:
        out[..., : width - offset] = diag
    return out


def _shifted(mask: Tensor, offset: int) -> Tensor:
    """bool [batch, q]: mask at position q+offset (False outside)."""
    out = torch.zeros_like(mask)
    if offset < 0:
        out[:, -offset:] = mask[:, :offset]
    elif offset > 0:
        out[:, :-offset] = mask[:, offset:]
    else:
        out = mask.clone()
    return out


def _offset_feature(pattern: Tensor, ctx: FeatureContext, offset: int, feature: str) -> FeatureSums:
    target_ok = _shifted(ctx.content, offset)
    if ctx.batch.causal and offset > 0:
        target_ok = torch.zeros_like(target_ok)
    queries = ctx.content & target_ok & (ctx.n_allowed >= 2) & ctx.family_gate(feature)[:, None]
    return _sums(_offset_mass(pattern, offset), queries, torch.ones_like(ctx.n_allowed), ctx)


def previous_token(pattern: Tensor, ctx: FeatureContext) -> FeatureSums:
    """Mass on q-1, over content queries whose predecessor is a content token (not BOS)."""
    return _offset_feature(pattern, ctx, -1, "previous_token")


def current_token(pattern: Tensor, ctx: FeatureContext) -> FeatureSums:
    """Mass on q itself, over content queries that can see at least one other key."""
    return _offset_feature(pattern, ctx, 0, "current_token")


def next_token(pattern: Tensor, ctx: FeatureContext) -> FeatureSums:
    """Mass on q+1 (encoders only; a causal model cannot see it, so it has no eligible queries)."""
    return _offset_feature(pattern, ctx, 1, "next_token")


def first_token(pattern: Tensor, ctx: FeatureContext) -> FeatureSums:
    """Mass on position 0 (BOS / [CLS]), over content queries that can see other keys: the sink."""
    queries = ctx.content & (ctx.n_allowed >= 2) & ctx.family_gate("first_token")[:, None]
    queries[:, 0] = False
    return _sums(pattern[..., 0], queries, torch.ones_like(ctx.n_allowed), ctx)


def _mask_feature(pattern: Tensor, ctx: FeatureContext, targets: Tensor, feature: str) -> FeatureSums:
    """targets bool [batch, q, k] (already within allowed keys)."""
    n_targets = targets.sum(-1)
    queries = ctx.content & (n_targets > 0) & ctx.family_gate(feature)[:, None]
    mass = torch.einsum("bhqk,bqk->bhq", pattern, targets.to(pattern.dtype))
    return _sums(mass, queries, n_targets, ctx)


def _not_self(ctx: FeatureContext) -> Tensor:
    width = ctx.allowed.shape[-1]
    return ctx.allowed & ~torch.eye(width, dtype=torch.bool)


def delimiter(pattern: Tensor, ctx: FeatureContext) -> FeatureSums:
    """Mass on punctuation (and [SEP]) keys other than q, over queries that can see one."""
    targets = _not_self(ctx) & ctx.batch.is_delim[:, None, :]
    return _mask_feature(pattern, ctx, targets, "delimiter")


def duplicate_token(pattern: Tensor, ctx: FeatureContext) -> FeatureSums:
    """Mass on earlier keys holding the same token as q, over queries that have such a copy."""
    tok = ctx.batch.tokens
    earlier = ctx.allowed & torch.ones_like(ctx.allowed[0]).tril(-1)
    targets = earlier & (tok[:, :, None] == tok[:, None, :]) & ctx.content[:, None, :] & ctx.content[:, :, None]
    return _mask_feature(pattern, ctx, targets, "duplicate_token")


def induction(pattern: Tensor, ctx: FeatureContext) -> FeatureSums:
    """Mass on keys k < q whose predecessor holds q's token: the token that followed an earlier copy."""
    tok = ctx.batch.tokens
    prev_tok = torch.roll(tok, 1, dims=1)
    prev_content = _shifted(ctx.content, -1)
    earlier = ctx.allowed & torch.ones_like(ctx.allowed[0]).tril(-1)
    targets = earlier & (tok[:, :, None] == prev_tok[:, None, :]) & prev_content[:, None, :] & ctx.content[:, :, None]
    return _mask_feature(pattern, ctx, targets, "induction")


def local(pattern: Tensor, ctx: FeatureContext) -> FeatureSums:
    """Mass on content keys 1..w positions away (before q in a causal model, either side in an encoder)."""
    width = ctx.allowed.shape[-1]
    offsets = torch.arange(width)[:, None] - torch.arange(width)[None, :]  # q - k
    near = (offsets >= 1) & (offsets <= ctx.local_window)
    if not ctx.batch.causal:
        near |= (-offsets >= 1) & (-offsets <= ctx.local_window)
    targets = ctx.allowed & near & ctx.content[:, None, :]
    return _mask_feature(pattern, ctx, targets, "local")


def broad(pattern: Tensor, ctx: FeatureContext) -> FeatureSums:
    """Entropy of the query's attention divided by log(#visible keys): 1.0 for uniform attention."""
    queries = ctx.content & (ctx.n_allowed >= 2) & ctx.family_gate("broad")[:, None]
    p = pattern.double()
    entropy = -(p * torch.log(p.clamp(min=1e-30))).sum(-1)  # [batch, head, q]
    log_n = torch.log(ctx.n_allowed).clamp(min=1e-12)[:, None, :]
    value = torch.where(queries[:, None, :], entropy / log_n, 0.0).sum(-1)
    count = queries.sum(-1).double()
    return FeatureSums(value, count.clone(), count)


MASS_FEATURES: dict[str, Callable[[Tensor, FeatureContext], FeatureSums]] = {
    "previous_token": previous_token,
    "current_token": current_token,
    "next_token": next_token,
    "first_token": first_token,
    "delimiter": delimiter,
    "duplicate_token": duplicate_token,
    "induction": induction,
    "local": local,
    "broad": broad,
}


# --- syntactic features -----------------------------------------------------------------


def syntactic(pattern: Tensor, ctx: FeatureContext) -> tuple[Tensor, Tensor]:
    """Correct-arc counts per (sequence, feature slot, head) and arc counts per (sequence, slot).

    For each arc's query token, attention is summed over each word's tokens; the prediction is
    the most-attended word other than the query's own word; it is correct if it is the gold partner.
    Returns (correct float [batch, slot, head], arcs float [batch, slot]).
    """
    n_slots = len(ctx.relations) * len(DIRECTIONS)
    batch, heads = pattern.shape[0], pattern.shape[1]
    correct = torch.zeros(batch, n_slots, heads, dtype=torch.float64)
    arcs = torch.zeros(batch, n_slots, dtype=torch.float64)
    if len(ctx.arc_batch) == 0:
        return correct, arcs
    rows = pattern[ctx.arc_batch, :, ctx.arc_query, :].float()  # [arc, head, k]
    words = ctx.batch.word_of_token[ctx.arc_batch]  # [arc, k]
    n_words = int(words.max()) + 2
    index = (words + 1).clamp(min=0)[:, None, :].expand_as(rows)  # bucket 0 holds non-word keys
    per_word = rows.new_zeros(rows.shape[0], heads, n_words).scatter_add_(2, index, rows)[..., 1:]
    own = ctx.batch.word_of_token[ctx.arc_batch, ctx.arc_query]
    per_word[torch.arange(len(own)), :, own] = -1.0  # never predict the query's own word
    hit = (per_word.argmax(-1) == ctx.arc_gold[:, None]).double()  # [arc, head]
    flat = ctx.arc_batch * n_slots + ctx.arc_slot
    correct.view(-1, heads).index_add_(0, flat, hit)
    arcs.view(-1).index_add_(0, flat, torch.ones(len(flat), dtype=torch.float64))
    return correct, arcs


def fixed_rule_counts(ctx: FeatureContext) -> dict[tuple[int, tuple], int]:
    """(slot, rule) -> number of arcs the rule gets right, for the syntactic baseline.

    A head only counts as syntactic where it beats every rule that needs no syntax:

    - ``("offset", d)``: "attend to the word d away" (Clark et al. 2019);
    - ``("word", w)``: "attend to word w of the sentence". In a causal model many arcs point at
      the first word, where sink-like heads park their attention anyway;
    - ``("nearest", form)``: "attend to the nearest word spelled ``form``" (as token ids; only
      earlier words in a causal model). In a causal model the object of a verb is only visible
      through a relative "that", so a head that looks for the last "that" would get every such
      arc right without knowing what an object is.
    """
    counts: dict[tuple[int, tuple], int] = {}
    forms: dict[int, list[tuple[int, ...]]] = {}
    for b, q, gold, slot in zip(ctx.arc_batch.tolist(), ctx.arc_query.tolist(), ctx.arc_gold.tolist(), ctx.arc_slot.tolist()):
        if b not in forms:
            forms[b] = _word_forms(ctx.batch, b)
        qword = int(ctx.batch.word_of_token[b, q])
        rules = [("offset", gold - qword), ("word", gold)]
        if _nearest_with_form(forms[b], qword, forms[b][gold], ctx.batch.causal) == gold:
            rules.append(("nearest", forms[b][gold]))
        for rule in rules:
            counts[(slot, rule)] = counts.get((slot, rule), 0) + 1
    return counts


def _word_forms(batch: ProbeBatch, b: int) -> list[tuple[int, ...]]:
    """Each word of sequence b as the tuple of its token ids."""
    forms: list[list[int]] = [[] for _ in range(len(batch.word_pos[b]))]
    for token, word in zip(batch.tokens[b].tolist(), batch.word_of_token[b].tolist()):
        if word >= 0:
            forms[word].append(token)
    return [tuple(f) for f in forms]


def _nearest_with_form(forms: list[tuple[int, ...]], qword: int, form: tuple[int, ...], causal: bool) -> int | None:
    """The word spelled ``form`` closest to ``qword`` (not itself; the earlier one on a tie)."""
    candidates = [w for w, f in enumerate(forms) if f == form and w != qword and (w < qword or not causal)]
    return min(candidates, key=lambda w: (abs(w - qword), w), default=None)


def best_rule_share(counts: dict[tuple[int, tuple], int], arcs: np.ndarray) -> np.ndarray:
    """Share of arcs the best fixed rule gets right, per slot, from :func:`fixed_rule_counts`
    (summed over batches) and the number of arcs per slot (NaN where a slot has none)."""
    best = np.zeros(len(arcs))
    for (slot, _), c in counts.items():
        best[slot] = max(best[slot], c)
    with np.errstate(invalid="ignore", divide="ignore"):
        return best / np.asarray(arcs, dtype=float)

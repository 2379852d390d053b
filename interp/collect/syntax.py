"""Syntactic features: does a head link a word to its gold dependency partner?

Clark et al. (2019): for each arc's query token, attention is summed over each word's tokens;
the head "predicts" the most-attended word other than the query's own; the score is the share
of arcs predicted right, per relation and direction (``syntactic:<relation>:<direction>``). The
first position is no word, so a sink needs no renormalising here. The baseline is the best rule
that needs no syntax (:func:`fixed_rule_counts`). Pure functions, like interp.collect.features.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from jaxtyping import Bool, Float
from torch import Tensor

from interp.collect.features import DIRECTIONS, FeatureContext, Pattern
from interp.probes.batch import ProbeBatch


def n_slots(ctx: FeatureContext) -> int:
    return len(ctx.relations) * len(DIRECTIONS)


def arc_sink(pattern: Pattern, ctx: FeatureContext) -> Float[Tensor, "batch slot head"]:
    """Mass on the first position at each arc's query, summed per (sequence, slot, head)."""
    batch, heads = pattern.shape[0], pattern.shape[1]
    out = torch.zeros(batch * n_slots(ctx), heads, dtype=torch.float64)
    if len(ctx.arc_batch):
        flat = ctx.arc_batch * n_slots(ctx) + ctx.arc_slot
        out.index_add_(0, flat, pattern[ctx.arc_batch, :, ctx.arc_query, 0].double())
    return out.view(batch, n_slots(ctx), heads)


def syntactic(
    pattern: Pattern, ctx: FeatureContext
) -> tuple[Float[Tensor, "batch slot head"], Float[Tensor, "batch slot"]]:
    """Correct-arc counts per (sequence, feature slot, head) and arc counts per (sequence, slot).

    For each arc's query token, attention is summed over each word's tokens; the prediction is
    the most-attended word other than the query's own word; it is correct if it is the gold partner.
    Returns (correct, arcs).
    """
    slots = n_slots(ctx)
    batch, heads = pattern.shape[0], pattern.shape[1]
    correct = torch.zeros(batch, slots, heads, dtype=torch.float64)
    arcs = torch.zeros(batch, slots, dtype=torch.float64)
    if len(ctx.arc_batch) == 0:
        return correct, arcs
    hit = arc_hits(pattern, ctx)
    flat = ctx.arc_batch * slots + ctx.arc_slot
    correct.view(-1, heads).index_add_(0, flat, hit)
    arcs.view(-1).index_add_(0, flat, torch.ones(len(flat), dtype=torch.float64))
    return correct, arcs


def arc_hits(pattern: Pattern, ctx: FeatureContext) -> Float[Tensor, "arc head"]:
    """1.0 where a head's most-attended word (other than the query's own) at an arc's query is
    the gold partner, else 0.0: one row per arc of ``ctx`` (see :func:`syntactic`)."""
    heads = pattern.shape[1]
    if len(ctx.arc_batch) == 0:
        return torch.zeros(0, heads, dtype=torch.float64)
    rows = pattern[ctx.arc_batch, :, ctx.arc_query, :].float()  # [arc, head, k]
    words = ctx.batch.word_of_token[ctx.arc_batch]  # [arc, k]
    n_words = int(words.max()) + 2
    index = (words + 1).clamp(min=0)[:, None, :].expand_as(rows)  # bucket 0 holds non-word keys
    per_word = rows.new_zeros(rows.shape[0], heads, n_words).scatter_add_(2, index, rows)[..., 1:]
    own = ctx.batch.word_of_token[ctx.arc_batch, ctx.arc_query]
    per_word[torch.arange(len(own)), :, own] = -1.0  # never predict the query's own word
    return (per_word.argmax(-1) == ctx.arc_gold[:, None]).double()  # [arc, head]


def only_arcs(ctx: FeatureContext, keep: Bool[Tensor, " arc"]) -> FeatureContext:
    """The context with only the arcs ``keep`` marks: every other mask is shared, so every
    feature but the syntactic ones reads the batch as before."""
    return dataclasses.replace(
        ctx,
        arc_batch=ctx.arc_batch[keep],
        arc_query=ctx.arc_query[keep],
        arc_gold=ctx.arc_gold[keep],
        arc_slot=ctx.arc_slot[keep],
    )


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
    for b, q, gold, slot in zip(
        ctx.arc_batch.tolist(), ctx.arc_query.tolist(), ctx.arc_gold.tolist(), ctx.arc_slot.tolist()
    ):
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


def _nearest_with_form(
    forms: list[tuple[int, ...]], qword: int, form: tuple[int, ...], causal: bool
) -> int | None:
    """The word spelled ``form`` closest to ``qword`` (not itself; the earlier one on a tie)."""
    candidates = [
        w for w, f in enumerate(forms) if f == form and w != qword and (w < qword or not causal)
    ]
    return min(candidates, key=lambda w: (abs(w - qword), w), default=None)


def best_rule_share(counts: dict[tuple[int, tuple], int], arcs: np.ndarray) -> np.ndarray:
    """Share of arcs the best fixed rule gets right, per slot, from :func:`fixed_rule_counts`
    (summed over batches) and the number of arcs per slot (NaN where a slot has none)."""
    best = np.zeros(len(arcs))
    for (slot, _), c in counts.items():
        best[slot] = max(best[slot], c)
    with np.errstate(invalid="ignore", divide="ignore"):
        return best / np.asarray(arcs, dtype=float)

"""Per-corpus syntactic scores: the ``syntax`` table, and which treebank the features read.

Every treebank of a run (the built-in ``syntax`` suite, each ``--corpus`` CoNLL-U file as
``user:<stem>``) is scored on its own: :class:`SyntaxAccumulator` keeps one slot per (corpus,
relation, direction), fed from the same hook as the feature accumulator, and its table gives,
for each slot, the best few heads (Clark et al. 2019's accuracy: the share of arcs whose
most-attended word is the gold partner, see interp.collect.syntax) with a 95% Poisson-bootstrap
interval over sentences, the number of arcs and sentences, and the fixed rules that need no
syntax: the accuracy of each word offset in :data:`OFFSETS` and the best rule of any kind.

The features table's ``syntactic:<rel>:<dir>`` features (what the classifier reads) rest on one
choice of treebanks, :func:`feature_corpora`: the built-in ``syntax`` suite when the run collects
it, otherwise the user treebanks; a user treebank is never pooled with the built-in suite unless
``pool_syntax`` asks for it.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import torch
from jaxtyping import Bool
from torch import Tensor

from interp.collect.bootstrap import add_sums, sequence_weights
from interp.collect.features import DIRECTIONS, FeatureContext, Pattern
from interp.collect.syntax import arc_hits, fixed_rule_counts, only_arcs

BUILTIN = "syntax"  # the name of the built-in syntax suite (interp.probes.grammar)
# The fixed offsets whose accuracy is a column of the syntax table (offset_-1: the word right
# before the query's word); the best rule (best_rule) may be any offset, word position or form.
OFFSETS: tuple[int, ...] = (-3, -2, -1, 1, 2, 3)
TOP_HEADS = 3


def feature_corpora(syntactic: Sequence[str], pool: bool = False) -> tuple[str, ...]:
    """The treebanks the features table's syntactic features read, from the run's syntactic
    suites (in run order): all of them with ``pool``; otherwise the built-in ``syntax`` suite
    when present, else every user treebank."""
    if pool or BUILTIN not in syntactic:
        return tuple(syntactic)
    return (BUILTIN,)


def offset_column(d: int) -> str:
    return f"offset_{d}"


def rule_name(rule: tuple, decode: Callable[[tuple[int, ...]], str] | None = None) -> str:
    """``offset_-1`` (the word right before), ``word_0`` (the first word), ``nearest_<form>``."""
    kind, arg = rule
    if kind == "nearest":
        return f"nearest_{decode(arg) if decode else ' '.join(map(str, arg))}"
    return f"{kind}_{arg}"


def _rule_order(rule: tuple) -> tuple:
    """Ties between fixed rules go to the simplest: an offset (the nearer, then the earlier word),
    then a word position, then a word form."""
    kind, arg = rule
    if kind == "offset":
        return (0, abs(arg), arg, "")
    if kind == "word":
        return (1, arg, 0, "")
    return (2, 0, 0, str(arg))


class SyntaxAccumulator:
    """Correct-arc counts per (corpus, relation, direction) slot, layer and head, with the same
    Poisson bootstrap over sequences as interp.collect.accumulator (same seed and draws, so the
    features table's interval of a corpus it reads alone is this one's).

    ``corpus_of``: per sequence of the run (``ProbeBatch.index``), its corpus' index in
    ``corpora``, or -1 (no treebank: such sequences carry no arcs).
    """

    def __init__(
        self,
        n_layers: int,
        n_heads: int,
        relations: tuple[str, ...],
        corpora: Sequence[str],
        corpus_of: Sequence[int],
        n_bootstrap: int = 200,
        seed: int = 0,
    ):
        self.relations, self.corpora = tuple(relations), tuple(corpora)
        self.n_layers, self.n_heads = n_layers, n_heads
        self.n_slots = len(self.relations) * len(DIRECTIONS)
        total = (
            len(self.corpora) * self.n_slots
        )  # slot c * n_slots + s: relation slot s of corpus c
        self.corpus_of = torch.as_tensor(list(corpus_of), dtype=torch.long)
        self.correct = torch.zeros((n_layers, total, n_heads), dtype=torch.float64)
        self.arcs = torch.zeros(total, dtype=torch.float64)
        self.sentences = torch.zeros(total, dtype=torch.float64)
        self.rep_correct = torch.zeros((n_bootstrap, n_layers, total, n_heads), dtype=torch.float64)
        self.rep_arcs = torch.zeros((n_bootstrap, total), dtype=torch.float64)
        self.rule_hits: dict[
            tuple[int, tuple], int
        ] = {}  # (corpus slot, rule) -> arcs it gets right
        self.seed = seed
        self._weights: Tensor | None = None
        self._keep = self._flat = torch.zeros(
            0, dtype=torch.long
        )  # this batch's arcs in a corpus, their index
        self._layers_seen: set[int] = set()

    def _slots(self, ctx: FeatureContext) -> Tensor:
        """Each arc's corpus slot (-1 for an arc of a sequence outside every corpus)."""
        corpus = self.corpus_of[ctx.batch.index][ctx.arc_batch]
        return torch.where(corpus >= 0, corpus * self.n_slots + ctx.arc_slot, -1)

    def merge(self, other: SyntaxAccumulator) -> None:
        """Add the counts of an accumulator fed other sequences (a shard of the corpus)."""
        add_sums(
            self, other, ("correct", "arcs", "sentences", "rep_correct", "rep_arcs"), ("rule_hits",)
        )

    def start_batch(self, ctx: FeatureContext) -> None:
        """Take this batch's bootstrap weights (keyed by sequence, as the features'); add its arc,
        sentence and fixed-rule counts."""
        n = ctx.batch.tokens.shape[0]
        self._weights = sequence_weights(self.seed, ctx.batch.index, self.rep_correct.shape[0])
        self._layers_seen = set()
        slots = self._slots(ctx)
        keep = slots >= 0
        self._keep, total = keep, self.arcs.shape[0]
        self._flat = ctx.arc_batch[keep] * total + slots[keep]  # index into [batch, corpus slot]
        per_seq = (
            torch.zeros(n * total, dtype=torch.float64)
            .index_add_(0, self._flat, torch.ones(len(self._flat), dtype=torch.float64))
            .view(n, total)
        )
        self.arcs += per_seq.sum(0)
        self.sentences += (per_seq > 0).sum(0).double()
        self.rep_arcs += self._weights @ per_seq
        for c in range(len(self.corpora)):
            mine = slots // self.n_slots == c
            if keep[mine].any():
                for (slot, rule), hits in fixed_rule_counts(only_arcs(ctx, mine & keep)).items():
                    key = (c * self.n_slots + slot, rule)
                    self.rule_hits[key] = self.rule_hits.get(key, 0) + hits

    def add_layer(self, layer: int, pattern: Pattern, ctx: FeatureContext) -> None:
        """Fold one layer's pattern [batch, head, q, k] into the counts."""
        if self._weights is None or layer in self._layers_seen:
            raise RuntimeError("call start_batch once before each batch's layers")
        self._layers_seen.add(layer)
        if len(self._flat) == 0:
            return
        hits = arc_hits(pattern, only_arcs(ctx, self._keep))  # [arc, head]
        n, total = ctx.batch.tokens.shape[0], self.arcs.shape[0]
        per_seq = torch.zeros(n * total, self.n_heads, dtype=torch.float64).index_add_(
            0, self._flat, hits
        )
        per_seq = per_seq.view(n, total, self.n_heads)
        self.correct[layer] += per_seq.sum(0)
        self.rep_correct[:, layer] += torch.einsum("rb,bsh->rsh", self._weights, per_seq)

    def table(
        self,
        measured: Bool[np.ndarray, "layer head"] | None = None,
        in_features: Sequence[str] = (),
        top: int = TOP_HEADS,
        decode: Callable[[tuple[int, ...]], str] | None = None,
    ) -> pd.DataFrame:
        """The ``syntax`` table (interp.pipeline.tables.SYNTAX): per corpus (in run order), relation
        (alphabetical) and direction with arcs, its ``top`` heads by accuracy (ties: the lower
        layer, then head, first), heads not ``measured`` (NaN attention) left out. ``decode``
        spells a word form's token ids (``nearest_<form>``)."""
        correct, arcs = self.correct.numpy(), self.arcs.numpy()
        with np.errstate(invalid="ignore", divide="ignore"):
            accuracy = correct / arcs[None, :, None]  # [layer, corpus slot, head]
        if measured is not None:
            accuracy = np.where(np.asarray(measured, dtype=bool)[:, None, :], accuracy, np.nan)
        rules: dict[int, dict[tuple, int]] = {}
        for (slot, rule), hits in self.rule_hits.items():
            rules.setdefault(slot, {})[rule] = hits
        rows = []
        by_name = sorted(
            range(self.n_slots), key=lambda s: (self.relations[s // len(DIRECTIONS)], s)
        )
        for c, corpus in enumerate(self.corpora):
            for s in by_name:
                slot = c * self.n_slots + s
                if arcs[slot] == 0:
                    continue
                relation, direction = (
                    self.relations[s // len(DIRECTIONS)],
                    DIRECTIONS[s % len(DIRECTIONS)],
                )
                slot_hits = rules.get(slot, {})
                best = (
                    min(slot_hits, key=lambda r: (-slot_hits[r], _rule_order(r)))
                    if slot_hits
                    else None
                )
                shared = {
                    "corpus": corpus,
                    "relation": relation,
                    "direction": direction,
                    "arcs": int(arcs[slot]),
                    "sentences": int(self.sentences[slot]),
                    "in_features": int(corpus in in_features),
                    "best_rule": rule_name(best, decode) if best else np.nan,
                    "best_rule_accuracy": slot_hits.get(best, 0) / arcs[slot] if best else 0.0,
                    **{
                        offset_column(d): slot_hits.get(("offset", d), 0) / arcs[slot]
                        for d in OFFSETS
                    },
                }
                scores = accuracy[:, slot, :].ravel()  # layer-major: index = layer * n_heads + head
                ranked = [
                    i
                    for i in np.lexsort((np.arange(scores.size), -scores))
                    if np.isfinite(scores[i])
                ][:top]
                for rank, i in enumerate(ranked, 1):
                    layer, head = divmod(int(i), self.n_heads)
                    lo, hi = self._interval(layer, slot, head)
                    rows.append(
                        {
                            **shared,
                            "rank": rank,
                            "layer": layer,
                            "head": head,
                            "accuracy": float(scores[i]),
                            "ci_low": lo,
                            "ci_high": hi,
                        }
                    )
        return pd.DataFrame(rows, columns=_COLUMNS).astype(
            {offset_column(d): float for d in OFFSETS}
        )

    def _interval(self, layer: int, slot: int, head: int) -> tuple[float, float]:
        """The 2.5% and 97.5% bootstrap quantiles of one head's accuracy on one slot."""
        if self.rep_correct.shape[0] == 0:
            return np.nan, np.nan
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter(
                "ignore", RuntimeWarning
            )  # every replicate drew no sentence of the slot
            reps = self.rep_correct[:, layer, slot, head].numpy() / self.rep_arcs[:, slot].numpy()
            lo, hi = np.nanquantile(np.where(np.isfinite(reps), reps, np.nan), [0.025, 0.975])
        return float(lo), float(hi)


_COLUMNS = [
    "corpus",
    "relation",
    "direction",
    "rank",
    "layer",
    "head",
    "accuracy",
    "ci_low",
    "ci_high",
    "arcs",
    "sentences",
    "in_features",
    "best_rule",
    "best_rule_accuracy",
    *(offset_column(d) for d in OFFSETS),
]


def feature_context(
    ctx: FeatureContext,
    reads: Bool[Tensor, " sequence"],
    slot_map: Tensor,
    relations: tuple[str, ...],
) -> FeatureContext:
    """The context the feature accumulator reads: only the arcs of sequences whose treebank the
    features read (``reads``, per sequence of the run), their slots renumbered by ``slot_map``
    (run slot -> slot among ``relations``, the relations those treebanks hold)."""
    narrowed = only_arcs(ctx, reads[ctx.batch.index][ctx.arc_batch])
    return dataclasses.replace(narrowed, arc_slot=slot_map[narrowed.arc_slot], relations=relations)

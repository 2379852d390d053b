"""Collection in shards: the probe batches cut into work units whose sums merge exactly.

The collect stage hands its batches to a collector in *shards* (consecutive batches, about
``SHARD_SEQUENCES`` probe sequences each; the partition depends on the corpus only, never on
where the shards run). A shard is run into fresh accumulators (:class:`CollectState`: the
features, the per-treebank syntax counts, the per-suite sinks and the exemplar patterns), and
the coordinator adds the shards' sums into the totals in shard order, whatever order they come
back in. Bootstrap weights are keyed by sequence (:mod:`interp.collect.bootstrap`), so a
shard's replicates are the same wherever it runs, and the merged tables are those of one
process, bit for bit. The shards go to an executor as :data:`COLLECT` units
(:mod:`interp.executors.work`): in this process, or on Ray actors that load the model once from
the run's spec and send back each shard's sums.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from interp.collect.accumulator import FeatureAccumulator
from interp.collect.exemplars import ExemplarRecorder
from interp.collect.features import DIRECTIONS, FeatureContext, context
from interp.collect.sinks import SuiteSinks
from interp.collect.syntax_table import SyntaxAccumulator, feature_context, feature_corpora
from interp.executors.work import Executor, Work
from interp.model.lens import run_patterns
from interp.model.load import LoadedModel
from interp.probes.base import SYNTAX, ProbeSequence
from interp.probes.batch import make_batch

SHARD_SEQUENCES = 512  # probe sequences per shard (whole batches: a shard may hold more)


@dataclass(frozen=True)
class Treebanks:
    """The run's treebanks (its syntactic suites, in run order) and which of them the features'
    ``syntactic:*`` values read (:func:`interp.collect.syntax_table.feature_corpora`)."""

    corpora: tuple[str, ...]
    in_features: tuple[str, ...]
    corpus_of: tuple[int, ...]  # per sequence: its index in corpora, -1 if it is no treebank
    feature_relations: tuple[str, ...]  # the relations the features' treebanks hold, in run order
    reads: torch.Tensor  # bool [sequence]: its arcs feed the features
    slot_map: torch.Tensor  # long [run slot]: that slot among feature_relations' (-1: none)

    @classmethod
    def of(cls, seqs: list[ProbeSequence], relations: tuple[str, ...], pool: bool) -> Treebanks:
        corpora = tuple(dict.fromkeys(s.suite for s in seqs if s.kind == SYNTAX))
        chosen = feature_corpora(corpora, pool)
        reads = torch.tensor([s.suite in chosen for s in seqs], dtype=torch.bool)
        held = {
            int(r)
            for s in seqs
            if s.suite in chosen and s.arcs is not None
            for r in s.arcs[:, 2].tolist()
        }
        kept = [i for i in range(len(relations)) if i in held]
        slot_map = torch.full((len(relations) * len(DIRECTIONS),), -1, dtype=torch.long)
        for new, old in enumerate(kept):
            for d in range(len(DIRECTIONS)):
                slot_map[old * len(DIRECTIONS) + d] = new * len(DIRECTIONS) + d
        return cls(
            corpora,
            chosen,
            tuple(corpora.index(s.suite) if s.suite in corpora else -1 for s in seqs),
            tuple(relations[i] for i in kept),
            reads,
            slot_map,
        )

    def for_features(self, ctx: FeatureContext) -> FeatureContext:
        """The batch's context as the feature accumulator reads it: only the chosen treebanks' arcs."""
        return feature_context(ctx, self.reads, self.slot_map, self.feature_relations)


@dataclass(frozen=True)
class CollectJob:
    """What every shard of a collection needs besides the model."""

    seqs: tuple[ProbeSequence, ...]
    relations: tuple[str, ...]
    treebanks: Treebanks
    local_window: int
    n_bootstrap: int
    seed: int
    exemplar_tokens: int
    pad_id: int

    def new_state(self, model: LoadedModel) -> CollectState:
        """Empty accumulators for a shard (or for the merged totals)."""
        n_layers, n_heads = model.n_layers, model.n_heads
        return CollectState(
            FeatureAccumulator(
                n_layers, n_heads, self.treebanks.feature_relations, self.n_bootstrap, self.seed
            ),
            SyntaxAccumulator(
                n_layers,
                n_heads,
                self.relations,
                self.treebanks.corpora,
                self.treebanks.corpus_of,
                self.n_bootstrap,
                self.seed,
            ),
            SuiteSinks(n_layers, n_heads, [s.suite for s in self.seqs]),
            ExemplarRecorder(self.seqs, self.exemplar_tokens, n_layers, n_heads, model.tokenizer),
        )


@dataclass
class CollectState:
    """One shard's (or the merged) running sums."""

    features: FeatureAccumulator
    syntax: SyntaxAccumulator
    sinks: SuiteSinks
    exemplars: ExemplarRecorder

    def merge(self, other: CollectState) -> None:
        self.features.merge(other.features)
        self.syntax.merge(other.syntax)
        self.sinks.merge(other.sinks)
        self.exemplars.merge(other.exemplars)


def partition(groups: list[list[int]], size: int = SHARD_SEQUENCES) -> list[list[list[int]]]:
    """Consecutive batches (lists of sequence indices) cut into shards of at least ``size``
    sequences (the last may hold fewer)."""
    shards: list[list[list[int]]] = []
    current: list[list[int]] = []
    for group in groups:
        current.append(group)
        if sum(len(g) for g in current) >= size:
            shards.append(current)
            current = []
    return shards + ([current] if current else [])


def run_shard(
    model: LoadedModel,
    job: CollectJob,
    groups: list[list[int]],
    done: Callable[[int], None] = lambda n: None,
) -> CollectState:
    """One shard's batches through the model, every layer's pattern folded into fresh sums."""
    state = job.new_state(model)
    ctx: FeatureContext | None = None
    features_ctx: FeatureContext | None = None

    def on_pattern(
        layer: int, pattern: torch.Tensor
    ) -> None:  # during the pass of the current batch (ctx)
        if ctx is None or features_ctx is None:
            raise RuntimeError("an attention pattern arrived outside a batch")
        state.sinks.add_layer(layer, pattern, ctx)
        state.features.add_layer(layer, pattern, features_ctx)
        state.syntax.add_layer(layer, pattern, ctx)
        state.exemplars.add_layer(layer, pattern)

    for group in groups:
        batch = make_batch([job.seqs[i] for i in group], group, model.causal, job.pad_id)
        ctx = context(batch, job.relations, job.local_window)
        features_ctx = job.treebanks.for_features(ctx)
        state.features.start_batch(features_ctx)
        state.syntax.start_batch(ctx)
        state.exemplars.start_batch(group)
        state.sinks.start_batch(ctx)
        run_patterns(model, batch.tokens, batch.attention_mask, on_pattern)
        done(len(group))
    return state


def _model(model: LoadedModel) -> LoadedModel:
    return model


def _sequences(job: CollectJob, groups: list[list[int]]) -> int:
    return sum(len(g) for g in groups)


def _facts(groups: list[list[int]]) -> dict[str, Any]:
    return {"sequences": sum(len(g) for g in groups), "batches": len(groups)}


# Collection as an executor runs it (interp.executors.work): a shard is its batches.
COLLECT = Work("collection", _model, run_shard, _sequences, _facts)


def run_shards(
    executor: Executor,
    model: LoadedModel,
    job: CollectJob,
    shards: list[list[list[int]]],
    done: Callable[[int], None] = lambda n: None,
) -> CollectState:
    """Every shard run by ``executor``, their sums added into empty totals in shard order (a
    shard that comes back early waits for those before it), so the totals never depend on
    where or in what order the shards ran."""
    total = job.new_state(model)
    waiting: dict[int, CollectState] = {}
    next_index = 0
    for outcome in executor.map(COLLECT, job, shards, done):
        waiting[outcome.index] = outcome.result
        while next_index in waiting:
            total.merge(waiting.pop(next_index))
            next_index += 1
    if waiting or next_index != len(shards):
        raise RuntimeError(f"the executor returned {next_index} of {len(shards)} shards in order")
    return total

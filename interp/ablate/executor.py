"""The exact sweep in shards: the ablate stage's units of work for an executor.

The stage (the coordinator) cuts the heads it sweeps into :class:`Shard` s, each holding whole
layers (or, when there are fewer layers than shards wanted, a share of one layer's heads), so
that layer reuse still applies inside a shard: its clean pass caches every layer's residual once
per batch and each head reruns only the blocks from its layer on. An executor
(:mod:`interp.executors.work`: this process, or Ray actors) runs each shard with
:func:`run_shard` on some copy of the model and hands back the shard's partial sums (a
:class:`~interp.ablate.stats.SumStore`); only the coordinator merges them
(:meth:`SumStore.merge`, exact: the merged store is the one a single process fills) and only
the coordinator writes the run directory and the manifest.

Locally the whole sweep is one shard, which is the sweep as it always ran. A shard costs one
intact pass per batch on top of its heads' passes, so shards are few elsewhere: two per worker
(what a worker that dies loses, and what keeps the last worker from running alone at the end),
cut to balance the blocks their heads rerun.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from tqdm.auto import tqdm

from interp.ablate.batches import EvalCorpus
from interp.ablate.forward import Ablator
from interp.ablate.metrics import metric_sizes
from interp.ablate.stats import SumStore
from interp.ablate.sweep import exact_sweep
from interp.executors.work import Executor, Work
from interp.model.load import LoadedModel

Head = tuple[int, int]
SHARDS_PER_WORKER = 2


@dataclass(frozen=True)
class Shard:
    """One work unit of a sweep: its heads, of whole layers or a share of one layer's."""

    heads: tuple[Head, ...]

    @property
    def layers(self) -> list[int]:
        return sorted({layer for layer, _ in self.heads})


@dataclass(frozen=True)
class SweepJob:
    """What every shard of one sweep shares: the corpus and the exact_sweep settings."""

    corpus: EvalCorpus
    kinds: tuple[str, ...]
    means: torch.Tensor | None
    heads_per_pass: int | None
    max_tokens: int | None

    @property
    def sizes(self) -> dict[str, int]:
        return metric_sizes(self.corpus.sizes)

    @property
    def passes_per_head(self) -> int:
        """Progress units of one head: a pass per batch and kind."""
        return len(self.corpus.batches) * len(self.kinds)


@dataclass
class ShardResult:
    """A shard's partial sums and whether layer reuse held on its worker."""

    store: SumStore
    reuse: bool


def run_shard(
    ablator: Ablator, job: SweepJob, shard: Shard, done: Callable[[int], None] = lambda n: None
) -> ShardResult:
    """One shard of a sweep on ``ablator``'s model, into a store of its own."""
    store = SumStore(job.sizes)
    reuse = exact_sweep(
        ablator,
        job.corpus,
        store,
        list(shard.heads),
        job.kinds,
        job.means,
        job.heads_per_pass,
        job.max_tokens,
        done=done,
    )
    return ShardResult(store, reuse)


def _ablator(model: LoadedModel) -> Ablator:
    return Ablator(model)


def _passes(job: SweepJob, shard: Shard) -> int:
    return len(shard.heads) * len(job.kinds) * len(job.corpus.batches)


def _facts(shard: Shard) -> dict[str, Any]:
    return {"layers": shard.layers, "heads": len(shard.heads)}


# The exact sweep as an executor runs it (interp.executors.work).
SWEEP = Work("exact sweep", _ablator, run_shard, _passes, _facts)


def partition(heads: list[Head], n_layers: int, n_shards: int) -> list[Shard]:
    """``heads`` cut into at most ``n_shards`` shards, in layer order.

    With at least as many layers as shards, each shard is a run of whole layers, cut where the
    cost so far (a layer-``l`` head reruns ``n_layers - l`` blocks, and every shard runs one
    intact pass) passes the next equal share. With fewer layers, each layer is a shard and the
    costliest are halved by heads until there are ``n_shards``.
    """
    by_layer: dict[int, list[int]] = {}
    for layer, head in sorted(set(heads)):
        by_layer.setdefault(layer, []).append(head)
    units = [[(layer, h) for h in hs] for layer, hs in by_layer.items()]
    n_shards = max(1, n_shards)

    def cost(unit: list[Head]) -> int:
        return sum(n_layers - layer for layer, _ in unit)

    if len(units) <= n_shards:
        while len(units) < n_shards and any(len(u) > 1 for u in units):
            i = max((i for i, u in enumerate(units) if len(u) > 1), key=lambda i: cost(units[i]))
            unit = units[i]
            units[i : i + 1] = [unit[: len(unit) // 2], unit[len(unit) // 2 :]]
        return [Shard(tuple(u)) for u in units]
    total = sum(cost(u) + n_layers for u in units)
    shards: list[list[Head]] = [[]]
    done = 0
    for i, unit in enumerate(units):
        # cut at the next equal share of the cost, or when the layers left are just enough
        if shards[-1] and (
            done * n_shards >= total * len(shards) or len(units) - i <= n_shards - len(shards)
        ):
            shards.append([])
        shards[-1] += unit
        done += cost(unit) + n_layers
    return [Shard(tuple(s)) for s in shards]


def sweep_with(
    executor: Executor,
    job: SweepJob,
    heads: list[Head],
    n_layers: int,
    store: SumStore,
    progress: bool = True,
    n_shards: int | None = None,
) -> bool:
    """The exact sweep of ``heads`` through ``executor``: the shards' sums merged into ``store``
    in shard order (the coordinator's one write); returns whether layer reuse held everywhere.
    ``n_shards``: how many shards (default: one in this process, two per worker elsewhere)."""
    if n_shards is None:
        n_shards = 1 if executor.name == "local" else SHARDS_PER_WORKER * executor.workers
    shards = partition(heads, n_layers, n_shards)
    total = sum(_passes(job, s) for s in shards)
    with tqdm(total=total, desc="ablate: exact", unit="head", disable=not progress) as bar:
        outcomes = sorted(executor.map(SWEEP, job, shards, bar.update), key=lambda o: o.index)
    if [o.index for o in outcomes] != list(range(len(shards))):
        raise RuntimeError("the executor returned another set of shards than it was given")
    for outcome in outcomes:
        store.merge(outcome.result.store)
    return all(o.result.reuse for o in outcomes)

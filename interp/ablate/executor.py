"""Where the exact sweep runs: the seam between the ablate stage and an executor.

The stage (the coordinator) cuts the heads it sweeps into :class:`Shard` s, each holding whole
layers (or, when there are fewer layers than shards wanted, a share of one layer's heads), so
that layer reuse still applies inside a shard: its clean pass caches every layer's residual once
per batch and each head reruns only the blocks from its layer on. An executor runs each shard
with :func:`run_shard` on some copy of the model and hands back the shard's partial sums (a
:class:`~interp.ablate.stats.SumStore`); only the coordinator merges them
(:meth:`SumStore.merge`, exact: the merged store is the one a single process fills) and only
the coordinator writes the run directory and the manifest.

Two executors:

- :class:`LocalExecutor`, the default: every shard in this process on the stage's own model.
  By default the whole sweep is one shard, which is the sweep as it always ran.
- :class:`interp.ablate.ray_executor.RayExecutor` (``--executor ray``, the optional extra
  ``interp[ray]``): Ray actors, each loading the model once from the run's model spec.

A shard costs one intact pass per batch on top of its heads' passes, so shards are few: two per
worker (what a worker that dies loses, and what keeps the last worker from running alone at the
end), cut to balance the blocks their heads rerun.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from tqdm.auto import tqdm

from interp.ablate.evaluation import EvalCorpus
from interp.ablate.forward import Ablator
from interp.ablate.metrics import metric_sizes
from interp.ablate.stats import SumStore
from interp.ablate.sweep import exact_sweep

Head = tuple[int, int]
SHARDS_PER_WORKER = 2


@dataclass(frozen=True)
class Shard:
    """One work unit of a sweep: its number (the merge order) and its heads, of whole layers or
    a share of one layer's."""

    index: int
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
    """A shard's partial sums, whether layer reuse held on its worker, and how long it took."""

    shard: Shard
    store: SumStore
    reuse: bool
    seconds: float
    worker: str = "local"
    attempts: int = 1


def run_shard(ablator: Ablator, job: SweepJob, shard: Shard, progress: bool = False) -> ShardResult:
    """One shard of a sweep on ``ablator``'s model, into a store of its own."""
    start = time.perf_counter()
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
        progress=progress,
    )
    return ShardResult(shard, store, reuse, time.perf_counter() - start)


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
        return [Shard(i, tuple(u)) for i, u in enumerate(units)]
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
    return [Shard(i, tuple(s)) for i, s in enumerate(shards)]


class Executor(Protocol):
    """Runs a sweep's shards somewhere and hands back their partial sums."""

    name: str

    def shards(self, heads: list[Head], n_layers: int) -> list[Shard]:
        """How this executor cuts the heads of one sweep."""

    def run(self, job: SweepJob, shards: list[Shard], progress: bool) -> list[ShardResult]:
        """Every shard's result, each shard's heads measured once."""

    def record(self) -> dict[str, Any]:
        """What the manifest records: the executor, its workers, each shard's time."""


@dataclass
class LocalExecutor:
    """Every shard in this process, on the stage's model (one shard unless ``n_shards`` says)."""

    ablator: Ablator
    n_shards: int = 1
    name: str = "local"
    log: list[dict[str, Any]] = field(default_factory=list)
    sweeps: int = 0

    def shards(self, heads: list[Head], n_layers: int) -> list[Shard]:
        return partition(heads, n_layers, self.n_shards)

    def run(self, job: SweepJob, shards: list[Shard], progress: bool) -> list[ShardResult]:
        results = [run_shard(self.ablator, job, shard, progress=progress) for shard in shards]
        self.log.extend(shard_record(r, self.sweeps) for r in results)
        self.sweeps += 1
        return results

    def record(self) -> dict[str, Any]:
        return {"executor": self.name, "workers": 1, "shards": self.log}


def shard_record(result: ShardResult, sweep: int) -> dict[str, Any]:
    """One shard's line in the manifest (``sweep``: which of the stage's sweeps, one per round and
    family of a sequential sweep)."""
    return {
        "sweep": sweep,
        "shard": result.shard.index,
        "layers": result.shard.layers,
        "heads": len(result.shard.heads),
        "seconds": round(result.seconds, 3),
        "worker": result.worker,
        "attempts": result.attempts,
    }


def sweep_with(
    executor: Executor,
    job: SweepJob,
    heads: list[Head],
    n_layers: int,
    store: SumStore,
    progress: bool = True,
) -> bool:
    """The exact sweep of ``heads`` through ``executor``: the shards' sums merged into ``store``
    in shard order (the coordinator's one write); returns whether layer reuse held everywhere."""
    shards = executor.shards(heads, n_layers)
    results = sorted(executor.run(job, shards, progress), key=lambda r: r.shard.index)
    if [r.shard.index for r in results] != [s.index for s in shards]:
        raise RuntimeError("the executor returned another set of shards than it was given")
    for result in results:
        store.merge(result.store)
    return all(r.reuse for r in results)


def progress_bar(job: SweepJob, shards: list[Shard], progress: bool) -> tqdm:
    """The coordinator's bar over the heads of every shard (advanced as shards come back)."""
    total = sum(len(s.heads) for s in shards) * job.passes_per_head
    return tqdm(total=total, desc="ablate: exact", unit="head", disable=not progress)

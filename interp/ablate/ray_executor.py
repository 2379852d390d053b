"""Ray as the executor of the exact sweep (``--executor ray``; the optional extra ``interp[ray]``).

Each worker is a Ray actor that loads the model once, from the run's recorded model spec (a
model built in Python has none, and is refused: its weights are not shipped through the object
store, which for the models that need a cluster would be the largest transfer of the run), in
the stage's dtype, and runs torch with the stage's thread count: the float sums depend on it (in
the 8th digit), and with it the tables equal the local executor's to the last bit. An actor
reserves that many of the cluster's CPUs (and a GPU when the model's device is one).

The coordinator puts the sweep's corpus in the object store once, hands each idle actor the
next shard (:func:`interp.ablate.executor.partition`: whole layers, so layer reuse applies),
and takes back each shard's partial sums. A worker that dies mid-shard (a lost node, the
OOM killer) returns nothing: its shard goes back in the queue for another actor, a new actor
takes the dead one's place, and the manifest lists the shard as retried; a shard's sums are
only ever taken from the one attempt that returned, so no head is measured twice or lost.
A shard that ends ``MAX_ATTEMPTS`` workers in turn stops the stage.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import ray
import torch
from ray.exceptions import GetTimeoutError, RayActorError

from interp.ablate.config import AblateConfig
from interp.ablate.executor import (
    SHARDS_PER_WORKER,
    Head,
    Shard,
    ShardResult,
    SweepJob,
    partition,
    progress_bar,
    run_shard,
    shard_record,
)
from interp.ablate.forward import Ablator
from interp.errors import ConfigError, RunError
from interp.model.load import LoadedModel, check_dtype, load_model
from interp.model.spec import ModelSpec

MAX_ATTEMPTS = 3  # a shard that ends this many workers in turn is not the workers' fault
# Test hook: shards (by index, in every sweep) whose first attempt ends its worker's process
# once the shard is measured and before its sums are returned: a worker dying mid-sweep.
DIE_ON_FIRST_TRY: frozenset[int] = frozenset()


class SweepWorker:
    """A Ray actor: the model loaded once, shards swept on it (see the module docstring)."""

    def __init__(self, spec: dict[str, Any], dtype: str | None, threads: int):
        torch.set_num_threads(threads)
        model = load_model(ModelSpec(**spec))
        self.ablator = Ablator(_in_dtype(model, dtype))

    def ready(self) -> bool:
        return True

    def sweep(self, job: SweepJob, shard: Shard, die: bool = False) -> ShardResult:
        result = run_shard(self.ablator, job, shard)
        if die:
            os._exit(1)
        return result


def _in_dtype(model: LoadedModel, dtype: str | None) -> LoadedModel:
    """The worker's model in the stage's ablation dtype (converted the way the stage converts its copy)."""
    current = str(next(model.bridge.parameters()).dtype).removeprefix("torch.")
    if dtype is None or dtype == current:
        return model
    model.bridge.to(check_dtype(model.device, dtype))
    return dataclasses.replace(model, dtype=dtype)


@dataclass
class RayExecutor:
    """The sweep's shards on Ray actors; :meth:`start` connects and loads the model on each."""

    spec: dict[str, Any]
    dtype: str | None
    threads: int
    address: str | None
    owned: bool  # whether this stage started Ray (then it shuts it down)
    workers: int
    name: str = "ray"
    actors: dict[str, Any] = field(default_factory=dict)  # worker name -> live actor
    started: int = 0
    load_seconds: float = 0.0
    log: list[dict[str, Any]] = field(default_factory=list)
    retried: list[dict[str, Any]] = field(default_factory=list)
    sweeps: int = 0

    @classmethod
    def start(cls, model: LoadedModel, config: AblateConfig, threads: int) -> RayExecutor:
        if model.spec is None:
            raise ConfigError(
                "--executor ray loads the model on every worker from the run's model spec, and a model "
                "built in Python has none: use the local executor, or load the model by name or path"
            )
        owned = _connect(config.address)
        try:
            cpus = int(ray.cluster_resources().get("CPU", 0))
            workers = config.workers or max(1, min(cpus // threads, model.n_layers))
            if workers * threads > cpus:
                raise ConfigError(
                    f"--workers {workers} with {threads} threads each need {workers * threads} CPUs "
                    f"and the Ray cluster has {cpus}: lower --workers, or pass --threads 1"
                )
            executor = cls(
                dataclasses.asdict(model.spec),
                config.dtype,
                threads,
                config.address,
                owned,
                workers,
            )
            begin = time.perf_counter()
            for _ in range(workers):
                executor._spawn()
            executor._wait_ready(model.name)
            executor.load_seconds = time.perf_counter() - begin
        except BaseException:
            if owned:
                ray.shutdown()
            raise
        return executor

    def shards(self, heads: list[Head], n_layers: int) -> list[Shard]:
        return partition(heads, n_layers, SHARDS_PER_WORKER * self.workers)

    def run(self, job: SweepJob, shards: list[Shard], progress: bool) -> list[ShardResult]:
        job_ref = ray.put(job)
        queue = deque((shard, 1) for shard in shards)
        idle = deque(self.actors)
        running: dict[Any, tuple[str, Shard, int]] = {}
        results: list[ShardResult] = []
        with progress_bar(job, shards, progress) as bar:
            while queue or running:
                while queue and idle:
                    worker = idle.popleft()
                    if worker not in self.actors:
                        continue
                    shard, attempt = queue.popleft()
                    die = attempt == 1 and shard.index in DIE_ON_FIRST_TRY
                    running[self.actors[worker].sweep.remote(job_ref, shard, die)] = (
                        worker,
                        shard,
                        attempt,
                    )
                [ref], _ = ray.wait(list(running), num_returns=1)
                worker, shard, attempt = running.pop(ref)
                try:
                    result = ray.get(ref)
                except RayActorError as exc:  # the worker died: nothing of its shard is kept
                    self._lost(worker, shard, attempt, exc)
                    queue.appendleft((shard, attempt + 1))
                    idle.append(self._spawn())
                    continue
                result.worker, result.attempts = worker, attempt
                results.append(result)
                self.log.append(shard_record(result, self.sweeps))
                idle.append(worker)
                bar.update(len(shard.heads) * job.passes_per_head)
        self.sweeps += 1
        return results

    def record(self) -> dict[str, Any]:
        return {
            "executor": self.name,
            "address": self.address,
            "workers": self.workers,
            "threads_per_worker": self.threads,
            "workers_started": self.started,
            "load_seconds": round(self.load_seconds, 3),
            "shards": self.log,
            "retried": self.retried,
        }

    def close(self) -> None:
        for actor in self.actors.values():
            ray.kill(actor)
        self.actors.clear()
        if self.owned:
            ray.shutdown()

    # --- workers ---------------------------------------------------------------------------

    def _spawn(self) -> str:
        """Start one more actor (it loads the model in the background); return its name."""
        gpu = 1 if str(self.spec.get("device", "cpu")).startswith("cuda") else 0
        actor = ray.remote(num_cpus=self.threads, num_gpus=gpu, max_restarts=0)(SweepWorker)
        name = f"w{self.started}"
        self.actors[name] = actor.remote(self.spec, self.dtype, self.threads)
        self.started += 1
        return name

    def _wait_ready(self, model_name: str) -> None:
        try:
            ray.get([actor.ready.remote() for actor in self.actors.values()])
        except (RayActorError, GetTimeoutError) as exc:
            raise RunError(
                f"the Ray workers could not load the model {model_name}: {_last_line(exc)} (every worker "
                f"needs interp installed and the model at the same path or name)"
            ) from None

    def _lost(self, worker: str, shard: Shard, attempt: int, exc: Exception) -> None:
        self.actors.pop(worker, None)
        self.retried.append(
            {
                "sweep": self.sweeps,
                "shard": shard.index,
                "layers": shard.layers,
                "worker": worker,
                "attempt": attempt,
                "error": _last_line(exc),
            }
        )
        if attempt >= MAX_ATTEMPTS:
            raise RunError(
                f"shard {shard.index} of the exact sweep (layers {shard.layers}) ended {attempt} Ray workers "
                f"in turn, the last with: {_last_line(exc)}"
            )


def _connect(address: str | None) -> bool:
    """Join the Ray cluster at ``address`` (None: start one on this machine); return whether this
    call started Ray. A Ray this process joined already (a notebook, a test) is used as it is."""
    if ray.is_initialized():
        return False
    try:
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RunError(
            f"cannot reach the Ray cluster at {address}: {_last_line(exc)} (start one with "
            f"`ray start --head`, or leave out --address to start one here)"
        ) from None
    return True


def _last_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__

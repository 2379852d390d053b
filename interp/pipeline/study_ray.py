"""A study's runs on Ray (``interp study STUDY.toml --executor ray``): one Ray task per run.

Each pending run is a task that loads its model from the run's model spec and makes the run
with :func:`interp.pipeline.execute.run_pipeline` (``--resume`` where the run directory has a
manifest, so a stopped run continues), reserving as many CPUs as the run's torch threads. The
run writes its own run directory, under its lock (:mod:`interp.pipeline.lock`), as a local run
would; the study's coordinator alone writes ``study.json`` and the comparison. A task whose
worker dies (a lost node, the OOM killer) is retried by Ray on another worker; the retry
resumes the run from its last finished stage, so no stage is recorded twice. A run that fails
with a user error is returned as failed, and the study goes on, as with the local executor.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from interp.errors import InterpError
from interp.pipeline.options import RunOptions

MAX_RETRIES = 2  # a run's task is retried this many times when its worker dies


def make_run(options: RunOptions, threads: int, progress: bool = False) -> dict[str, Any]:
    """One run, start to end, in a worker: its status, error and seconds."""
    import torch

    from interp.model.load import load_model
    from interp.model.spec import model_slug
    from interp.pipeline import rundir
    from interp.pipeline.execute import run_pipeline

    # the task's share of the worker's CPUs: stages whose threads are unset take this count
    # (interp.executors.threads) instead of every CPU the worker's machine has free
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)
    start = time.perf_counter()
    if options.run_name is None:
        raise ValueError("a study's run has a name")
    target = rundir.run_path(options.out_dir, model_slug(options.model.name), options.run_name)
    options = dataclasses.replace(options, resume=(target / rundir.MANIFEST).exists())
    try:
        run_pipeline(options, model=load_model(options.model), progress=progress)
        out = {"status": "complete"}
    except InterpError as exc:
        out = {"status": "failed", "error": str(exc)}
    return {**out, "seconds": round(time.perf_counter() - start, 1)}


def run_all(
    pending: list[tuple[dict[str, Any], RunOptions]],
    address: str | None,
    workers: int | None,
    on_done: Callable[[dict[str, Any], dict[str, Any]], None],
) -> dict[str, Any]:
    """Make every pending run as a Ray task (at most ``workers`` at once; default: as many as the
    cluster's CPUs hold), calling ``on_done(entry, outcome)`` as each ends; returns what the
    study records about the executor."""
    import ray

    from interp.executors.ray_workers import connect

    owned = connect(address)
    try:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        threads = max((threads_of(o) for _, o in pending), default=1)
        limit = workers or max(1, cpus // threads)
        task = ray.remote(num_cpus=threads, max_retries=MAX_RETRIES)(make_run)
        waiting = list(pending)
        running: dict[Any, dict[str, Any]] = {}
        for entry, outcome in _drain(task, waiting, running, limit, threads):
            on_done(entry, outcome)
    finally:
        if owned:
            ray.shutdown()
    return {"executor": "ray", "address": address, "workers": limit, "threads": threads}


def _drain(
    task: Any,
    waiting: list[tuple[dict[str, Any], RunOptions]],
    running: dict[Any, dict[str, Any]],
    limit: int,
    threads: int,
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    import ray
    from ray.exceptions import RayError

    while waiting or running:
        while waiting and len(running) < limit:
            entry, options = waiting.pop(0)
            running[task.remote(options, threads)] = entry
        [ref], _ = ray.wait(list(running), num_returns=1)
        entry = running.pop(ref)
        try:
            outcome = ray.get(ref)
        except (
            RayError
        ) as exc:  # the task's retries ran out: the run is left for the next `interp study`
            lines = [line for line in str(exc).splitlines() if line.strip()]
            why = lines[-1] if lines else type(exc).__name__
            outcome = {"status": "failed", "error": f"its Ray task failed: {why}"}
        yield entry, outcome


def threads_of(options: RunOptions) -> int:
    """The torch threads a run's task reserves CPUs for: the most any stage asks for, else 1."""
    asked = [getattr(config, "threads", None) for config in options.stages.values()]
    return max([1, *(n for n in asked if n)])

"""Benchmark: what running the exact sweep on Ray workers costs on one machine, against the local executor.

One process loads the model and starts a Ray instance on this machine. The same small exact
sweep (zero ablation; every head of every ``--layer-step``-th layer, so that early, costly
layers and late, cheap ones are both in it; a small evaluation corpus) then runs through the
local executor and through Ray with 1 and with 2 workers, each at one torch thread. The machine
is shared and its speed drifts, so each Ray setting is *interleaved* with local sweeps (local,
Ray, local, Ray, ...) and compared with them only: the ratio is the median Ray sweep over the
median local sweep of the same phase. One-time costs are reported apart: starting Ray, and
starting the workers (each loads the model once). Every sweep's effects are checked to be
identical to the first local sweep's.

Usage: ``python benchmarks/ray_overhead.py [--model smollm2-135m] [--layer-step 5] [--repeats 3] [--no-write]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import pandas as pd
import ray
import torch
from _results import markdown, regenerate, write_section  # noqa: E402

from interp.ablate.evaluation import build_corpus  # noqa: E402
from interp.ablate.executor import SHARDS_PER_WORKER, SWEEP, SweepJob, partition, sweep_with  # noqa: E402
from interp.ablate.forward import Ablator  # noqa: E402
from interp.ablate.stats import SumStore, effects_from_sums  # noqa: E402
from interp.executors.placement import Placement  # noqa: E402
from interp.executors.ray_workers import RayExecutor  # noqa: E402
from interp.executors.work import LocalExecutor  # noqa: E402
from interp.model.load import load_model  # noqa: E402

SCRIPT = "benchmarks/ray_overhead.py"
SECTION = "Ray executor overhead on one machine"


def timed_sweep(executor, job: SweepJob, heads, n_layers: int) -> tuple[float, pd.DataFrame]:
    store = SumStore(job.sizes)
    start = time.perf_counter()
    sweep_with(executor, job, heads, n_layers, store, progress=False)
    seconds = time.perf_counter() - start
    return seconds, effects_from_sums(store, "exact", 100, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument(
        "--layer-step", type=int, default=5, help="sweep every head of every n-th layer"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="interleaved local/Ray pairs per Ray setting"
    )
    parser.add_argument(
        "--no-write", action="store_true", help="print, do not write benchmarks/RESULTS.md"
    )
    args = parser.parse_args()

    torch.set_num_threads(1)
    load_before = os.getloadavg()[0]
    model = load_model(args.model)
    corpus = build_corpus(
        model, n_prose=2, n_repeated=2, repeated_lengths=(10,), n_syntax=2, seed=0, max_tokens=2048
    )
    job = SweepJob(corpus, ("zero",), None, None, 2048)
    layers = list(range(0, model.n_layers, args.layer_step))
    heads = [(layer, head) for layer in layers for head in range(model.n_heads)]
    local = LocalExecutor(model, {SWEEP.name: Ablator(model)})
    _, reference = timed_sweep(
        local, job, heads, model.n_layers
    )  # warm-up, and the tables every sweep must give

    start = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray_start = time.perf_counter() - start
    rows, identical = [], True
    try:
        for workers in (1, 2):
            begin = time.perf_counter()
            executor = RayExecutor.start(
                model, Placement(executor="ray", workers=workers), threads=1
            )
            startup = time.perf_counter() - begin
            times: dict[str, list[float]] = {"local": [], "ray": []}
            try:
                for _ in range(args.repeats):
                    for name, ex in (("local", local), ("ray", executor)):
                        seconds, table = timed_sweep(ex, job, heads, model.n_layers)
                        times[name].append(seconds)
                        identical &= table.equals(reference)
                shards = len(partition(heads, model.n_layers, SHARDS_PER_WORKER * workers))
            finally:
                executor.close()
            local_s, ray_s = statistics.median(times["local"]), statistics.median(times["ray"])
            rows.append(
                {
                    "Ray workers": workers,
                    "shards": shards,
                    "local sweep (s, median)": local_s,
                    "Ray sweep (s, median)": ray_s,
                    "Ray / local": ray_s / local_s,
                    "local sweeps' spread (max / min)": max(times["local"]) / min(times["local"]),
                    "workers' start + model load (s)": startup,
                }
            )
    finally:
        ray.shutdown()

    load_after = os.getloadavg()[0]
    frame = pd.DataFrame(rows)
    spread = frame["local sweeps' spread (max / min)"].max()
    starts = frame["workers' start + model load (s)"].tolist()
    body = (
        f"Model `{args.model}`, {len(heads)} heads ({len(layers)} layers: every {args.layer_step}th, all "
        f"{model.n_heads} heads each), zero ablation, {corpus.n_tokens} evaluation tokens in "
        f"{len(corpus.batches)} batches, one torch thread per process; a local Ray instance of 2 CPUs. "
        f"Each Ray setting interleaved with local sweeps, {args.repeats} of each.\n\n"
        f"{markdown(frame)}\n\n"
        f"Ray / local (above 1: the Ray sweep took longer), one worker: **{rows[0]['Ray / local']:.2f}x**, "
        f"two workers: **{rows[1]['Ray / local']:.2f}x**; what Ray adds to a sweep is moving the corpus and "
        f"the sums and one intact pass per shard. The machine is shared: its 1-minute load average was "
        f"{load_before:.1f} at the start and {load_after:.1f} at the end, on {os.cpu_count()} cores, and the "
        f"local sweeps alone spread by up to {spread:.2f}x: "
        f"a ratio within that spread is no measured difference (a second worker gains only where a core is free). "
        f"One-time costs, not in the sweeps: starting Ray {ray_start:.1f} s; starting the workers, each "
        f"loading the model once, {starts[0]:.1f} s (1 worker) and "
        f"{starts[1]:.1f} s (2). Effects identical to the local executor's in every sweep: "
        f"**{'yes' if identical else 'NO'}**."
    )
    print(body)
    if not args.no_write:
        write_section(SECTION, SCRIPT, body)
        regenerate("ray-overhead")  # docs/how-to/scaling.md quotes the summary


if __name__ == "__main__":
    main()

"""Benchmark: the cost model of benchmarks/SCALING.md, measured on this machine and checked.

The cost model counts FLOPs. One transformer block on ``t`` tokens of a ``w``-token padded
batch costs ``t * block_flops(w)`` (the weight matmuls plus the attention scores and mix, see
:func:`block_flops`); reading a metric costs the unembedding on the scored rows only. The exact
sweep ablates head ``(l, h)`` by rerunning blocks ``l..L-1`` from the intact pass' cached
residual, so its cost is ``padded tokens * sum_{j >= l} block_flops + scored rows * unembed``,
plus one intact pass per batch. A machine turns FLOPs into seconds at an effective rate, which
this script calibrates on one intact forward pass and then uses, unchanged, to *predict* every
other measurement:

- cost vs number of heads (3 and 9 heads of one layer),
- cost vs layer depth (every head of layers 0, 10, 20, 29: the rerun shrinks with depth),
- cost vs tokens (the same heads on corpora of about 100, 200 and 400 tokens),
- the estimator (first-order attribution: one forward and one backward pass, about 3 forwards).

Each row gives the prediction, the measurement and their ratio. Every measurement is taken at
one torch thread and repeated (median), and the calibration pass is repeated between the
measurements so that a drift of the shared machine shows as the calibration's spread.

Usage: ``python benchmarks/scaling.py [--model smollm2-135m] [--repeats 3] [--no-write]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass

import pandas as pd
import torch
from _results import markdown, write_section  # noqa: E402

from interp.ablate.attribution import attribute  # noqa: E402
from interp.ablate.batches import EvalCorpus  # noqa: E402
from interp.ablate.evaluation import build_corpus  # noqa: E402
from interp.ablate.executor import SHARDS_PER_WORKER, SWEEP, SweepJob, partition, sweep_with  # noqa: E402
from interp.ablate.forward import Ablator  # noqa: E402
from interp.ablate.stats import SumStore  # noqa: E402
from interp.executors.placement import Placement  # noqa: E402
from interp.executors.work import LocalExecutor  # noqa: E402
from interp.model.load import load_model  # noqa: E402

SCRIPT = "benchmarks/scaling.py"
SECTION = "Scaling: the cost model checked"


@dataclass(frozen=True)
class Arch:
    """What the FLOP count needs to know about a model (public configs for the predictions)."""

    name: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_model: int
    d_head: int
    d_mlp: int
    d_vocab: int
    gated: bool = True

    @property
    def heads(self) -> int:
        return self.n_layers * self.n_heads

    @property
    def params(self) -> float:
        """Weights of the blocks and the unembedding (embeddings are a lookup, not FLOPs)."""
        attn = self.d_model * self.d_head * (2 * self.n_heads + 2 * self.n_kv_heads)
        mlp = (3 if self.gated else 2) * self.d_model * self.d_mlp
        return self.n_layers * (attn + mlp) + self.d_model * self.d_vocab


# Public configurations of the models the predictions are for (Llama 3.x: grouped-query attention, gated MLP).
PREDICTED = (
    Arch("1B (Llama-3.2-1B shape)", 16, 32, 8, 2048, 64, 8192, 128256),
    Arch("8B (Llama-3.1-8B shape)", 32, 32, 8, 4096, 128, 14336, 128256),
    Arch("70B (Llama-3.1-70B shape)", 80, 64, 8, 8192, 128, 28672, 128256),
)
WORKERS = (1, 8, 64)
GPU_MEMORY_GB = 80  # one accelerator's memory (an 80 GB card); a worker holds the whole model


def block_flops(a: Arch, width: int) -> float:
    """FLOPs of one block per token of a ``width``-token sequence: 2 per weight (multiply, add),
    plus the attention scores and the weighted sum over the keys (half of them in a causal model,
    on average; counted in full, as the kernels compute the padded square)."""
    weights = (
        a.d_model * a.d_head * (2 * a.n_heads + 2 * a.n_kv_heads)
        + (3 if a.gated else 2) * a.d_model * a.d_mlp
    )
    return 2 * weights + 4 * a.n_heads * a.d_head * width


def unembed_flops(a: Arch) -> float:
    return 2 * a.d_model * a.d_vocab


def arch_of(model) -> Arch:
    cfg = model.bridge.cfg
    return Arch(
        model.name,
        model.n_layers,
        model.n_heads,
        int(getattr(cfg, "n_key_value_heads", None) or model.n_heads),
        int(cfg.d_model),
        int(cfg.d_head),
        int(cfg.d_mlp),
        int(getattr(model, "d_vocab_out", cfg.d_vocab)),
        bool(getattr(cfg, "gated_mlp", False)),
    )


def corpus_shape(corpus: EvalCorpus) -> list[tuple[int, int, int]]:
    """Per batch: (sequences, padded width, scored rows)."""
    return [(b.tokens.shape[0], b.tokens.shape[1], len(b.row_batch)) for b in corpus.batches]


def forward_flops(a: Arch, shape: list[tuple[int, int, int]], first_layer: int = 0) -> float:
    """One pass over the corpus from block ``first_layer`` on, metrics read on the scored rows."""
    return sum(
        n * w * block_flops(a, w) * (a.n_layers - first_layer) + rows * unembed_flops(a)
        for n, w, rows in shape
    )


def sweep_flops(a: Arch, shape: list[tuple[int, int, int]], heads: list[tuple[int, int]]) -> float:
    """The exact sweep of ``heads``: one intact pass, then each head's rerun from its layer."""
    return forward_flops(a, shape) + sum(forward_flops(a, shape, layer) for layer, _ in heads)


def predictions(
    rate_cpu: float, rate_gpu: float, tokens: int, width: int, load_gb_s: float
) -> pd.DataFrame:
    """The time of one exact sweep of every head of each predicted model on ``tokens`` evaluation
    tokens (sequences of ``width``), on 1 / 8 / 64 workers: CPU workers at this machine's measured
    one-thread rate, GPUs at ``rate_gpu``. Shards are whole layers, so at most ``n_layers``
    workers help; each worker loads the model once (bf16 weights at ``load_gb_s``)."""
    rows = []
    for a in PREDICTED:
        shape = [(tokens // width, width, tokens)]
        flops = sweep_flops(
            a, shape, [(layer, h) for layer in range(a.n_layers) for h in range(a.n_heads)]
        )
        weights_gb = 2 * (a.params + a.d_model * a.d_vocab) / 1e9  # bf16, embedding included
        row = {
            "model": a.name,
            "heads": a.heads,
            "sweep PFLOP": flops / 1e15,
            "bf16 weights GB": weights_gb,
        }
        for kind, rate in (("CPU", rate_cpu), ("GPU", rate_gpu)):
            for n in WORKERS:
                used = min(n, a.n_layers)
                seconds = flops / (rate * used) + weights_gb / load_gb_s
                fits = kind == "CPU" or weights_gb * 1.2 <= GPU_MEMORY_GB
                row[f"{kind} x{n}"] = duration(seconds) if fits else "does not fit"
        rows.append(row)
    return pd.DataFrame(rows)


def duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def ray_sentence(frame: pd.DataFrame) -> str:
    """1 vs 2 Ray workers: the speed-up the model predicts (two cores free) against the measured one."""
    ray_rows = frame[frame["what"].str.startswith("Ray")]
    if len(ray_rows) != 2:
        return ""
    one, two = ray_rows.iloc[0], ray_rows.iloc[1]
    return (
        f" Ray, 2 workers against 1: predicted {one['predicted s'] / two['predicted s']:.2f}x faster with both "
        f"cores free, measured {one['measured s'] / two['measured s']:.2f}x; a second worker gains only the share "
        f"of a core the machine's other work leaves it."
    )


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def check_ray(
    model, arch: Arch, corpus: EvalCorpus, rows: list[dict], flops_per_s: float, repeats: int
) -> None:
    """1 vs 2 Ray workers (one thread each) on every head of 4 layers. Predicted: each shard costs
    its heads' reruns plus one intact pass, at the calibrated rate; the workers run in parallel (at
    most as many as the machine has cores), so the wall time is the even share of the shards or
    the largest shard. Not in the prediction: starting Ray and the workers (reported apart by
    benchmarks/ray_overhead.py), moving the corpus and the sums."""
    import ray

    from interp.executors.ray_workers import RayExecutor

    layers = sorted({0, model.n_layers // 3, 2 * model.n_layers // 3, model.n_layers - 1})
    heads = [(layer, h) for layer in layers for h in range(model.n_heads)]
    job = SweepJob(corpus, ("zero",), None, None, 2048)
    shape = corpus_shape(corpus)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        for workers in (1, 2):
            executor = RayExecutor.start(
                model, Placement(executor="ray", workers=workers), threads=1
            )
            try:
                shards = partition(heads, model.n_layers, SHARDS_PER_WORKER * workers)
                each = [sweep_flops(arch, shape, list(shard.heads)) for shard in shards]
                # a free worker takes the next shard: the wall time is the even share, or the largest shard
                flops = max(sum(each) / min(workers, os.cpu_count() or 1), max(each))
                seconds = median_time(
                    lambda: sweep_with(
                        executor, job, heads, model.n_layers, SumStore(job.sizes), progress=False
                    ),
                    repeats,
                )
            finally:
                executor.close()
            rows.append(
                {
                    "what": f"Ray, {workers} worker(s), every head of layers {', '.join(map(str, layers))} "
                    f"({len(shards)} shards)",
                    "tokens": corpus.n_tokens,
                    "GFLOP": sum(each) / 1e9,
                    "predicted s": flops / flops_per_s,
                    "measured s": seconds,
                    "measured / predicted": seconds * flops_per_s / flops,
                }
            )
    finally:
        ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--gpu-tflops",
        type=float,
        default=300.0,
        help="assumed effective bf16 rate of one GPU for the predictions (TFLOP/s)",
    )
    parser.add_argument(
        "--tokens", type=int, default=4000, help="evaluation tokens of the predicted sweeps"
    )
    parser.add_argument(
        "--load-gb-s", type=float, default=1.0, help="assumed model loading speed per worker (GB/s)"
    )
    parser.add_argument("--no-ray", action="store_true", help="skip the 1 vs 2 Ray workers check")
    parser.add_argument(
        "--no-write", action="store_true", help="print, do not write benchmarks/RESULTS.md"
    )
    args = parser.parse_args()

    torch.set_num_threads(1)
    load_before = os.getloadavg()[0]
    model = load_model(args.model)
    arch = arch_of(model)
    ablator = Ablator(model)
    local = LocalExecutor(model, {SWEEP.name: ablator})
    corpora = {
        n: build_corpus(
            model,
            n_prose=n,
            n_repeated=n,
            repeated_lengths=(10,),
            n_syntax=2 * n,
            seed=0,
            max_tokens=2048,
        )
        for n in (1, 2, 4)
    }
    mid = corpora[2]

    def intact(corpus: EvalCorpus) -> None:
        with torch.inference_mode():
            for batch in corpus.batches:
                ablator.clean(batch)

    def sweep(corpus: EvalCorpus, heads: list[tuple[int, int]]) -> None:
        job = SweepJob(corpus, ("zero",), None, None, 2048)
        sweep_with(local, job, heads, model.n_layers, SumStore(job.sizes), progress=False)

    layer = model.n_layers // 2
    reference = [(layer, h) for h in range(model.n_heads)]
    sweep(mid, reference)  # warm-up
    calibrations: list[float] = []

    def calibrate() -> None:
        seconds = median_time(lambda: sweep(mid, reference), args.repeats)
        calibrations.append(sweep_flops(arch, corpus_shape(mid), reference) / seconds)

    checks: list[tuple[str, EvalCorpus, float, object]] = []
    for k in (1, 3):
        heads = [(layer, h) for h in range(k)]
        checks.append(
            (
                f"exact sweep, {k} head(s) of layer {layer}",
                mid,
                sweep_flops(arch, corpus_shape(mid), heads),
                lambda heads=heads: sweep(mid, heads),
            )
        )
    for depth in sorted({0, model.n_layers // 3, 2 * model.n_layers // 3, model.n_layers - 1}):
        heads = [(depth, h) for h in range(model.n_heads)]
        checks.append(
            (
                f"exact sweep, every head of layer {depth}",
                mid,
                sweep_flops(arch, corpus_shape(mid), heads),
                lambda heads=heads: sweep(mid, heads),
            )
        )
    for n in (1, 4):
        corpus = corpora[n]
        checks.append(
            (
                f"exact sweep, every head of layer {layer}",
                corpus,
                sweep_flops(arch, corpus_shape(corpus), reference),
                lambda corpus=corpus: sweep(corpus, reference),
            )
        )
    checks.append(
        (
            "attribution, every head (1 forward + 1 backward = 3 forwards)",
            mid,
            3 * forward_flops(arch, corpus_shape(mid)),
            lambda: attribute(ablator, mid, ("zero",), progress=False),
        )
    )
    checks.append(
        (
            "one intact forward pass",
            mid,
            forward_flops(arch, corpus_shape(mid)),
            lambda: intact(mid),
        )
    )

    measured = []
    for i, (what, corpus, flops, fn) in enumerate(checks):
        if i % 3 == 0:
            calibrate()  # the reference sweep between the checks: a drift of the machine shows in its spread
        measured.append((what, corpus, flops, median_time(fn, args.repeats)))
    calibrate()
    flops_per_s = statistics.median(calibrations)
    rows = [
        {
            "what": what,
            "tokens": corpus.n_tokens,
            "GFLOP": flops / 1e9,
            "predicted s": flops / flops_per_s,
            "measured s": seconds,
            "measured / predicted": seconds * flops_per_s / flops,
        }
        for what, corpus, flops, seconds in measured
    ]
    if not args.no_ray:
        check_ray(model, arch, mid, rows, flops_per_s, args.repeats)
    load_after = os.getloadavg()[0]

    frame = pd.DataFrame(rows)
    ratios = frame["measured / predicted"]
    sweeps = frame[frame["what"].str.startswith("exact")]
    per_head = sweep_flops(arch, corpus_shape(mid), reference[:1]) - forward_flops(
        arch, corpus_shape(mid)
    )
    body = (
        f"Model `{args.model}`: {arch.n_layers} layers x {arch.n_heads} heads ({arch.n_kv_heads} key/value heads), "
        f"d_model {arch.d_model}, d_mlp {arch.d_mlp}, {arch.d_vocab} output logits: {arch.params / 1e6:.0f} M "
        f"weights in the blocks and the unembedding. One torch thread; zero ablation; medians of {args.repeats}.\n\n"
        f"Calibration: the exact sweep of every head of layer {layer} on the {mid.n_tokens}-token corpus runs at "
        f"**{flops_per_s / 1e9:.1f} GFLOP/s** (one thread; the median of {len(calibrations)} calibrations taken "
        f"between the checks, spread {max(calibrations) / min(calibrations):.2f}x). Every prediction below is "
        f"its FLOP count at that one rate.\n\n"
        f"{markdown(frame)}\n\n"
        f"Exact sweep rows: measured / predicted from {sweeps['measured / predicted'].min():.2f} to "
        f"{sweeps['measured / predicted'].max():.2f} (all rows {ratios.min():.2f} to {ratios.max():.2f}). "
        f"A head of layer {layer} costs {per_head / 1e9:.2f} GFLOP on the {mid.n_tokens}-token corpus "
        f"({per_head / mid.n_tokens / 1e6:.0f} MFLOP per token). The machine is shared: its 1-minute load "
        f"average was {load_before:.1f} at the start and {load_after:.1f} at the end, on {os.cpu_count()} cores."
        f"{ray_sentence(frame)}"
    )
    rate_cpu = flops_per_s
    table = predictions(rate_cpu, args.gpu_tflops * 1e12, args.tokens, 64, args.load_gb_s)
    body += (
        f"\n\n### Predictions\n\nOne exact sweep of every head on {args.tokens} evaluation tokens (sequences of 64), "
        f"zero or mean ablation, by the FLOP count of the cost model (benchmarks/SCALING.md): on CPU workers of "
        f"one thread at this machine's "
        f"{rate_cpu / 1e9:.1f} GFLOP/s, and on GPUs at an assumed effective {args.gpu_tflops:.0f} TFLOP/s in bf16 "
        f"(about a third of an 80 GB H100's dense peak; not measured here: benchmarks/gpu_check.py measures a GPU's "
        f"stage times where one is present). Shards are whole layers, so a model never uses more workers than it "
        f"has layers; each worker loads the bf16 model once at an assumed {args.load_gb_s:g} GB/s; 'does not fit': "
        f"the weights and 20% working memory exceed one {GPU_MEMORY_GB} GB GPU, and the toolkit does not split a "
        f"model across devices.\n\n{markdown(table)}"
    )
    print(body)
    if not args.no_write:
        write_section(SECTION, SCRIPT, body)


if __name__ == "__main__":
    main()

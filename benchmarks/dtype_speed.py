"""Benchmark: are the half-precision options worth it on this machine? fp32 vs bf16 vs fp16 on SmolLM2.

One stacked pass shaped like the exact sweep's (the first prose batch of the default evaluation
corpus, 8 copies), intact, timed under each dtype and thread count, interleaved over
``--rounds`` rounds (best of). Also the largest |logit| difference between each half precision
and fp32 on that pass, relative to the largest fp32 logit: what it costs in accuracy.

Then what it costs where a researcher reads it: one round of the ablate stage's exact sweep
(mean ablation, every head, the default evaluation corpus, no estimator, no pruning) in fp32 and
in bf16, and per metric how far the bf16 effects lie from the fp32 ones, in units of the fp32
interval's half-width (the sampling error the table already states), and how many of the 20
largest effects the two share.

Usage: ``python benchmarks/dtype_speed.py [--rounds 3] [--no-write]``  (about four minutes)
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import torch
from _results import write_section  # noqa: E402

from interp import ModelSpec  # noqa: E402
from interp.ablate.config import CPU_TOKENS_PER_PASS  # noqa: E402
from interp.ablate.evaluation import build_corpus  # noqa: E402
from interp.ablate.forward import Ablator  # noqa: E402
from interp.ablate.stage import AblateConfig, ablate  # noqa: E402
from interp.model.load import load_model  # noqa: E402

SCRIPT = "benchmarks/dtype_speed.py"
COPIES = 8
TOP = 20


def exact_effects(model, dtype: str) -> tuple[pd.DataFrame, float]:
    """One round of the exact sweep in ``dtype``: (exact effects by metric, layer, head; seconds)."""
    cfg = AblateConfig(max_rounds=1, prune=False, attribution=False, dtype=dtype)
    start = time.perf_counter()
    effects = ablate(model, cfg, progress=False).effects
    seconds = time.perf_counter() - start
    return effects.set_index(["metric", "layer", "head"]).sort_index(), seconds


def effect_rows(fp32: pd.DataFrame, bf16: pd.DataFrame) -> list[str]:
    """Per metric: bf16 against fp32 effects, in fp32 half-widths, and the top-20 overlap."""
    rows = []
    for metric in fp32.index.unique("metric"):
        a, b = fp32.loc[metric], bf16.loc[metric].reindex(fp32.loc[metric].index)
        off = (b["delta"] - a["delta"]).abs() / ((a["ci_high"] - a["ci_low"]) / 2)
        shared = set(a["delta"].abs().nlargest(TOP).index) & set(
            b["delta"].abs().nlargest(TOP).index
        )
        rows.append(
            f"| {metric} | {np.corrcoef(a['delta'], b['delta'])[0, 1]:.4f} | {off.median():.2f} "
            f"| {off.quantile(0.9):.2f} | {len(shared)} of {TOP} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    cfg = AblateConfig(max_tokens_per_batch=CPU_TOKENS_PER_PASS)
    ablators, batches = {}, {}
    for dtype in ("float32", "bfloat16", "float16"):
        model = load_model(ModelSpec(name="smollm2-135m", dtype=dtype))
        corpus = build_corpus(
            model,
            cfg.n_prose,
            cfg.n_repeated,
            cfg.repeated_lengths,
            cfg.n_syntax,
            cfg.seed,
            cfg.max_tokens_per_batch,
        )
        ablators[dtype], batches[dtype] = Ablator(model), corpus.batches[0]
        ablators[dtype].run(batches[dtype], [], replicas=COPIES)  # warm-up: first-call allocations
    threads = sorted({1, torch.get_num_threads()})
    best = {(d, n): float("inf") for d in ablators for n in threads}
    for _ in range(args.rounds):
        for n in threads:
            torch.set_num_threads(n)
            for dtype, ablator in ablators.items():
                start = time.perf_counter()
                ablator.run(batches[dtype], [], replicas=COPIES)
                best[dtype, n] = min(best[dtype, n], time.perf_counter() - start)
    torch.set_num_threads(threads[-1])
    fp32 = ablators["float32"].clean(batches["float32"]).readout.float()
    rel = {
        d: float(
            (fp32 - ablators[d].clean(batches[d]).readout.float()).abs().max() / fp32.abs().max()
        )
        for d in ("bfloat16", "float16")
    }
    effects, sweep_s = {}, {}
    for dtype in ("float32", "bfloat16"):
        effects[dtype], sweep_s[dtype] = exact_effects(ablators["float32"].model, dtype)
    tokens = batches["float32"].tokens.numel() * COPIES
    rows = [
        f"| {n} | {best['float32', n]:.2f} s | {best['bfloat16', n]:.2f} s | {best['float16', n]:.2f} s | "
        f"{best['bfloat16', n] / best['float32', n]:.1f}x | {best['float16', n] / best['float32', n]:.1f}x |"
        for n in threads
    ]
    body = "\n".join(
        [
            f"One intact SmolLM2 pass of {tokens} padded tokens (first prose batch x {COPIES} copies, the shape of an "
            f"exact-sweep pass), best of {args.rounds} interleaved rounds; CPU capability "
            f"`{torch.backends.cpu.get_cpu_capability()}`.",
            "",
            "| torch threads | float32 | bfloat16 | float16 | bf16 / fp32 time | fp16 / fp32 time |",
            "| ---: | ---: | ---: | ---: | ---: | ---: |",
            *rows,
            "",
            f"Largest |logit difference| vs fp32, relative to the largest fp32 logit: bf16 {rel['bfloat16']:.3f}, "
            f"fp16 {rel['float16']:.4f}. Both halve memory; bf16 pays only where the hardware has native bf16 "
            "(GPUs, CPUs with AVX512-BF16 / AMX), fp16 where it has fp16 arithmetic (GPUs, CPUs with AVX512-FP16 / AMX-FP16).",
            "",
            f"**Effects in bf16.** One round of the exact sweep (mean ablation, all heads, the default "
            f"evaluation corpus) took {sweep_s['float32']:.0f} s in fp32 and {sweep_s['bfloat16']:.0f} s in bf16 "
            f"({sweep_s['bfloat16'] / sweep_s['float32']:.2f}x), every torch thread. Per metric: the correlation of "
            "the bf16 effects with the fp32 ones; |bf16 - fp32 effect| in units of the fp32 interval's half-width "
            "(the sampling error the table states; median and 90th percentile over heads); and how many of the "
            f"{TOP} largest effects the two share.",
            "",
            "| metric | correlation | median, half-widths | 90th percentile, half-widths | top 20 shared |",
            "| --- | ---: | ---: | ---: | ---: |",
            *effect_rows(effects["float32"], effects["bfloat16"]),
        ]
    )
    print(body)
    if not args.no_write:
        write_section("dtype_speed", SCRIPT, body)


if __name__ == "__main__":
    main()

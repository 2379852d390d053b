"""Benchmark: are the half-precision options worth it on this machine? fp32 vs bf16 vs fp16 on SmolLM2.

One stacked pass shaped like the exact sweep's (the first prose batch of the default evaluation
corpus, 8 copies), intact, timed under each dtype and thread count, interleaved over
``--rounds`` rounds (best of). Also the largest |logit| difference between each half precision
and fp32 on that pass, relative to the largest fp32 logit: what it costs in accuracy.

Usage: ``python benchmarks/dtype_speed.py [--rounds 3] [--no-write]``  (about a minute)
"""

from __future__ import annotations

import argparse
import time

import torch
from _results import write_section  # noqa: E402

from interp import ModelSpec  # noqa: E402
from interp.ablate.config import CPU_TOKENS_PER_PASS  # noqa: E402
from interp.ablate.evaluation import build_corpus  # noqa: E402
from interp.ablate.forward import Ablator  # noqa: E402
from interp.ablate.stage import AblateConfig  # noqa: E402
from interp.model.load import load_model  # noqa: E402

SCRIPT = "benchmarks/dtype_speed.py"
COPIES = 8


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
        ]
    )
    print(body)
    if not args.no_write:
        write_section("dtype_speed", SCRIPT, body)


if __name__ == "__main__":
    main()

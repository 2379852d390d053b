"""Benchmark: the exact all-head ablation sweep on SmolLM2, against the naive loop and attribution.

Measured in one process, on the default evaluation corpus (AblateConfig()):

1. ``ablate(model, AblateConfig(estimator="attribution"))``: attribution for every head, the exact sweep of all 270
   heads (zero ablation, layer reuse, a layer's heads stacked in one pass), the pruning curve.
2. The naive loop: one full forward per head and batch (no layer reuse, all logits, one head
   per pass) on the same corpus. Its cost does not depend on the head, so it is timed on a
   seeded random subset of heads and extrapolated linearly to all 270 (said in the table).
   The machine is shared, so its speed drifts by 2-3x within minutes: the like-for-like
   numbers are *interleaved* (naive and exact alternate head by head; heads-per-pass options
   alternate, twice), and only ratios of interleaved timings are compared.
3. Attribution vs exact: Spearman rank correlation of the 270 deltas, the overlap of the
   top-20 heads (largest delta = most harmful to remove) and the share of equal signs, per
   metric; attribution's cost in forward-pass equivalents (its wall time over one intact pass
   over the corpus, timed right after it).

Usage: ``python benchmarks/ablation_sweep.py [--naive-heads 12] [--out DIR] [--no-write]``
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from _results import markdown, write_section  # noqa: E402
from scipy.stats import spearmanr

from interp.ablate.config import CPU_TOKENS_PER_PASS  # noqa: E402
from interp.ablate.evaluation import build_corpus  # noqa: E402
from interp.ablate.forward import Ablator, Edit  # noqa: E402
from interp.ablate.metrics import causal_metric, metric_sizes  # noqa: E402
from interp.ablate.stage import AblateConfig, ablate  # noqa: E402
from interp.ablate.stats import SumStore  # noqa: E402
from interp.ablate.sweep import exact_sweep  # noqa: E402
from interp.executors.threads import stage_threads  # noqa: E402
from interp.model.load import load_model  # noqa: E402

SCRIPT = "benchmarks/ablation_sweep.py"


def corpus_for(model, cfg: AblateConfig):
    return build_corpus(
        model,
        cfg.n_prose,
        cfg.n_repeated,
        cfg.repeated_lengths,
        cfg.n_syntax,
        cfg.seed,
        cfg.max_tokens_per_batch,
    )


def clean_pass_seconds(ablator: Ablator, corpus) -> float:
    start = time.perf_counter()
    for batch in corpus.batches:
        ablator.clean(batch)
    return time.perf_counter() - start


def _zero(head: int):
    def hook(z, hook):
        z = z.clone()
        z[:, :, head] = 0
        return z

    return hook


def naive_head(model, corpus, layer: int, head: int) -> float:
    """The naive way: a plain full forward (all logits) per batch, the head zeroed at hook_z."""
    start = time.perf_counter()
    for batch in corpus.batches:
        with torch.inference_mode():
            logits = model.bridge.run_with_hooks(
                batch.tokens,
                attention_mask=batch.attention_mask,
                fwd_hooks=[(f"blocks.{layer}.attn.hook_z", _zero(head))],
            )
        causal_metric(logits[batch.row_batch, batch.row_pos], batch)
    return time.perf_counter() - start


def reused_head(ablator: Ablator, corpus, cleans, layer: int, head: int) -> float:
    """The sweep's way for one head alone: rerun from its layer, read the scored rows only."""
    start = time.perf_counter()
    for batch, clean in zip(corpus.batches, cleans):
        ablator.run(
            batch,
            [Edit(layer, head, torch.zeros(()))],
            start_layer=layer,
            resid=clean.resid_pre[layer] if layer else None,
        )
    return time.perf_counter() - start


def interleaved_naive_vs_reuse(model, ablator, corpus, heads) -> tuple[float, float]:
    """Seconds per head, naive and layer reuse, alternating head by head on the same heads."""
    cleans = [ablator.clean(b, keep_resid=True) for b in corpus.batches]
    naive = reused = 0.0
    for layer, head in heads:
        naive += naive_head(model, corpus, layer, head)
        reused += reused_head(ablator, corpus, cleans, layer, head)
    return naive / len(heads), reused / len(heads)


def interleaved_heads_per_pass(
    ablator: Ablator, corpus, layer: int, n_heads: int, reps: int = 2
) -> dict[int, float]:
    """Seconds for one layer's heads with 1, 3 and all heads per pass, options alternating."""
    out: dict[int, float] = {}
    for _ in range(reps):
        for hpp in sorted({1, 3, n_heads}):
            store = SumStore(metric_sizes(corpus.sizes))
            start = time.perf_counter()
            exact_sweep(
                ablator,
                corpus,
                store,
                [(layer, h) for h in range(n_heads)],
                ("zero",),
                None,
                heads_per_pass=hpp,
                progress=False,
            )
            out[hpp] = out.get(hpp, 0.0) + (time.perf_counter() - start) / reps
    return out


def agreement(effects: pd.DataFrame, top: int = 20) -> pd.DataFrame:
    rows = []
    for metric, group in effects[effects["ablation"] == "zero"].groupby("metric"):
        wide = group.pivot_table(
            index=["layer", "head"], columns="estimator", values="delta"
        ).dropna()
        if not {"exact", "attribution"} <= set(wide.columns):
            continue
        top_exact = set(wide["exact"].nlargest(top).index)
        top_attr = set(wide["attribution"].nlargest(top).index)
        rows.append(
            {
                "metric": metric,
                "heads": len(wide),
                "spearman": spearmanr(wide["exact"], wide["attribution"]).statistic,
                f"top{top}_overlap": len(top_exact & top_attr) / top,
                "sign_agreement": float(
                    (np.sign(wide["exact"]) == np.sign(wide["attribution"])).mean()
                ),
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--naive-heads", type=int, default=12, help="random heads the naive loop is timed on"
    )
    parser.add_argument(
        "--hpp-layer",
        type=int,
        default=20,
        help="layer whose heads time the heads-per-pass options",
    )
    parser.add_argument(
        "--out", type=Path, help="also write the effects and pruning tables (csv) here"
    )
    parser.add_argument(
        "--no-write", action="store_true", help="print only; leave RESULTS.md alone"
    )
    args = parser.parse_args()

    t = time.perf_counter()
    model = load_model("smollm2-135m")
    load_s = time.perf_counter() - t
    cfg = AblateConfig(
        estimator="attribution", max_tokens_per_batch=CPU_TOKENS_PER_PASS
    )  # this benchmark times attribution; estimators.py compares both
    result = ablate(model, cfg, progress=True)
    timings = result.timings
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        result.effects.to_csv(args.out / "effects.csv", index=False)
        result.pruning.to_csv(args.out / "pruning.csv", index=False)

    threads = result.summary[
        "threads"
    ]  # what the stage measured to be faster: the comparisons use it too
    with stage_threads(threads):
        ablator = Ablator(model)
        corpus = corpus_for(model, cfg)
        forward_s = clean_pass_seconds(ablator, corpus)
        heads = random.Random(0).sample(
            [(l, h) for l in range(model.n_layers) for h in range(model.n_heads)], args.naive_heads
        )
        naive_per_head, reuse_per_head = interleaved_naive_vs_reuse(model, ablator, corpus, heads)
        hpp = interleaved_heads_per_pass(ablator, corpus, args.hpp_layer, model.n_heads)
    agree = agreement(result.effects)
    body = report(
        model,
        cfg,
        corpus,
        load_s,
        threads,
        timings,
        forward_s,
        naive_per_head,
        reuse_per_head,
        hpp,
        agree,
        result.summary["removable"],
        args,
    )
    print(body)
    if not args.no_write:
        write_section("ablation_sweep", SCRIPT, body)


def report(
    model,
    cfg,
    corpus,
    load_s,
    threads,
    timings,
    forward_s,
    naive_per_head,
    reuse_per_head,
    hpp,
    agree,
    removable,
    args,
) -> str:
    n_total = model.n_layers * model.n_heads
    shapes = ", ".join(str(tuple(b.tokens.shape)) for b in corpus.batches)
    sizes = ", ".join(f"{f} {n}" for f, n in corpus.sizes.items())
    hpp_gain = hpp[1] / min(hpp.values())
    naive_total = naive_per_head * n_total
    lines = [
        f"SmolLM2-135M (30 x 9 heads), fp32, {threads} torch thread(s) during the stage "
        f"(AblateConfig.threads=None: the usable CPUs other processes left free, counted at the start of the stage). Model load {load_s:.0f} s. "
        "A shared machine's speed drifts within minutes, so compare the interleaved ratios, "
        "not wall times taken minutes apart.",
        "",
        f"Default evaluation corpus (sequences): {sizes}; {corpus.n_tokens} tokens, "
        f"{sum(b.tokens.numel() for b in corpus.batches)} padded, in {len(corpus.batches)} batches {shapes}.",
        "",
        "| step (default `ablate()`) | wall time | forward-pass equivalents |",
        "| --- | ---: | ---: |",
        f"| one intact pass over the corpus (timed after the stage) | {forward_s:.1f} s | 1 |",
        f"| attribution, all {n_total} heads (1 forward + 1 backward per batch) | {timings['attribution']:.1f} s "
        f"| {timings['attribution'] / forward_s:.1f} |",
        f"| exact sweep, all {n_total} heads (layer reuse, all heads of a layer per pass) | {timings['exact']:.0f} s "
        f"| {timings['exact'] / forward_s:.0f} |",
        f"| pruning curve (5% steps, 20 steps) | {timings['pruning']:.0f} s | {timings['pruning'] / forward_s:.0f} |",
        f"| whole `ablate()` | {timings['total']:.0f} s | |",
        "",
        f"Interleaved on {args.naive_heads} random heads (seed 0), one head per pass: naive loop "
        f"{naive_per_head:.1f} s/head (x {n_total} = {naive_total:.0f} s, extrapolated), layer reuse + row readout "
        f"{reuse_per_head:.1f} s/head: **{naive_per_head / reuse_per_head:.1f}x**. Heads per pass (layer "
        f"{args.hpp_layer}, interleaved, mean of 2): "
        + ", ".join(f"{k}: {v:.1f} s" for k, v in hpp.items())
        + f": **{hpp_gain:.2f}x** for the best over one. Together: the exact sweep is about "
        f"**{naive_per_head / reuse_per_head * hpp_gain:.1f}x** faster than the naive loop.",
        "",
        f"Attribution vs exact (zero ablation, all {n_total} heads); attribution costs "
        f"{timings['attribution'] / forward_s:.1f} forward-pass equivalents against "
        f"{timings['exact'] / forward_s:.0f} for the exact sweep:",
        "",
        markdown(agree),
        "",
        "Pruning (zero ablation, least important first, measured on the held-out half of the evaluation corpus): "
        "share of heads removable before the metric worsens by more than 1% / 5%: "
        + "; ".join(
            f"{m} {v['1%']['share']:.0%} / {v['5%']['share']:.0%}" for m, v in removable.items()
        )
        + ".",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()

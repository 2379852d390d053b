"""Benchmark: the exact all-head ablation sweep on SmolLM2, against the naive loop and attribution.

Measured in one process, on the default evaluation corpus (AblateConfig()):

1. ``ablate(model, AblateConfig())``: attribution for every head, the exact sweep of all 270
   heads (zero ablation, layer reuse, heads batched per pass as configured), the pruning curve.
2. The naive loop: one full forward per head and batch (no layer reuse, full logits, one head
   per pass) on the same corpus. Its cost does not depend on the head, so it is timed on a
   seeded random subset of heads and extrapolated linearly to all of them (said in the table).
3. Heads per pass: the exact sweep of one layer's heads with 1, 3 and all 9 heads per pass.
4. Attribution vs exact: Spearman rank correlation of the deltas over the 270 heads and the
   overlap of the top-20 heads (largest delta = most harmful to remove), per metric; the
   attribution cost in forward-pass equivalents (its wall time over one intact pass over the
   corpus).

Usage: ``python benchmarks/ablation_sweep.py [--naive-heads 12] [--no-write]``
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_section  # noqa: E402

from interp.ablate import AblateConfig, _threads, ablate  # noqa: E402
from interp.ablation.corpus import build_corpus  # noqa: E402
from interp.ablation.forward import Runner  # noqa: E402
from interp.ablation.metrics import causal_metric, metric_sizes  # noqa: E402
from interp.ablation.stats import SumStore  # noqa: E402
from interp.ablation.sweep import exact_sweep  # noqa: E402
from interp.models import load_model  # noqa: E402

SCRIPT = "benchmarks/ablation_sweep.py"


def corpus_for(model, cfg: AblateConfig):
    return build_corpus(model, cfg.n_prose, cfg.n_repeated, cfg.repeated_lengths, cfg.n_syntax, cfg.seed,
                        cfg.max_tokens_per_batch)


def clean_pass_seconds(runner: Runner, corpus) -> float:
    start = time.perf_counter()
    for batch in corpus.batches:
        runner.clean(batch)
    return time.perf_counter() - start


def naive_seconds_per_head(model, corpus, heads: list[tuple[int, int]]) -> float:
    """One plain full forward (all logits) per head and batch, the head zeroed by a hook_z hook."""
    def zero(head: int):
        def hook(z, hook):
            z = z.clone()
            z[:, :, head] = 0
            return z
        return hook

    start = time.perf_counter()
    for layer, head in heads:
        for batch in corpus.batches:
            with torch.inference_mode():
                logits = model.bridge.run_with_hooks(batch.tokens, attention_mask=batch.attention_mask,
                                                     fwd_hooks=[(f"blocks.{layer}.attn.hook_z", zero(head))])
            causal_metric(logits[batch.row_batch, batch.row_pos], batch)
    return (time.perf_counter() - start) / len(heads)


def heads_per_pass_seconds(runner: Runner, corpus, layer: int, n_heads: int) -> dict[int, float]:
    out = {}
    for hpp in sorted({1, 3, n_heads}):
        store = SumStore(metric_sizes(corpus.sizes))
        start = time.perf_counter()
        exact_sweep(runner, corpus, store, [(layer, h) for h in range(n_heads)], ("zero",), None,
                    heads_per_pass=hpp, progress=False)
        out[hpp] = time.perf_counter() - start
    return out


def agreement(effects: pd.DataFrame, top: int = 20) -> pd.DataFrame:
    rows = []
    for metric, group in effects[effects["ablation"] == "zero"].groupby("metric"):
        wide = group.pivot_table(index=["layer", "head"], columns="method", values="delta").dropna()
        if not {"exact", "attribution"} <= set(wide.columns):
            continue
        top_exact = set(wide["exact"].nlargest(top).index)
        top_attr = set(wide["attribution"].nlargest(top).index)
        rows.append({"metric": metric, "heads": len(wide),
                     "spearman": spearmanr(wide["exact"], wide["attribution"]).statistic,
                     f"top{top}_overlap": len(top_exact & top_attr) / top,
                     "sign_agreement": float((np.sign(wide["exact"]) == np.sign(wide["attribution"])).mean())})
    return pd.DataFrame(rows)


def markdown(frame: pd.DataFrame) -> str:
    """A pipe table (pandas' to_markdown needs tabulate, which the project does not depend on)."""
    cells = [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row] for row in frame.itertuples(index=False)]
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + " --- |" * len(frame.columns)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--naive-heads", type=int, default=12, help="random heads the naive loop is timed on")
    parser.add_argument("--hpp-layer", type=int, default=20, help="layer whose heads time the heads-per-pass options")
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    args = parser.parse_args()

    t = time.perf_counter()
    model = load_model("smollm2-135m")
    load_s = time.perf_counter() - t
    cfg = AblateConfig()
    n_total = model.n_layers * model.n_heads

    result = ablate(model, cfg, progress=True)
    timings = result.timings

    with _threads(cfg.threads):
        runner = Runner(model)
        corpus = corpus_for(model, cfg)
        forward_s = clean_pass_seconds(runner, corpus)
        hpp = heads_per_pass_seconds(runner, corpus, args.hpp_layer, model.n_heads)
        heads = random.Random(0).sample([(l, h) for l in range(model.n_layers) for h in range(model.n_heads)],
                                        args.naive_heads)
        naive_per_head = naive_seconds_per_head(model, corpus, heads)
    naive_total = naive_per_head * n_total
    agree = agreement(result.effects)

    shapes = ", ".join(f"{b.family} {tuple(b.tokens.shape)}" for b in corpus.batches)
    sizes = ", ".join(f"{f}: {n}" for f, n in corpus.sizes.items())
    removable = result.summary["removable"]
    lines = [
        f"SmolLM2-135M (30 x 9 heads), fp32, torch threads during the stage: {torch.get_num_threads() if cfg.threads else 'auto'} "
        f"(AblateConfig.threads={cfg.threads!r}: one thread on a <= 2-core machine). Model load: {load_s:.0f} s.",
        "",
        f"Default evaluation corpus: {sizes} sequences; {corpus.n_tokens} tokens "
        f"({sum(b.tokens.numel() for b in corpus.batches)} padded) in {len(corpus.batches)} batches: {shapes}.",
        "",
        "| step | wall time | forward-pass equivalents |",
        "| --- | ---: | ---: |",
        f"| one intact pass over the corpus | {forward_s:.1f} s | 1 |",
        f"| attribution, all 270 heads (1 forward + 1 backward per batch) | {timings.get('attribution', float('nan')):.1f} s "
        f"| {timings.get('attribution', float('nan')) / forward_s:.1f} |",
        f"| exact sweep, all 270 heads (layer reuse, {cfg.heads_per_pass} head(s) per pass) | {timings['exact']:.0f} s "
        f"| {timings['exact'] / forward_s:.0f} |",
        f"| naive loop, one full forward per head (timed on {args.naive_heads} random heads, x {n_total}) "
        f"| {naive_total:.0f} s (extrapolated) | {naive_total / forward_s:.0f} |",
        f"| pruning curve (5% steps) | {timings.get('pruning', float('nan')):.0f} s | {timings.get('pruning', float('nan')) / forward_s:.0f} |",
        f"| whole `ablate()` with defaults | {timings['total']:.0f} s | |",
        "",
        f"Exact sweep speed-up over the naive loop: **{naive_total / timings['exact']:.1f}x**.",
        "",
        f"Heads per pass (exact sweep of layer {args.hpp_layer}'s 9 heads): "
        + ", ".join(f"{k}: {v:.1f} s" for k, v in hpp.items()) + ".",
        "",
        "Attribution vs exact (zero ablation, all 270 heads):",
        "",
        markdown(agree),
        "",
        "Pruning (zero ablation, least important first): share of heads removable before the metric worsens by "
        "1% / 5%: " + "; ".join(f"{m}: {v['1%']:.0%} / {v['5%']:.0%}" for m, v in removable.items()) + ".",
    ]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        write_section("ablation_sweep", SCRIPT, body)


if __name__ == "__main__":
    main()

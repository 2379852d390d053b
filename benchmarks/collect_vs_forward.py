"""Cost of feature collection against a plain forward pass over the same tokens.

Same model, same batches (the collect stage's own length buckets), same dtype, measured in one
run, interleaved (plain, collect, plain, collect, ...) so that machine noise hits both alike.
The collect pass runs every feature on every layer's pattern through hooks and ends at the last
layer's pattern (the last MLP and the unembedding are not needed); the table also shows a pass
that stops at the same place and computes no feature, so the two costs can be told apart.

    python benchmarks/collect_vs_forward.py [--model smollm2-135m] [--dtype float32] [--repeats 2]
"""

from __future__ import annotations

import argparse
import time

import torch
from _results import write_section  # noqa: E402

from interp import CollectConfig, ModelSpec  # noqa: E402
from interp.collect.accumulator import FeatureAccumulator  # noqa: E402
from interp.collect.features import context  # noqa: E402
from interp.collect.stage import build_suites, encode_all  # noqa: E402
from interp.model.lens import run_patterns  # noqa: E402
from interp.model.load import load_model  # noqa: E402
from interp.probes.batch import bucket, make_batch  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    model = load_model(ModelSpec(args.model, dtype=args.dtype))
    config = CollectConfig()
    seqs, aligner = encode_all(model, config, build_suites(config))
    relations = tuple(aligner.relations)
    pad = model.tokenizer.pad_token_id or 0
    batches = [
        make_batch([seqs[i] for i in g], g, model.causal, pad)
        for g in bucket(seqs, config.cpu_batch_tokens)
    ]
    n_tokens = sum(len(s) for s in seqs)

    def plain() -> None:
        with torch.inference_mode():
            for b in batches:
                model.bridge(b.tokens, attention_mask=b.attention_mask)

    def stopped() -> None:
        for b in batches:
            run_patterns(model, b.tokens, b.attention_mask, lambda layer, p: None)

    def collect() -> None:
        acc = FeatureAccumulator(
            model.n_layers, model.n_heads, relations, config.n_bootstrap, config.seed
        )
        for b in batches:
            ctx = context(b, relations, config.local_window)
            acc.start_batch(ctx)
            run_patterns(
                model, b.tokens, b.attention_mask, lambda layer, p: acc.add_layer(layer, p, ctx)
            )
        acc.table()

    runs = {
        "plain forward (logits)": plain,
        "forward up to the last pattern, no features": stopped,
        "collect: all features, all heads": collect,
    }
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.repeats):
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
            print(f"{name}: {times[name][-1]:.1f} s", flush=True)
    best = {k: min(v) for k, v in times.items()}
    ref = best["plain forward (logits)"]
    rows = "\n".join(f"| {k} | {v:.1f} | {v / ref:.2f}x |" for k, v in best.items())
    body = (
        f"Model `{args.model}` ({args.dtype}), default suites: {len(seqs)} sequences, {n_tokens} tokens, "
        f"{len(batches)} length-bucketed batches; best of {args.repeats} interleaved repeats.\n\n"
        "| pass | seconds | vs plain forward |\n|---|---|---|\n" + rows + "\n\n"
        f"Collection costs **{best['collect: all features, all heads'] / ref:.2f}x** a plain forward pass "
        f"(target: at most 1.3x) and {best['collect: all features, all heads'] / best['forward up to the last pattern, no features']:.2f}x "
        "a pass that stops at the same place without computing features."
    )
    write_section(
        f"Feature collection vs forward pass ({args.model}, {args.dtype})",
        "benchmarks/collect_vs_forward.py",
        body,
    )
    print(body)


if __name__ == "__main__":
    main()

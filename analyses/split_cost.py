"""Splitting doesn't add work: cost of multi-head attention against the number of heads, at a fixed width.

Method: for d_model in WIDTHS and n_heads = 1, 2, 4, ..., d_model / 2 (d_head from d_model down to
2), build the same 2-layer attention-only GPT-2 (``interp.synthetic.train.build_model``; random
weights, since cost does not depend on them) and measure on a batch of BATCH sequences of CTX tokens:

- parameters: counted from the model (attention only, and total);
- FLOPs per token: counted by ``torch.utils.flop_counter.FlopCounterMode`` over one forward (it
  counts matrix products: the Q/K/V and output projections, QK^T, the weighted sum of values and
  the unembedding), next to the textbook count: ``2 * (4 d^2 + 2 T d)`` per layer and token with T
  keys (eager attention computes the full T x T scores), plus ``4 d n_inner`` per layer for the
  zeroed MLP, which still runs, and ``2 d V`` for the unembedding;
- the elementwise work the matrix count leaves out: attention-pattern entries per token
  (``n_layers * n_heads * T``: the scaling, masking and softmax run over every one of them);
- wall time per forward: one thread, interleaved over settings (every repeat times every setting
  once, so drift of a shared machine hits all alike), median and quartiles over the repeats; for
  Hugging Face's ``eager`` attention (what the toolkit hooks) and PyTorch's fused ``sdpa``.

    python -m analyses.split_cost [--quick]
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch

from analyses._common import md, start
from interp.synthetic.planted import build_tokenizer
from interp.synthetic.tasks.grammar import GrammarTask
from interp.synthetic.train import Architecture, build_model, single_thread

WIDTHS, QUICK_WIDTHS = (256, 512), (64,)
N_LAYERS, CTX = 2, 128
BATCH, QUICK_BATCH = 8, 2
REPEATS, QUICK_REPEATS = 15, 3
IMPLEMENTATIONS = ("eager", "sdpa")


def head_counts(d_model: int) -> list[int]:
    return [2**i for i in range(int(np.log2(d_model)))]  # 1 .. d_model / 2


def make(d_model: int, n_heads: int, implementation: str, tok) -> torch.nn.Module:
    arch = Architecture(
        n_layers=N_LAYERS, n_heads=n_heads, d_model=d_model, n_ctx=CTX, attn_only=True
    )
    hf = build_model(arch, tok, seed=0)
    hf.config._attn_implementation = implementation  # same weights, other attention kernel
    return hf.eval()


def count(hf: torch.nn.Module, tokens: torch.Tensor) -> dict[str, float]:
    """Parameters and FLOPs per token of one forward (counted, and by the textbook formula)."""
    from torch.utils.flop_counter import FlopCounterMode

    cfg = hf.config
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        hf(tokens)
    n_tokens = tokens.numel()
    attention = sum(p.numel() for block in hf.transformer.h for p in block.attn.parameters())
    d, t = cfg.n_embd, tokens.shape[1]
    return {
        "params_attention": attention,
        "params_total": sum(p.numel() for p in hf.parameters()),
        "flops_per_token": counter.get_total_flops() / n_tokens,
        "flops_attention_formula": cfg.n_layer * 2 * (4 * d * d + 2 * t * d),
        # + the zeroed MLP, which still runs (d -> n_inner -> d), + the unembedding
        "flops_formula_total": cfg.n_layer * (2 * (4 * d * d + 2 * t * d) + 4 * d * cfg.n_inner)
        + 2 * d * cfg.vocab_size,
        "pattern_entries_per_token": cfg.n_layer * cfg.n_head * t,
    }


def time_forwards(models: dict, tokens: torch.Tensor, repeats: int) -> pd.DataFrame:
    """Seconds per forward for every model, interleaved: each repeat runs every model once."""
    rows = []
    with torch.inference_mode(), single_thread():
        for hf in models.values():  # warm-up: allocations and kernels chosen
            hf(tokens)
        for rep in range(repeats):
            for key, hf in models.items():
                start = time.perf_counter()
                hf(tokens)
                rows.append(
                    {
                        **dict(zip(("d_model", "n_heads", "implementation"), key)),
                        "repeat": rep,
                        "seconds": time.perf_counter() - start,
                    }
                )
    return pd.DataFrame(rows)


def main() -> None:
    exp, args = start("split_cost", __doc__)
    widths, batch, repeats = (
        (QUICK_WIDTHS, QUICK_BATCH, QUICK_REPEATS) if exp.quick else (WIDTHS, BATCH, REPEATS)
    )
    tok = build_tokenizer(GrammarTask().words)
    tokens = torch.randint(4, len(tok), (batch, CTX), generator=torch.Generator().manual_seed(0))
    counts, timings = [], []
    for d_model in widths:
        models = {
            (d_model, h, impl): make(d_model, h, impl, tok)
            for h in head_counts(d_model)
            for impl in IMPLEMENTATIONS
        }
        for (d, h, impl), hf in models.items():
            if impl == IMPLEMENTATIONS[0]:
                counts.append({"d_model": d, "n_heads": h, "d_head": d // h, **count(hf, tokens)})
        timings.append(time_forwards(models, tokens, repeats))
        del models
    counts, timings = pd.DataFrame(counts), pd.concat(timings, ignore_index=True)
    timings["ms_per_token"] = timings["seconds"] * 1e3 / tokens.numel()
    summary = (
        timings.groupby(["d_model", "n_heads", "implementation"])["seconds"]
        .quantile([0.25, 0.5, 0.75])
        .unstack()
        .mul(1e3)
        .reset_index()
        .rename(columns={0.25: "ms_q1", 0.5: "ms_median", 0.75: "ms_q3"})
    )
    exp.table("counts", counts)
    exp.table("timings", timings)
    exp.table("timing_summary", summary)
    shown = figures(exp, counts, timings)
    write_up(exp, counts, summary, shown, batch, repeats)


def figures(exp, counts: pd.DataFrame, timings: pd.DataFrame) -> list[str]:
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    long = counts.melt(
        id_vars=["d_model", "n_heads"],
        value_vars=["params_attention", "flops_per_token"],
        var_name="quantity",
        value_name="value",
    )
    first = long.groupby(["d_model", "quantity"])["value"].transform("first")
    sns.lineplot(
        long.assign(relative=long["value"] / first),
        x="n_heads",
        y="relative",
        hue="d_model",
        style="quantity",
        marker="o",
        ax=axes[0],
        palette="deep",
    )
    axes[0].set(
        xscale="log", title="Parameters and counted FLOPs (1 head = 1)", ylabel="relative to 1 head"
    )
    sns.lineplot(
        counts,
        x="n_heads",
        y="pattern_entries_per_token",
        hue="d_model",
        marker="o",
        ax=axes[1],
        palette="deep",
    )
    axes[1].set(xscale="log", yscale="log", title="Attention-pattern entries per token")
    sns.lineplot(
        timings,
        x="n_heads",
        y="seconds",
        hue="d_model",
        style="implementation",
        marker="o",
        estimator="median",
        errorbar=("pi", 50),
        ax=axes[2],
        palette="deep",
    )
    axes[2].set(
        xscale="log", yscale="log", title="Time per forward (median, quartiles)", ylabel="seconds"
    )
    return [exp.figure("cost_vs_heads", fig)]


def write_up(exp, counts, summary, shown, batch, repeats) -> None:
    lines = []
    for d_model, c in counts.groupby("d_model"):
        t = summary[summary["d_model"] == d_model].set_index(["implementation", "n_heads"])[
            "ms_median"
        ]
        one, most = c["n_heads"].min(), c["n_heads"].max()
        exact = bool((c["flops_per_token"] == c["flops_formula_total"]).all())
        counted = (
            f"{c['flops_per_token'].iloc[0]:,.0f} for every head count"
            if c["flops_per_token"].nunique() == 1
            else f"{c['flops_per_token'].min():,.0f}-{c['flops_per_token'].max():,.0f}"
        )
        lines.append(
            f"d_model {d_model}: counted FLOPs per token {counted} ({'equal to' if exact else 'unlike'} "
            f"the textbook count), "
            f"attention-pattern entries x{c['pattern_entries_per_token'].max() / c['pattern_entries_per_token'].min():.0f}; "
            f"time per forward from "
            f"{one} to {most} heads: eager {t['eager', one]:.1f} -> {t['eager', most]:.1f} ms "
            f"(x{t['eager', most] / t['eager', one]:.2f}), sdpa {t['sdpa', one]:.1f} -> {t['sdpa', most]:.1f} ms "
            f"(x{t['sdpa', most] / t['sdpa', one]:.2f})"
        )
    flat = all(
        g["flops_per_token"].nunique() == 1 and g["params_attention"].nunique() == 1
        for _, g in counts.groupby("d_model")
    )
    answer = (
        (
            "Parameters and matrix FLOPs do not change with the number of heads"
            if flat
            else "Parameters or matrix FLOPs change with the number of heads"
        )
        + "; "
        + "; ".join(lines)
        + "."
    )
    table = counts[
        [
            "d_model",
            "n_heads",
            "d_head",
            "params_attention",
            "flops_per_token",
            "flops_formula_total",
            "flops_attention_formula",
            "pattern_entries_per_token",
        ]
    ]
    wide = summary.pivot_table(
        index=["d_model", "n_heads"],
        columns="implementation",
        values=["ms_q1", "ms_median", "ms_q3"],
    )
    wide = wide.sort_index(axis=1, level=1)
    wide.columns = [f"{impl} {stat.removeprefix('ms_')}" for stat, impl in wide.columns]
    sections = [
        (
            "Setup",
            f"{N_LAYERS}-layer attention-only GPT-2 over the grammar task's vocabulary, "
            f"batch {batch} x {CTX} tokens, one torch thread, {repeats} interleaved repeats after a warm-up. "
            "FLOPs counted by `torch.utils.flop_counter.FlopCounterMode`; `flops_formula_total` is the textbook count "
            "(attention projections, the two T x d_head products per head, the zeroed MLP, the unembedding), "
            "`flops_attention_formula` "
            "its attention part.",
        ),
        ("Counts", md(table, 0)),
        ("Time per forward (ms)", md(wide.reset_index(), 2)),
        ("Figures", "\n\n".join(shown)),
        (
            "Reading",
            "The matrix work of attention is the same for any split: n_heads products of size T x d_head "
            "add up to one of size T x d_model. What grows with the number of heads is the attention pattern itself "
            "(n_heads x T x T entries per sequence), on which scaling, masking and softmax run and which eager "
            "attention writes to memory; whether that shows in wall time depends on T relative to d_head and on "
            "the kernel, which the timing columns measure rather than assume.",
        ),
    ]
    exp.write(
        "Splitting doesn't add work",
        "For a fixed width, splitting attention into more, smaller heads "
        "keeps the parameter count and the compute the same while d_head shrinks.",
        answer,
        "weights seed 0, tokens seed 0 (timings do not depend on them)",
        sections,
    )


if __name__ == "__main__":
    main()

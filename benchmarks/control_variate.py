"""Attribution as a control variate for exact effects: how much narrower the intervals could get.

    python benchmarks/control_variate.py

A design measurement, not a feature: the exact sweep's intervals are what keeps the 20 largest
effects of SmolLM2-135M from the precision rule (benchmarks/RESULTS.md, run_time and
precise_run), and attribution, which estimates every head at once for the price of one backward
pass, could carry part of the load. The difference estimator

    effect = sum_E (exact - beta * estimate) / sum_E den  +  beta * sum_W estimate / sum_W den

is unbiased for any ``beta`` when the estimate is read on a wide corpus W as well as on the
sequences E the exact passes ran; its interval narrows by how well the per-sequence estimate
follows the per-sequence exact change.

What this measures, on the default-size corpus for ROUNDS rounds (the sequences a default run's
opening rounds read): every head ablated exactly (mean ablation) on the first round, to find the
TOP largest effects per metric; those heads ablated exactly on every round; attribution of every
head on the same sequences. Per head: the per-sequence correlation of exact and estimated change,
the bootstrap half-width of the exact effect, of the residual with beta = 1 and with the
per-head least-squares beta (fitted on the same sequences: slightly optimistic), and the
half-width with a wide corpus WIDE times larger than E (its estimate's own sampling added).
Writes the "Attribution as a control variate" section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import markdown, write_section  # noqa: E402

from interp.ablate.attribution import attribute  # noqa: E402
from interp.ablate.config import AblateConfig  # noqa: E402
from interp.ablate.corpora import stage_corpus, stage_metrics  # noqa: E402
from interp.ablate.forward import Ablator  # noqa: E402
from interp.ablate.metrics import metric_sizes  # noqa: E402
from interp.ablate.sequential import rounds  # noqa: E402
from interp.ablate.stats import SumStore, bootstrap_weights  # noqa: E402
from interp.ablate.sweep import exact_sweep  # noqa: E402
from interp.model.load import load_model  # noqa: E402

MODEL = "smollm2-135m"
ROUNDS = 6
TOP = 20
WIDE = 10
KIND = "mean"
METRICS = ("loss_prose", "loss_repeated", "sv_logit_diff")
N_BOOT = 1000


def half_width(per_seq: np.ndarray, den: np.ndarray, w: np.ndarray) -> float:
    """The 95% bootstrap half-width of a ratio of sums over sequences (``w``: draw counts)."""
    low, high = np.quantile((per_seq @ w) / (den @ w), [0.025, 0.975])
    return float(high - low) / 2


def head_row(exact: np.ndarray, est: np.ndarray, den: np.ndarray, w: np.ndarray) -> dict:
    """One head's figures from its per-sequence exact and estimated changes."""
    scale = den.mean()
    beta = float(np.cov(exact / scale, est / scale)[0, 1] / max(np.var(est / scale, ddof=1), 1e-30))
    plain = half_width(exact, den, w)
    fitted = half_width(exact - beta * est, den, w)
    wide = np.sqrt(fitted**2 + (beta * half_width(est, den, w)) ** 2 / WIDE)
    return {
        "delta": exact.sum() / den.sum(),
        "estimate": est.sum() / den.sum(),
        "rho": float(np.corrcoef(exact, est)[0, 1]),
        "beta": beta,
        "half-width": plain,
        "ratio, beta 1": half_width(exact - est, den, w) / plain,
        "ratio, fitted beta": fitted / plain,
        f"ratio, wide {WIDE}x": wide / plain,
    }


def main() -> None:
    model = load_model(MODEL)
    cfg = AblateConfig(max_rounds=ROUNDS).resolved(model.n_layers * model.n_heads)
    corpus = stage_corpus(model, cfg, stage_metrics(model, cfg))
    ablator = Ablator(model)
    start = time.perf_counter()
    attr = attribute(ablator, corpus, (KIND,), progress=False)
    seconds = {"attribution": time.perf_counter() - start}
    heads = [(la, he) for la in range(model.n_layers) for he in range(model.n_heads)]
    first = rounds(corpus, ROUNDS, cfg.tokens_per_pass, model.tokenizer.pad_token_id or 0)[0]

    def sweep(part, chosen: list[tuple[int, int]], label: str) -> SumStore:
        """Mean-ablate ``chosen`` exactly on ``part``, timed under ``label``; the sums over the
        whole corpus's sequences (NaN where ``part`` has none)."""
        store = SumStore(metric_sizes(corpus.sizes))
        start = time.perf_counter()
        exact_sweep(
            ablator, part, store, chosen, (KIND,), attr.means, None, cfg.tokens_per_pass,
            progress=False,
        )  # fmt: skip
        seconds[label] = time.perf_counter() - start
        return store

    ranking = sweep(first, heads, "rank on round 1")
    top = {}
    for metric in METRICS:
        sums = ranking[metric]
        seen = ~np.isnan(sums.ablated[(KIND, *heads[0])].numpy())
        size = {
            h: abs(np.nansum(sums.ablated[(KIND, *h)].numpy()[seen] - sums.base.numpy()[seen]))
            for h in heads
        }
        top[metric] = sorted(heads, key=lambda h: -size[h])[:TOP]
    chosen = sorted({h for hs in top.values() for h in hs})
    store = sweep(corpus, chosen, f"exact, {len(chosen)} heads")
    rows = []
    for metric in METRICS:
        sums, est = store[metric], attr.store[metric]
        den, w = sums.den.numpy(), bootstrap_weights(len(sums.den), N_BOOT, 0)
        for layer, head in top[metric]:
            exact = sums.ablated[(KIND, layer, head)].numpy() - sums.base.numpy()
            change = est.ablated[(KIND, layer, head)].numpy() - est.base.numpy()
            rows.append(
                {
                    "metric": metric,
                    "head": f"L{layer}H{head}",
                    "sequences": len(den),
                    **head_row(exact, change, den, w),
                }
            )
    heads_table = pd.DataFrame(rows)
    ratios = [c for c in heads_table.columns if c.startswith("ratio")]
    summary = heads_table.groupby("metric", sort=False)[["rho", *ratios]].median().reset_index()
    summary["positions for the same precision, wide"] = summary[f"ratio, wide {WIDE}x"] ** 2
    print(summary.round(3).to_string(), file=sys.stderr)
    text = (
        f"{MODEL}, mean ablation, the default-size corpus for {ROUNDS} rounds (sequences per metric: "
        + ", ".join(
            f"{m} {int(heads_table[heads_table['metric'] == m]['sequences'].iloc[0])}"
            for m in METRICS
        )
        + f"); the {TOP} largest effects per metric, ranked by an exact sweep of every head on the first round. "
        "Per head: `rho`, the correlation over sequences of the exact change and attribution's estimate; `ratio`, "
        "the half-width of the difference estimator over the exact effect's own (beta 1; beta fitted per head on the "
        f"same sequences, slightly optimistic; and fitted with attribution read on a corpus {WIDE} times as large, its "
        "own sampling added). A ratio r means the exact passes need r squared of the positions for the same interval. "
        "Not used by the ablate stage: a measurement for its design.\n\n"
        "Times: " + ", ".join(f"{k} {v:.0f} s" for k, v in seconds.items()) + ".\n\n"
        "Medians per metric:\n\n"
        + markdown(summary.round(3))
        + "\n\nPer head:\n\n"
        + markdown(heads_table.drop(columns="sequences").round(3))
    )
    write_section("Attribution as a control variate", "benchmarks/control_variate.py", text)


if __name__ == "__main__":
    main()

"""Benchmark: how precise are SmolLM2's exact head effects, and what do extra rounds buy?

For each setting (the default one round; ``--max-rounds R`` rounds of the default corpus'
size), one ``ablate()`` run (zero ablation, estimator on, no pruning) and, per metric:

- **tokens**: tokens the estimator saw (the whole pool) and the median tokens of an exact effect;
- **top20_precise**: of the 20 heads with the largest exact |delta|, how many have a 95% interval
  half-width <= max(10% of |delta|, 0.01);
- **undecided**: share of heads whose interval straddles the tolerance (``vs_tolerance``);
- **nonzero**: share of heads whose interval excludes zero; and the wall time of the sweep.

Usage: ``python benchmarks/effect_precision.py [--rounds 1,3] [--no-write]``
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
from _results import markdown, write_section  # noqa: E402

from interp.ablate.stage import AblateConfig, ablate  # noqa: E402
from interp.model.load import load_model  # noqa: E402

SCRIPT = "benchmarks/effect_precision.py"


def precision_rows(effects: pd.DataFrame, rounds: int, seconds: float) -> list[dict]:
    rows = []
    exact = effects[effects["estimator"] == "exact"]
    estimated = effects[effects["estimator"] != "exact"]
    for metric, part in exact.groupby("metric"):
        top = part.reindex(part["delta"].abs().sort_values(ascending=False).index[:20])
        half = (top["ci_high"] - top["ci_low"]) / 2
        est = estimated[estimated["metric"] == metric]
        rows.append(
            {
                "rounds": rounds,
                "metric": metric,
                "estimator_tokens": int(est["n_tokens"].max()) if len(est) else 0,
                "median_exact_tokens": int(part["n_tokens"].median()),
                "top20_precise": int((half <= np.maximum(0.1 * top["delta"].abs(), 0.01)).sum()),
                "undecided": float((part["vs_tolerance"] == "undecided").mean()),
                "nonzero": float((part["vs_zero"] != "undecided").mean()),
                "sweep_s": round(seconds),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", default="1,3")
    parser.add_argument(
        "--no-write", action="store_true", help="print only; leave RESULTS.md alone"
    )
    args = parser.parse_args()
    model = load_model("smollm2-135m")
    rows = []
    for rounds in map(int, args.rounds.split(",")):
        result = ablate(model, AblateConfig(max_rounds=rounds, prune=False))
        rows += precision_rows(result.effects, rounds, result.timings["exact"])
        print(pd.DataFrame(rows).to_string(index=False), flush=True)
    if args.no_write:
        return
    body = (
        "SmolLM2-135M, zero ablation, all 270 heads exact, default evaluation corpus per round; rounds > 1: the "
        "sequential sweep (`--max-rounds`), where only heads whose effect is not settled get the next round. "
        "top20_precise: of the 20 largest exact effects, those with a 95% half-width <= max(10% |delta|, 0.01); "
        "undecided: share of heads whose interval straddles the tolerance (1% of the intact metric); nonzero: "
        "share whose interval excludes zero.\n\n" + markdown(pd.DataFrame(rows))
    )
    write_section("effect_precision", SCRIPT, body)


if __name__ == "__main__":
    main()

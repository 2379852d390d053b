"""Benchmark: zero vs mean vs resample ablation on SmolLM2 -- do they tell the same story?

One ``ablate()`` run with all three kinds, exact for all 270 heads, on the default evaluation
corpus (no estimator, no pruning). Per metric and pair of kinds:

- **spearman**: rank correlation of the 270 deltas;
- **top10_overlap**: shared heads among each kind's 10 largest deltas;
- **sign_flips**: heads whose 95% intervals exclude zero under both kinds, with opposite signs
  (one says the model needs the head, the other that removing it helps);
- per kind, **resolved**: share of heads whose interval excludes zero, and the median |delta|
  (how far the kind pushes the model: zero ablation also removes a head's constant output,
  which the model may rely on as a bias, not as information about the input).

Usage: ``python benchmarks/ablation_kinds.py [--no-write]``
"""

from __future__ import annotations

import argparse
import itertools

import pandas as pd
from _results import markdown, write_section  # noqa: E402

from interp.ablate.stage import AblateConfig, ablate  # noqa: E402
from interp.model.load import load_model  # noqa: E402

SCRIPT = "benchmarks/ablation_kinds.py"
KINDS = ("zero", "mean", "resample")


def compare(effects: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(pairwise agreement rows, per-kind rows) from an exact effects table with every kind."""
    wide = effects.pivot_table(
        index=["metric", "layer", "head"], columns="ablation", values=["delta", "ci_low", "ci_high"]
    )
    pairs, kinds = [], []
    for metric, part in wide.groupby(level="metric"):
        resolved = {k: (part["ci_low"][k] > 0) | (part["ci_high"][k] < 0) for k in KINDS}
        sign = {
            k: (part["ci_low"][k] > 0).astype(int) - (part["ci_high"][k] < 0).astype(int)
            for k in KINDS
        }
        for a, b in itertools.combinations(KINDS, 2):
            top_a = set(part["delta"][a].nlargest(10).index)
            top_b = set(part["delta"][b].nlargest(10).index)
            pairs.append(
                {
                    "metric": metric,
                    "kinds": f"{a} / {b}",
                    "spearman": part["delta"][a].rank().corr(part["delta"][b].rank()),
                    "top10_overlap": len(top_a & top_b),
                    "sign_flips": int((sign[a] * sign[b] < 0).sum()),
                }
            )
        for k in KINDS:
            kinds.append(
                {
                    "metric": metric,
                    "kind": k,
                    "resolved": float(resolved[k].mean()),
                    "median_abs_delta": float(part["delta"][k].abs().median()),
                    "max_delta": float(part["delta"][k].max()),
                }
            )
    return pd.DataFrame(pairs), pd.DataFrame(kinds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--no-write", action="store_true", help="print only; leave RESULTS.md alone"
    )
    args = parser.parse_args()
    model = load_model("smollm2-135m")
    cfg = AblateConfig(ablations=KINDS, attribution=False, prune=False)
    result = ablate(model, cfg)
    pairs, kinds = compare(result.effects[result.effects["estimator"] == "exact"])
    print(pairs.round(3).to_string(index=False))
    print(kinds.round(4).to_string(index=False))
    if args.no_write:
        return
    body = (
        f"SmolLM2-135M, all 270 heads ablated exactly under each kind, default evaluation corpus "
        f"({result.summary['n_tokens']} tokens); exact sweep {result.timings['exact']:.0f} s for the three kinds.\n\n"
        "Agreement between kinds (sign_flips: heads whose intervals exclude zero under both kinds, with "
        "opposite signs):\n\n"
        + markdown(pairs)
        + "\n\nPer kind (resolved: share of heads whose 95% interval excludes zero):\n\n"
        + markdown(kinds)
    )
    write_section("ablation_kinds", SCRIPT, body)


if __name__ == "__main__":
    main()

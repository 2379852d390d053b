"""Some heads can be removed: pruning curves from the toolkit's ablate stage, for trained models and SmolLM2.

Method: ``interp.ablate.stage.ablate`` on each model (its public API: the stage's default ablation
kind, every head's effect measured exactly, then heads removed cumulatively least important first
and the metrics read on a held-out half of the evaluation corpus; ``result.summary["removable"]``
is the largest share of heads removed while a metric stays within 1% / 5% of the intact model on
either side, and ``result.summary["improved"]`` how much a metric improved where it left the
tolerance for the better).

- Trained models: the grammar models of the specialisation experiment (every seed) and of the
  head-count experiment (first seed, every n_heads), loaded from the cache or trained. Their
  metrics: ``loss_repeated`` (next-token loss on repeated random words: copying) and
  ``sv_logit_diff`` (correct minus wrong verb form on grammar sentences: agreement); the
  shipped prose is out of their vocabulary.
- SmolLM2-135M (30 x 9 heads; full mode, or ``--smollm``): ``loss_prose`` on the shipped prose,
  1% pruning steps (3 heads each).

"Heads that go before the loss rises 1%": the removable share times the number of heads.

    python -m analyses.pruning [--quick] [--smollm | --no-smollm]
"""

from __future__ import annotations

import pandas as pd

from analyses import head_count
from analyses._common import md, start
from analyses._recipes import grammar_job
from analyses.specialisation import QUICK_SEEDS, SEEDS
from interp import AblateConfig

TRAINED = AblateConfig(
    metrics=("loss_repeated", "sv_logit_diff"),
    n_repeated=64,
    repeated_lengths=(16,),
    n_syntax=128,
    n_bootstrap=1000,
    threads=1,
)
QUICK_TRAINED = AblateConfig(
    metrics=("loss_repeated", "sv_logit_diff"),
    n_repeated=8,
    repeated_lengths=(12,),
    n_syntax=16,
    n_bootstrap=50,
    threads=1,
)
# 40 prose lines for the ranking and 40 others for the curve: with 8, one step of the curve moved by
# more than 5% up or down and the 1% answer was noise
SMOLLM = AblateConfig(metrics=("loss_prose",), n_prose=40, prune_step=0.01, n_bootstrap=200)
# one round: the default time budget would spend 300 s on rounds a quick check does not read
QUICK_SMOLLM = AblateConfig(
    metrics=("loss_prose",), n_prose=3, prune_step=0.1, top_k=9, n_bootstrap=50, max_rounds=1
)
TOLERANCES = ("1%", "5%")


def prune(model, config: AblateConfig, label: dict) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """(pruning curve, removable counts, timings) of one model, each row tagged with ``label``."""
    from interp.ablate.stage import ablate

    result = ablate(model, config, progress=False)
    n_heads = model.n_layers * model.n_heads
    curve = result.pruning.assign(**label, n_heads_total=n_heads)
    improved = result.summary.get("improved", {})
    rows = [
        {
            **label,
            "n_heads_total": n_heads,
            "metric": metric,
            "tolerance": tol,
            "share": s["share"],
            "ci_low": s["ci_low"],
            "ci_high": s["ci_high"],
            "heads": round(s["share"] * n_heads),
            "improved_by": improved.get(metric, {}).get("by", float("nan")),
            "improved_at": improved.get(metric, {}).get("at", float("nan")),
        }
        for metric, shares in result.summary["removable"].items()
        for tol, s in shares.items()
    ]
    return (
        curve,
        pd.DataFrame(rows),
        {**label, "seconds": result.timings.get("total", float("nan"))},
    )


def trained_models(exp) -> list[tuple[dict, object]]:
    """(label, LoadedModel) of every trained model this experiment prunes."""
    seeds = QUICK_SEEDS if exp.quick else SEEDS
    grammar = exp.train([grammar_job(exp.quick, s) for s in seeds])
    counts = head_count.jobs(exp.quick, seeds=(0,))
    swept = exp.train(counts)
    out = [
        ({"model": f"grammar 2x4 seed {r.training.seed}", "family": "specialisation"}, r.model())
        for r in grammar
    ]
    # a label of its own: the head-count run's 2x4 model is not the specialisation run's seed 0
    out += [
        ({"model": f"head-count 2x{j.arch.n_heads} seed 0", "family": "head_count"}, r.model())
        for j, r in zip(counts, swept)
    ]
    return out


def main() -> None:
    exp, args = start(
        "pruning",
        __doc__,
        [
            (
                ("--smollm",),
                {
                    "action": "store_true",
                    "default": None,
                    "help": "include SmolLM2 (default: full mode only)",
                },
            ),
            (
                ("--no-smollm",),
                {"action": "store_false", "dest": "smollm", "help": "leave SmolLM2 out"},
            ),
        ],
    )
    smollm = (not exp.quick) if args.smollm is None else args.smollm
    curves, removable, timings = [], [], []
    for label, model in trained_models(exp):
        for out, part in zip(
            (curves, removable, timings),
            prune(model, QUICK_TRAINED if exp.quick else TRAINED, label),
        ):
            out.append(part)
    if smollm:
        from interp.model.load import load_model

        label = {"model": "smollm2-135m", "family": "smollm2"}
        for out, part in zip(
            (curves, removable, timings),
            prune(load_model("smollm2-135m"), QUICK_SMOLLM if exp.quick else SMOLLM, label),
        ):
            out.append(part)
    curves, removable = (
        pd.concat(curves, ignore_index=True),
        pd.concat(removable, ignore_index=True),
    )
    timings = pd.DataFrame(timings)
    exp.table("pruning", curves)
    exp.table("removable", removable)
    exp.table("timings", timings)
    shown = figures(exp, curves)
    write_up(exp, removable, timings, shown, smollm)


def figures(exp, curves: pd.DataFrame) -> list[str]:
    import seaborn as sns

    first = curves.groupby(["model", "metric"])["value"].transform("first")
    rel = curves.assign(relative=curves["value"] / first)
    grid = sns.relplot(
        rel,
        x="fraction_removed",
        y="relative",
        hue="model",
        col="metric",
        kind="line",
        marker="o",
        markersize=3,
        height=3.6,
        facet_kws={"sharey": False},
    )
    for ax in grid.axes.flat:
        ax.axhline(1.01, ls=":", c="grey")
        ax.axhline(0.99, ls=":", c="grey")
    grid.set_axis_labels("share of heads removed", "metric / intact value")
    grid.figure.suptitle(
        f"Pruning curves: heads {exp_config(exp.quick).ablations[0]}-ablated least important "
        "first (held-out half of the evaluation corpus)",
        y=1.04,
    )
    return [exp.figure("pruning_curves", grid.figure)]


def write_up(exp, removable, timings, shown, smollm) -> None:
    one = removable[removable["tolerance"] == "1%"]
    spec = (
        one[one["family"] == "specialisation"]
        .groupby("metric")
        .agg(
            heads=("heads", "mean"),
            low=("heads", "min"),
            high=("heads", "max"),
            total=("n_heads_total", "first"),
            models=("model", "nunique"),
        )
    )
    parts = (
        [
            f"Grammar models ({int(spec['models'].iloc[0])} seeds, {int(spec['total'].iloc[0])} heads): "
            + "; ".join(
                f"{r.heads:.1f} heads (range {r.low}-{r.high}) go before {m} moves by more than 1% "
                "either way"
                for m, r in spec.iterrows()
            )
        ]
        if len(spec)
        else []
    )
    if smollm:
        s = one[one["family"] == "smollm2"].iloc[0]
        better = (
            f" (the loss first fell: by up to {s['improved_by']:.1%}, with {s['improved_at']:.1%} of heads "
            "removed)"
            if s["improved_by"] > 0.01
            else ""
        )
        parts.append(
            f"SmolLM2-135M: {s['heads']} of {s['n_heads_total']} heads ({s['share']:.0%}) go before its "
            f"prose loss moves by more than 1% either way{better}"
        )
    answer = ". ".join(parts) + "." if parts else "nothing measured"
    sweep = (
        one[one["family"] == "head_count"]
        .pivot_table(index="n_heads_total", columns="metric", values=["heads", "share"])
        .reset_index()
    )
    sweep.columns = [" ".join(str(c) for c in col if c != "").strip() for col in sweep.columns]
    table = removable.pivot_table(
        index=["model", "n_heads_total", "metric"], columns="tolerance", values="heads"
    ).reset_index()
    sections = [
        (
            "Setup",
            f"`interp.ablate.stage.ablate` with `{exp_config(exp.quick)}` for the trained models"
            + (
                f" and `{SMOLLM if not exp.quick else QUICK_SMOLLM}` for SmolLM2"
                if smollm
                else "; SmolLM2 was left out of this run (quick mode, or `--no-smollm`)"
            )
            + ".",
        ),
        (
            "Heads removable within 1% and 5%",
            "Heads removed (least important first) while the metric stays within "
            "the tolerance of the intact model (`removable.csv` also has the shares):\n\n"
            + md(table, 0),
        ),
        (
            "Against the number of heads",
            "Grammar models of the head-count experiment (seed 0), within 1%:\n\n" + md(sweep, 2),
        ),
        ("Where a metric improved", improvements(removable)),
        ("Time of each ablate call", md(timings, 1)),
        ("Figures", "\n\n".join(shown)),
        (
            "Reading",
            "The order is each head's own effect measured alone; removing heads together can cost more (or "
            'less) than the sum, which is why the curve is measured, not added up. "Within 1%" is two-sided: a '
            "curve that improves by more than the tolerance ends the removable share as a worsening does, and the "
            "section above says by how much it improved. For the trained models the two metrics probe two "
            "abilities; neither is the training loss.",
        ),
    ]
    exp.write(
        "Some heads can be removed",
        "Many heads can be removed with almost no loss in performance.",
        answer,
        "models: specialisation seeds and head-count seed 0; ablation seed 0",
        sections,
    )


def improvements(removable: pd.DataFrame) -> str:
    """The curves along which a metric got better than the intact model, in words and a table."""
    better = removable[removable["improved_by"] > 0].drop_duplicates(["model", "metric"])
    if better.empty:
        return "No curve improved on the intact model: every removable share above ends where the metric worsened."
    shown = better[["model", "metric", "improved_by", "improved_at"]].rename(
        columns={
            "improved_by": "largest improvement (relative)",
            "improved_at": "at share of heads removed",
        }
    )
    return (
        "Removing heads made these metrics better than the intact model (the largest relative improvement "
        "along the curve, and where):\n\n" + md(shown, 3)
    )


def exp_config(quick: bool) -> AblateConfig:
    return QUICK_TRAINED if quick else TRAINED


if __name__ == "__main__":
    main()

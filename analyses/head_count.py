"""More heads isn't always better: held-out loss against the number of heads at a fixed width.

Method: the grammar recipe (analyses/_recipes.py) at d_model 64 with n_heads = 1, 2, 4, 8, 16, 32
(d_head 64 down to 2), several seeds each, everything else identical (2000 steps). Held-out loss
on 1024 sequences and the task's parts (copying accuracy on repeated spans, agreement accuracy).
The best setting is the lowest mean loss; another setting *falls* when a Welch t-test over seeds
says its loss is higher than the best's (p < 0.05).

    python -m analyses.head_count [--quick]
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from analyses._common import md, mean_ci, pm, start
from analyses._recipes import GRAMMAR_ARCH, grammar_training
from interp.synthetic.cache import Job
from interp.synthetic.tasks.grammar import GrammarTask

HEADS, QUICK_HEADS = (1, 2, 4, 8, 16, 32), (1, 4, 16)
SEEDS, QUICK_SEEDS = (0, 1, 2), (0, 1)
STEPS = 2000
N_EVAL = 1024
METRICS = ("loss", "acc_repeat", "foil_acc", "loss_repeat", "loss_agreement")
ALPHA = 0.05


def job(n_heads: int, seed: int, quick: bool) -> Job:
    """The grammar recipe with ``n_heads`` heads (shared with the pruning experiment)."""
    training = dataclasses.replace(
        grammar_training(quick, seed, checkpoints=False, steps=None if quick else STEPS),
        eval_sequences=N_EVAL,
    )
    return Job(GrammarTask(), dataclasses.replace(GRAMMAR_ARCH, n_heads=n_heads), training)


def jobs(quick: bool, seeds=None) -> list[Job]:
    return [
        job(h, s, quick)
        for h in (QUICK_HEADS if quick else HEADS)
        for s in (seeds or (QUICK_SEEDS if quick else SEEDS))
    ]


def compare(models: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Per n_heads: mean loss and interval, and Welch's test against the best setting."""
    from scipy import stats

    summary = mean_ci(models, ["n_heads"], "loss")
    best = int(summary.loc[summary["mean"].idxmin(), "n_heads"])
    ref = models.loc[models["n_heads"] == best, "loss"]
    p_values = []
    for h in summary["n_heads"]:
        x = models.loc[models["n_heads"] == h, "loss"]
        p_values.append(
            float("nan")
            if h == best or len(x) < 2
            else float(stats.ttest_ind(x, ref, equal_var=False).pvalue)
        )
    summary["p_vs_best"] = p_values
    summary["worse_than_best"] = (summary["p_vs_best"] < ALPHA) & (
        summary["mean"] > summary.loc[summary["n_heads"] == best, "mean"].item()
    )
    summary.insert(1, "d_head", GRAMMAR_ARCH.d_model // summary["n_heads"])
    return summary, best


def main() -> None:
    exp, args = start("head_count", __doc__)
    todo = jobs(exp.quick)
    rows = []
    for j, result in zip(todo, exp.train(todo)):
        final = result.evals[result.training.steps]
        rows.append(
            {
                "n_heads": j.arch.n_heads,
                "d_head": j.arch.d_head,
                "seed": j.training.seed,
                **{m: final[m] for m in METRICS},
                "ms_per_step": 1e3 * result.train_seconds / result.training.steps,
            }
        )
    models = pd.DataFrame(rows)
    summary, best = compare(models)
    parts = pd.concat(
        [mean_ci(models, ["n_heads"], m).assign(metric=m) for m in METRICS[1:]], ignore_index=True
    )
    exp.table("models", models)
    exp.table("summary", summary)
    exp.table("parts", parts)
    shown = figures(exp, models)
    write_up(exp, todo[0], models, summary, parts, best, shown)


def figures(exp, models: pd.DataFrame) -> list[str]:
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    for ax, metric, title in zip(
        axes,
        ("loss", "acc_repeat", "foil_acc"),
        ("held-out loss", "copying accuracy (repeated spans)", "agreement accuracy"),
    ):
        sns.pointplot(models, x="n_heads", y=metric, errorbar=("ci", 95), ax=ax, capsize=0.2)
        sns.stripplot(models, x="n_heads", y=metric, ax=ax, alpha=0.4, color="grey")
        ax.set(title=f"{title} (mean, 95% CI)")
    return [exp.figure("loss_vs_heads", fig)]


def write_up(exp, example, models, summary, parts, best, shown) -> None:
    s = summary.set_index("n_heads")
    falls = [int(h) for h in s.index if s.loc[h, "worse_than_best"]]
    above = [h for h in falls if h > best]
    below = [h for h in falls if h < best]
    seeds = sorted(models["seed"].unique())
    d = GRAMMAR_ARCH.d_model
    answer = (
        f"Lowest held-out loss at {best} heads (d_head {d // best}): {pm(s.loc[best, 'mean'], s.loc[best, 'ci_low'], s.loc[best, 'ci_high'])} "
        f"nats over {len(seeds)} seeds. "
    )
    if above:
        answer += (
            f"With more heads it is significantly worse from {min(above)} heads (d_head {d // min(above)}: "
            f"{s.loc[min(above), 'mean']:.3f}, Welch p = {s.loc[min(above), 'p_vs_best']:.3g}) on. "
        )
    else:
        answer += "No setting with more heads is significantly worse at p < 0.05. "
    answer += (
        f"Fewer heads significantly worse: {', '.join(f'{h} (d_head {d // h})' for h in below)}."
        if below
        else "No setting with fewer heads is significantly worse."
    )
    table = summary.assign(loss=[pm(r.mean, r.ci_low, r.ci_high) for r in summary.itertuples()])
    wide = (
        parts.assign(value=[pm(r.mean, r.ci_low, r.ci_high) for r in parts.itertuples()])
        .pivot(index="n_heads", columns="metric", values="value")
        .reset_index()
    )
    speed = models.groupby("n_heads")["ms_per_step"].median().reset_index()
    sections = [
        (
            "Setup",
            f"Grammar recipe: {GRAMMAR_ARCH.n_layers} layers, d_model {d}, attention-only, "
            f"{example.training.steps} steps, batch {example.training.batch_size}, AdamW lr {example.training.lr}; only "
            f"n_heads changes. Loss on {N_EVAL} held-out sequences per model. Significance: Welch's t-test of each "
            f"setting's per-seed losses against the best setting's, alpha {ALPHA}.",
        ),
        (
            "Loss by number of heads",
            "Mean [95% t-interval over seeds]:\n\n"
            + md(table[["n_heads", "d_head", "loss", "sd", "n", "p_vs_best", "worse_than_best"]]),
        ),
        ("Parts of the task", md(wide)),
        (
            "Training speed",
            "Median milliseconds per training step (one thread, two trainings at a time, so only "
            "roughly comparable):\n\n" + md(speed, 1),
        ),
        ("Figures", "\n\n".join(shown)),
        (
            "Reading",
            "With three seeds per setting the test has little power: a setting not marked worse is not shown "
            "to be as good. The ranking is for this width, task and training budget; a longer budget may move it.",
        ),
    ]
    exp.write(
        "More heads isn't always better",
        "At a fixed width, the loss improves with the number of heads only "
        "up to a point, then gets worse as d_head shrinks.",
        answer,
        ", ".join(map(str, seeds)),
        sections,
    )


if __name__ == "__main__":
    main()

"""Heads specialise on their own: roles of heads over training, in several seeds.

Method: train the shared grammar recipe (analyses/_recipes.py: 2 layers x 4 heads, attention
only, on the grammar language with repeated spans) from several seeds, keep a checkpoint every
250 steps, and label every head of every checkpoint with the toolkit's own stages
(``interp.collect.stage.collect`` on repeated random words and grammar sentences, then
``interp.classify.stage.classify``). Nothing in training mentions roles: if heads come out labelled,
the labels emerged.

Read off: when each role first appears in a seed and when it *settles* (present at that
checkpoint and every later one), in what order; the held-out task metrics at the same
checkpoints (copying accuracy, agreement accuracy), to see whether a role appears when the
ability it stands for does; and how much two seeds agree. Heads are unordered within a layer,
so two seeds are compared by the best matching of heads within each layer: the share of heads
that find a partner with the same role (``overlap``), and the same over named roles only
(``named_overlap``, a Dice share: broad and unexplained heads agree trivially). Chance levels keep
each seed's role counts but shuffle which head carries which label (1000 permutations).

The labels depend on the classifier: when its features change (``interp.config.FEATURES_VERSION``,
recorded in the write-up), rerun this experiment (``python -m analyses --stale`` finds it); the
trained checkpoints come from the cache, so only the labelling reruns.

    python -m analyses.specialisation [--quick]
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd

from analyses._common import md, start
from analyses._recipes import grammar_job, read_heads

SEEDS, QUICK_SEEDS = (0, 1, 2, 3), (0, 1)
BLANK = ("broad", "unexplained")  # what a head is before (or without) a job


def label_checkpoints(results: list, quick: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every head of every checkpoint of every seed: (roles, held-out evaluations)."""
    roles, evals = [], []
    for result in results:
        seed = result.training.seed
        for step in sorted(result.states):
            table, _ = read_heads(result.model(step), quick)
            roles.append(table.assign(seed=seed, step=step))
            evals.append({"seed": seed, "step": step, **result.evals[step]})
    return pd.concat(roles, ignore_index=True), pd.DataFrame(evals)


def appearance(roles: pd.DataFrame) -> pd.DataFrame:
    """Per seed and named role: first step with such a head, first step from which it stays, heads at the end."""
    rows = []
    last = roles["step"].max()
    for (seed, role), group in roles[~roles["role"].isin(BLANK)].groupby(["seed", "role"]):
        steps = sorted(roles.loc[roles["seed"] == seed, "step"].unique())
        present = set(group["step"])
        settled = next(
            (s for i, s in enumerate(steps) if all(t in present for t in steps[i:])), np.nan
        )
        rows.append(
            {
                "seed": seed,
                "role": role,
                "first_step": min(present),
                "settled_step": settled,
                "heads_at_end": int((group["step"] == last).sum()),
            }
        )
    return pd.DataFrame(
        rows, columns=["seed", "role", "first_step", "settled_step", "heads_at_end"]
    )


def overlap(a: pd.DataFrame, b: pd.DataFrame) -> float:
    """Share of heads matched to a head of the same role in the same layer of the other model."""
    ca = a.groupby(["layer", "role"]).size()
    cb = b.groupby(["layer", "role"]).size()
    both = pd.concat([ca, cb], axis=1).fillna(0)
    return float(both.min(axis=1).sum() / len(a))


def named_overlap(a: pd.DataFrame, b: pd.DataFrame) -> float:
    """The same matching over named roles only (broad / unexplained left out), as a Dice share:
    matched named heads over the mean number of named heads; NaN when neither model has any."""
    a, b = a[~a["role"].isin(BLANK)], b[~b["role"].isin(BLANK)]
    if len(a) + len(b) == 0:
        return float("nan")
    both = pd.concat(
        [a.groupby(["layer", "role"]).size(), b.groupby(["layer", "role"]).size()], axis=1
    ).fillna(0)
    return float(2 * both.min(axis=1).sum() / (len(a) + len(b)))


def chance(a: pd.DataFrame, b: pd.DataFrame, n: int = 1000, seed: int = 0) -> tuple[float, float]:
    """Mean (overlap, named_overlap) when b's labels are shuffled across its heads."""
    rng = np.random.default_rng(seed)
    shuffled = b.copy()
    values = []
    for _ in range(n):
        shuffled["role"] = rng.permutation(b["role"].to_numpy())
        values.append((overlap(a, shuffled), named_overlap(a, shuffled)))
    with (
        warnings.catch_warnings()
    ):  # named_overlap is NaN in every draw while no head has a named role
        warnings.simplefilter("ignore", RuntimeWarning)
        return tuple(np.nanmean(np.array(values, dtype=float), axis=0))


def agreement(roles: pd.DataFrame) -> pd.DataFrame:
    """Layer-matched role overlap of every pair of seeds at every checkpoint, with its chance level."""
    rows = []
    for step, at_step in roles.groupby("step"):
        by_seed = dict(tuple(at_step.groupby("seed")))
        for sa, sb in itertools.combinations(sorted(by_seed), 2):
            a, b = by_seed[sa], by_seed[sb]
            base, base_named = chance(a, b)
            rows.append(
                {
                    "step": step,
                    "seed_a": sa,
                    "seed_b": sb,
                    "overlap": overlap(a, b),
                    "chance": base,
                    "named_overlap": named_overlap(a, b),
                    "named_chance": base_named,
                    "named_a": int((~a["role"].isin(BLANK)).sum()),
                    "named_b": int((~b["role"].isin(BLANK)).sum()),
                }
            )
    return pd.DataFrame(rows)


def figures(exp, roles: pd.DataFrame, evals: pd.DataFrame, agree: pd.DataFrame) -> list[str]:
    import seaborn as sns

    counts = roles.groupby(["seed", "step", "role"]).size().rename("heads").reset_index()
    counts = counts.pivot_table(
        index=["seed", "step"], columns="role", values="heads", fill_value=0
    )
    counts = counts.stack().rename("heads").reset_index()
    grid = sns.relplot(
        counts,
        x="step",
        y="heads",
        hue="role",
        col="seed",
        kind="line",
        marker="o",
        height=3.2,
        aspect=1.1,
        col_wrap=min(4, counts["seed"].nunique()),
    )
    grid.set_titles("seed {col_name}")
    grid.figure.suptitle("Heads per role over training (toolkit labels)", y=1.03)
    shown = [exp.figure("roles_over_training", grid.figure)]
    metrics = evals.melt(
        id_vars=["seed", "step"],
        value_vars=["loss", "acc_repeat", "foil_acc"],
        var_name="metric",
        value_name="value",
    )
    grid = sns.relplot(
        metrics,
        x="step",
        y="value",
        hue="seed",
        col="metric",
        kind="line",
        height=3.2,
        facet_kws={"sharey": False},
        palette="tab10",
    )
    grid.figure.suptitle(
        "Held-out loss, copying accuracy (repeated spans) and agreement accuracy", y=1.03
    )
    shown.append(exp.figure("task_over_training", grid.figure))
    long = agree.melt(
        id_vars=["step"],
        value_vars=["overlap", "chance", "named_overlap", "named_chance"],
        var_name="measure",
        value_name="share",
    )
    ax = sns.lineplot(long, x="step", y="share", hue="measure", marker="o", errorbar=("ci", 95))
    ax.set(title="Role agreement between seeds (layer-matched)", ylabel="share of heads matched")
    shown.append(exp.figure("agreement_over_training", ax.figure))
    return shown


def main() -> None:
    exp, args = start("specialisation", __doc__)
    seeds = QUICK_SEEDS if exp.quick else SEEDS
    results = exp.train([grammar_job(exp.quick, seed) for seed in seeds])
    roles, evals = label_checkpoints(results, exp.quick)
    appear = appearance(roles)
    agree = agreement(roles)
    exp.table("roles", roles)
    exp.table("evals", evals)
    exp.table("appearance", appear)
    exp.table("agreement", agree)
    shown = figures(exp, roles, evals, agree)
    write_up(exp, seeds, roles, evals, appear, agree, shown, results[0])


def write_up(exp, seeds, roles, evals, appear, agree, shown, example) -> None:
    last = roles["step"].max()
    final = roles[roles["step"] == last]
    n_heads = len(final) / len(seeds)
    named = final[~final["role"].isin(BLANK)].groupby("seed").size().reindex(seeds, fill_value=0)
    order = (
        appear.groupby("role")
        .agg(
            seeds=("seed", "nunique"),
            median_first=("first_step", "median"),
            median_settled=("settled_step", "median"),
            heads_at_end=("heads_at_end", "mean"),
        )
        .sort_values(["median_settled", "median_first"])
        .reset_index()
    )
    everywhere = order[order["seeds"] == len(seeds)]
    end = agree[agree["step"] == last]
    final_counts = pd.crosstab([final["seed"], final["layer"]], final["role"]).reset_index()
    ev_end = evals[evals["step"] == last]
    roles_txt = (
        ", ".join(
            f"{r.role} (settled by step {r.median_settled:.0f})" for r in everywhere.itertuples()
        )
        or "none"
    )
    named_txt = (
        f"on {end['named_overlap'].mean():.0%} of named heads ({end['named_chance'].mean():.0%} by chance)"
        if end["named_overlap"].notna().any()
        else "no seed names any head, so there is no named head to agree on"
    )
    answer = (
        f"{named.mean():.1f} of {n_heads:.0f} heads per model end with a named role (mean over {len(seeds)} seeds; "
        f"the rest broad or unexplained). Roles that emerge in every seed, in order: {roles_txt}. "
        f"Layer by layer, seeds agree on {end['overlap'].mean():.0%} of heads ({end['chance'].mean():.0%} by "
        f"chance) and {named_txt}."
    )
    arch = example.arch
    setup = (
        f"{len(seeds)} seeds x {example.training.steps} steps of the grammar recipe: GPT-2, {arch.n_layers} layers x "
        f"{arch.n_heads} heads, d_model {arch.d_model}, attention-only, init std {arch.init_std}, batch "
        f"{example.training.batch_size}, AdamW lr {example.training.lr}. Task: `GrammarTask()` "
        f"({example.task.params()}). Checkpoints at steps {sorted(example.states)}, each labelled by "
        f"`interp.collect.stage.collect` + `interp.classify.stage.classify` (probes: repeated random words and grammar "
        f"sentences). At the last checkpoint the held-out loss is {ev_end['loss'].mean():.3f} nats "
        f"(seeds: {', '.join(f'{v:.3f}' for v in ev_end['loss'])}), copying accuracy on repeated spans "
        f"{ev_end['acc_repeat'].mean():.3f}, agreement accuracy {ev_end['foil_acc'].mean():.3f}."
    )
    sections = [
        ("Setup", setup),
        (
            "When roles appear",
            "Per named role: in how many seeds it appears, the median step of its first "
            "appearance and of settling (present from then on), and heads per model at the end (mean):\n\n"
            + md(order, 1)
            + "\n\nPer seed (`appearance.csv`):\n\n"
            + md(appear, 0),
        ),
        ("Roles at the end, per seed and layer", md(final_counts, 0)),
        (
            "Do seeds agree?",
            f"Layer-matched overlap of the roles of every pair of seeds at step {last} "
            f"(`agreement.csv` has every checkpoint; at step 0 every head is broad, so agreement is trivially "
            f"complete there):\n\n"
            + md(
                end[
                    [
                        "seed_a",
                        "seed_b",
                        "overlap",
                        "chance",
                        "named_overlap",
                        "named_chance",
                        "named_a",
                        "named_b",
                    ]
                ]
            ),
        ),
        ("Figures", "\n\n".join(shown)),
        (
            "Reading",
            "Labels are the toolkit's classifier's, on probes (random repeated words, grammar sentences) "
            "rather than on the training distribution; a head the classifier cannot name is counted as unexplained, "
            "not as unspecialised. The copying and agreement curves are measured on held-out task data, so they say "
            "when an ability appears independently of the labels.",
        ),
    ]
    exp.write(
        "Heads specialise on their own",
        "Trained from scratch, heads take on distinct roles without "
        "being told to, in a consistent order, and different seeds end up with similar roles.",
        answer,
        ", ".join(map(str, seeds)),
        sections,
    )


if __name__ == "__main__":
    main()

"""Do trained heads split into jobs, how many resist a name, and how many can go?

The three claims the toolkit exists to measure, read off finished runs (one per model):

1. heads specialise: the role counts and where in depth each role lives;
2. many heads are hard to explain: the share labelled ``unexplained``, and how stable labels are;
3. some heads can be removed with almost no loss: the share prunable within 1% and 5%, and
   whether the heads that matter carry a named role;
4. for a causal model, whether the labels are causal: the heads labelled ``induction`` (and
   ``previous_token``) ablated together against random groups of as many other heads, on the
   loss over the repeated half of new repeated-random-token sequences (the model is loaded).

    python analyses/division_of_labour.py reports/smollm2-135m/demo reports/minilm-l6/demo

Writes the "Division of labour among attention heads" section of ``analyses/RESULTS.md`` (one
part per run) and prints it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
from _runs import write  # noqa: E402

from interp import load_run  # noqa: E402
from interp.report.pruning_summary import prunable_table  # noqa: E402
from interp.report.summary import choose_effect, head_effects, role_counts  # noqa: E402

CAUSAL_ROLES = ("induction", "previous_token")


def md(frame: pd.DataFrame, index: bool = True) -> str:
    """A DataFrame as a markdown table (floats to 3 decimals)."""
    frame = frame.reset_index() if index else frame
    cells = [
        [f"{v:.3f}" if isinstance(v, float) else str(v) for v in row]
        for row in frame.itertuples(index=False)
    ]
    head = [str(c) for c in frame.columns]
    return "\n".join(
        ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        + ["| " + " | ".join(r) + " |" for r in cells]
    )


def section(run_dir: str) -> str:
    run = load_run(run_dir)
    model = run.manifest.get("model", {})
    lines = [
        f"## {model.get('name', run_dir)} ({model.get('n_layers')} x {model.get('n_heads')} heads)",
        "",
        f"Run `{run_dir}`, created {run.manifest.get('provenance', {}).get('created')}.",
        "",
    ]
    if run.roles is not None:
        counts = role_counts(run.roles)
        lines += ["| role | heads | share |", "|---|---|---|"]
        lines += [f"| {r.role} | {r.heads} | {r.share:.0%} |" for r in counts.itertuples()]
        unexplained = float((run.roles.role == "unexplained").mean())
        lines += [
            "",
            f"Unexplained: **{unexplained:.0%}** of heads. Median stability of labels: "
            f"{run.roles.stability.median():.2f}.",
            "",
        ]
        depth = run.roles.assign(
            depth=pd.cut(run.roles.layer, 3, labels=["early", "middle", "late"])
        )
        table = pd.crosstab(depth.role, depth.depth)
        lines += ["Roles by depth (thirds of the layers):", "", md(table), ""]
    if run.pruning is not None:
        prunable = prunable_table(run.pruning, run.effects)
        if prunable is not None:
            lines += [
                "Share of heads removable (least important first) while the metric stays within:",
                "",
                md(prunable, index=False),
                "",
            ]
    choice = choose_effect(run.effects, exact_only=True) if run.effects is not None else None
    if choice is not None and run.roles is not None:
        rows = head_effects(run.effects, choice).merge(
            run.roles[["layer", "head", "role"]], on=["layer", "head"]
        )
        top = rows.nlargest(max(1, len(rows) // 10), "delta")
        named = float((top.role != "unexplained").mean())
        lines += [
            f"Top 10% of heads by effect ({choice.metric}, {choice.ablation} ablation): "
            f"{named:.0%} carry a named role; by role, median effect:",
            "",
            md(
                rows.groupby("role")
                .delta.median()
                .sort_values(ascending=False)
                .to_frame("median delta")
            ),
            "",
        ]
    if run.roles is not None and model.get("causal"):
        lines += causal_check(run_dir, run.roles)
    return "\n".join(lines)


def causal_check(run_dir: str, roles: pd.DataFrame, n_draws: int = 10) -> list[str]:
    """Group ablation of each copying role against random heads (zero ablation, loss_repeated)."""
    from interp.ablate.catalogue import LOSS_REPEATED
    from interp.ablate.evaluation import build_corpus
    from interp.ablate.forward import Ablator
    from interp.ablate.groups import role_vs_random
    from interp.model.load import load_model
    from interp.pipeline.execute import model_spec_of

    model = load_model(model_spec_of(Path(run_dir)))
    corpus = build_corpus(
        model,
        n_prose=0,
        n_repeated=16,
        repeated_lengths=(12,),
        n_syntax=0,
        seed=0,
        max_tokens=4096,
        split=1,
    )
    ablator = Ablator(model)
    lines = [
        f"Causal check (zero ablation, loss on the repeated half of 16 new repeated-token sequences; "
        f"random groups drawn from heads with neither label, {n_draws} draws):",
        "",
        "| role | heads | loss rise | random groups, mean rise | ratio |",
        "|---|---|---|---|---|",
    ]
    named = [r for r in CAUSAL_ROLES if (roles["role"] == r).any()]
    for role in named:
        check = role_vs_random(
            ablator,
            corpus,
            roles,
            role,
            LOSS_REPEATED,
            exclude=tuple(r for r in named if r != role),
            n_draws=n_draws,
        )
        heads = " ".join(f"L{layer}H{head}" for layer, head in check.heads)
        lines.append(
            f"| {role} | {heads} | {check.rise:+.3f} | {check.random_mean:+.3f} | {check.ratio:.1f}x |"
        )
    return lines + [""]


def main(run_dirs: list[str]) -> None:
    text = "\n\n".join(
        section(d).replace("\n## ", "\n### ").replace("## ", "### ", 1) for d in run_dirs
    )
    write("Division of labour among attention heads", "analyses/division_of_labour.py", text)
    print(text)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python analyses/division_of_labour.py RUN_DIR [RUN_DIR ...]")
    main(sys.argv[1:])

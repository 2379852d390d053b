"""SmolLM2-135M's heads that matter: which role they hold now that roles read every kind of evidence.

    python benchmarks/smollm2_roles.py [--run RUN_DIR] [--ioi-run RUN_DIR | --no-ioi] [--out DIR]

Two measurements, neither of which sets any threshold (the roles' thresholds are set and
validated on other heads: benchmarks/role_validation.py):

1. **The default run** (``interp run --model smollm2-135m``: every stage, default settings; or the
   run directory ``--run`` names): the heads with the 20 largest exact effects on each metric,
   how many of them are ``unexplained``, which role and which evidence each holds, and the
   overall share of unexplained heads; beside it, what where the heads look alone would say
   (the roles table's ``looks``).
2. **Indirect objects**: the task of docs/how-to/own-task.md ("A run with your own task"), built
   the same way with 100 prompts (25 pairs of one-token names, each pair in both orders and in two
   templates), run as that page runs it (``quick``, the task beside the built-in metrics; or
   ``--ioi-run``): the heads with the largest exact effect on the task, with their task roles.

Writes the "Roles of SmolLM2-135M's heads that matter" section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import markdown, write_section  # noqa: E402

import interp  # noqa: E402

TOP = 20
NAMES = (
    "Mary John Anna Tom Kate Paul Lisa Mark Emma James Alice Bob Laura Peter Sarah David Rachel "
    "Michael Jessica Daniel Sophie Chris Emily Andrew Hannah Ryan Grace Kevin Julia Steven Amy "
    "Brian Helen George Claire Adam Rose Jack Lucy Sam"
).split()
TEMPLATES = (
    "When {io} and {s} went to the store, {s} gave a drink to {io}",
    "When {io} and {s} went to the park, {s} gave a ball to {io}",
)
SHOWN = [
    "layer",
    "head",
    "delta",
    "role",
    "second_role",
    "evidence",
    "looks",
    "components",
    "writes",
]


def top_heads(run, metric: str, top: int = TOP) -> pd.DataFrame:
    """The ``top`` heads by |exact effect| on ``metric`` (mean ablation), with their roles."""
    effects = run.effects
    exact = effects[
        (effects["metric"] == metric)
        & (effects["estimator"] == "exact")
        & (effects["ablation"] == "mean")
    ]
    chosen = exact.assign(size=exact["delta"].abs()).nlargest(top, "size")
    return chosen.merge(run.roles, on=["layer", "head"])


def default_section(run_dir: Path) -> str:
    run = interp.load_run(run_dir)
    rows, tables = [], []
    for metric in run.effects["metric"].unique():
        heads = top_heads(run, metric)
        if heads.empty:
            continue
        rows.append(
            {
                "metric": metric,
                "heads": len(heads),
                "unexplained": int((heads["role"] == "unexplained").sum()),
                "unexplained by where they look alone": int(
                    (heads["looks"] == "unexplained").sum()
                ),
                "mixed": int((heads["role"] == "mixed").sum()),
                "frequent_token": int((heads["role"] == "frequent_token").sum()),
                "named by what they write": int((heads["evidence"] == "weights").sum()),
                "inactive": int((heads["role"] == "inactive").sum()),
            }
        )
        tables.append(f"**{metric}**:\n\n{markdown(heads[SHOWN].round(3))}")
    roles = run.roles
    share = (roles["role"] == "unexplained").mean()
    looks_share = (roles["looks"] == "unexplained").mean()
    counts = roles["role"].value_counts()
    return (
        f"Default run ({run_dir.name}): {len(roles)} heads, **{share:.1%} unexplained** "
        f"({looks_share:.1%} by where they look alone). Primary roles: "
        + ", ".join(f"{r} {n}" for r, n in counts.items())
        + f".\n\nThe {TOP} heads with the largest exact effect (mean ablation) on each metric:\n\n"
        + markdown(pd.DataFrame(rows))
        + "\n\n"
        + "\n\n".join(tables)
    )


def ioi_task(tok) -> interp.Task:
    """100 prompts as docs/how-to/own-task.md builds them: 25 name pairs, both orders, two
    templates; positions count the tokenizer's ids as written."""

    def name_id(word: str) -> int:
        return tok(" " + word).input_ids[0]

    def where(ids: list[int], word: str, nth: int = 0) -> int:
        return [i for i, t in enumerate(ids) if t == name_id(word)][nth]

    pairs = list(zip(NAMES[0::2], NAMES[1::2]))[:25]
    texts, names, s_ids = [], [], []
    for template in TEMPLATES:
        for a, b in pairs:
            for io, s in ((a, b), (b, a)):
                text = template.format(io=io, s=s)
                ids = tok(text).input_ids
                texts.append(text)
                names.append(
                    {
                        "IO": where(ids, io),
                        "S1": where(ids, s),
                        "S2": where(ids, s, 1),
                        "END": len(ids) - 2,
                    }
                )
                s_ids.append(name_id(s))

    def s_over_io(logits, tokens, s):
        return logits.gather(1, s[:, None])[:, 0] - logits.gather(1, tokens[:, None])[:, 0]

    return interp.Task(
        "ioi",
        texts,
        positions=[(n["END"],) for n in names],
        metric=s_over_io,
        fields={"s": s_ids},
        named_positions=names,
    )


def ioi_section(run_dir: Path) -> str:
    run = interp.load_run(run_dir)
    heads = top_heads(run, "ioi", top=10)
    end = run.task_attention.query("query == 'END'").pivot_table(
        index=["layer", "head"], columns="key", values="attention"
    )
    heads = heads.join(end.add_prefix("END->"), on=["layer", "head"])
    shown = [*SHOWN, "task_role", "task_key", "task_partner", "END->IO", "END->S2"]
    named = heads["task_role"].notna()
    roles = run.roles
    return (
        f"Indirect-object task, {int(run.task_attention['n'].max())} prompts ({run_dir.name}): of the 10 heads with the largest exact effect on the task, "
        f"**{int(named.sum())} hold a task role**, {int((heads['role'] == 'unexplained').sum())} are "
        f"unexplained. Task roles over all heads: "
        + (", ".join(f"{r} {n}" for r, n in roles["task_role"].value_counts().items()) or "none")
        + f".\n\n{markdown(heads[shown].round(3))}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, help="an existing default run of smollm2-135m")
    parser.add_argument("--ioi-run", type=Path, help="an existing run of the indirect-object task")
    parser.add_argument("--out", type=Path, default=Path("reports"), help="where new runs go")
    parser.add_argument(
        "--ioi", action=argparse.BooleanOptionalAction, default=True, help="measure part 2"
    )
    args = parser.parse_args()
    model = None
    run_dir = args.run
    if run_dir is None:
        model = interp.load_model("smollm2-135m")
        run_dir = interp.run(
            interp.RunOptions(out_dir=str(args.out), run_name="roles-default"), model=model
        )
    body = default_section(Path(run_dir))
    ioi_dir = args.ioi_run
    if ioi_dir is None and args.ioi:
        model = model or interp.load_model("smollm2-135m")
        task = ioi_task(model.tokenizer)
        options = interp.RunOptions(
            quick=True,
            out_dir=str(args.out),
            run_name="roles-ioi",
            stages={"ablate": interp.AblateConfig(tasks=(task,))},
        )
        ioi_dir = interp.run(options, model=model)
    if ioi_dir is not None:
        body += "\n\n" + ioi_section(Path(ioi_dir))
    write_section("Roles of SmolLM2-135M's heads that matter", "benchmarks/smollm2_roles.py", body)
    print(body)


if __name__ == "__main__":
    main()

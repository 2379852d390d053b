"""The packaged models' results as the documentation quotes them, measured by runs this script makes.

For each packaged model it makes the default run (``interp run --model NAME``) and, for the
causal one, a ``--quick`` run, under ``reports/analyses/packaged/`` (kept: a second call only
re-reads them; ``--fresh`` makes them again), and writes from their tables alone:

- ``analyses/results/packaged/quickstart.md``, the quick-start timing of docs/getting-started.md, from the runs'
  manifests (each stage's recorded seconds);
- ``analyses/results/packaged/results.md``, the "Results on the packaged models" of docs/results/index.md: the
  textbook heads with their feature scores and labels, the subject-verb heads, the role counts,
  the causal effects' precision and the removable share of heads (tools/docs.py adds the
  classifier's validation figures, from the shipped reference model);
- the "Packaged models" section of analyses/RESULTS.md with the full tables;

then has tools/docs.py put them in those pages (blocks ``generated:quickstart`` and
``generated:results``) and in analyses/RESULTS.md.

    python analyses/packaged.py [--fresh] [NAME ...]
"""

from __future__ import annotations

import shutil
import sys

import numpy as np
import pandas as pd

# _runs puts benchmarks/ (the results helpers) on the path: nothing may import them before it
from _runs import CACHE, MODELS, ROOT, md, regenerate, write  # noqa: E402

from interp.ablate.removable import removable_summary  # noqa: E402
from interp.pipeline.results import RunTables, load_run  # noqa: E402
from interp.report.summary import role_counts  # noqa: E402

HERE = CACHE / "packaged"
OUT = ROOT / "analyses" / "results" / "packaged"  # what the documentation's blocks are made of
SCRIPT = "analyses/packaged.py"
# Heads the literature and earlier studies of these models name: checked, never assumed.
KNOWN = {
    "smollm2-135m": {
        "induction": [(17, 3), (17, 4), (17, 5), (18, 6)],
        "previous_token": [(16, 0), (11, 1)],
        "syntactic": [(13, 8)],
    }
}
SUBJECT_VERB = "syntactic:nsubj:head2dep"


def make_run(name: str, quick: bool, fresh: bool) -> RunTables:
    """The model's default (or --quick) run, made once and then re-read."""
    from interp import ModelSpec, RunOptions
    from interp.pipeline.execute import run_pipeline

    run_name = "quick" if quick else "default"
    target = HERE / name / run_name
    if fresh:
        shutil.rmtree(target, ignore_errors=True)
    if not (target / "report.html").exists():
        shutil.rmtree(target, ignore_errors=True)
        options = RunOptions(
            model=ModelSpec(name=name), out_dir=str(HERE), run_name=run_name, quick=quick
        )
        made = run_pipeline(options)
        if made != target:
            made.rename(target)
    return load_run(target)


def stage_minutes(run: RunTables) -> dict[str, float]:
    stages = run.manifest.get("stages", {})
    return {name: stages[name]["seconds"] / 60 for name in stages}


def known_heads(name: str, run: RunTables) -> pd.DataFrame:
    """Each known head: its role's feature score against the baseline, and the label it gets."""
    rows = []
    feats = run.features.set_index(["layer", "head", "feature"])
    roles = run.roles.set_index(["layer", "head"])
    for role, heads in KNOWN.get(name, {}).items():
        for layer, head in heads:
            feature = _best_feature(run.features, layer, head, role)
            f = feats.loc[(layer, head, feature)]
            r = roles.loc[(layer, head)]
            rows.append(
                {
                    "head": f"L{layer}H{head}",
                    "known as": role,
                    "feature": feature,
                    "value": f["value"],
                    "baseline": f["baseline"],
                    "label": r["role"],
                    "confidence": r["confidence"],
                    "stability": r["stability"],
                    "kept": r["role"] == role,
                }
            )
    return pd.DataFrame(rows)


def _best_feature(features: pd.DataFrame, layer: int, head: int, role: str) -> str:
    if role != "syntactic":
        return role
    mine = features[
        (features["layer"] == layer)
        & (features["head"] == head)
        & features["feature"].str.startswith("syntactic:")
    ]
    return str(mine.loc[(mine["value"] - mine["baseline"]).idxmax(), "feature"])


def subject_verb(run: RunTables, top: int = 2) -> pd.DataFrame:
    rows = (
        run.features[run.features["feature"] == SUBJECT_VERB]
        .sort_values("value", ascending=False)
        .head(top)
    )
    return rows[["layer", "head", "value", "ci_low", "ci_high", "baseline", "n"]]


def effect_precision(run: RunTables) -> pd.DataFrame:
    """Per (ablation, metric) of the exact effects: heads, how many CIs exclude zero, median CI width."""
    exact = run.effects[run.effects["estimator"] == "exact"].dropna(subset=["delta"])
    rows = []
    for (ablation, metric), part in exact.groupby(["ablation", "metric"], sort=False):
        width = part["ci_high"] - part["ci_low"]
        rows.append(
            {
                "ablation": ablation,
                "metric": metric,
                "heads": len(part),
                "CI excludes 0": int(((part["ci_low"] > 0) | (part["ci_high"] < 0)).sum()),
                "median abs delta": float(part["delta"].abs().median()),
                "median CI width": float(width.median()),
            }
        )
    return pd.DataFrame(rows)


def removable(run: RunTables) -> pd.DataFrame:
    if run.pruning is None or run.pruning.empty:
        return pd.DataFrame()
    shares = removable_summary(run.pruning)
    return pd.DataFrame(
        [{"metric": m, **{f"within {t}": v for t, v in s.items()}} for m, s in shares.items()]
    )


def _pct(v: float) -> str:
    return f"{100 * v:.0f}%"


def quickstart_block(default: RunTables, quick: RunTables) -> str:
    d, q = stage_minutes(default), stage_minutes(quick)
    parts = ", ".join(f"{k} {v:.1f}" for k, v in d.items())
    return (
        f"On this project's 2-core CPU the default SmolLM2 run took **{sum(d.values()):.1f} minutes** "
        f"({parts}) and `--quick` **{sum(q.values()):.1f} minutes**, as the runs' manifests record "
        f"(`{SCRIPT}`; `benchmarks/run_time.py` times the whole command, start-up included)."
    )


def model_lines(name: str, run: RunTables) -> list[str]:
    roles = run.roles
    n = len(roles)
    counts = role_counts(roles)
    lines = [
        f"**{name}** ({n} heads, default run): primary roles "
        + ", ".join(f"{r.role} {r.heads}" for r in counts.itertuples())
        + f"; `first_token` {100 * (roles['role'] == 'first_token').mean():.1f}%, "
        f"`unexplained` {_pct((roles['role'] == 'unexplained').mean())}; median sink mass "
        f"{roles['sink_mass'].median():.2f}."
    ]
    known = known_heads(name, run)
    if not known.empty:
        lines.append(
            "- known heads: "
            + "; ".join(
                f"{k['head']} {k['known as']} ({k['feature']} {k['value']:.3f} vs baseline {k['baseline']:.3f}) "
                f"labelled `{k['label']}` at {k['confidence']:.2f}"
                for k in known.to_dict("records")
            )
            + f": {int(known['kept'].sum())} of {len(known)} keep their label."
        )
    sv = subject_verb(run)
    if not sv.empty:
        top = sv.iloc[0]
        lines.append(
            f"- subject-verb (`{SUBJECT_VERB}`, {int(top['n'])} arcs): the best head, L{int(top['layer'])}H{int(top['head'])}, picks the "
            f"subject {_pct(top['value'])} of the time (95% CI {_pct(top['ci_low'])}-{_pct(top['ci_high'])}) "
            f"against {_pct(top['baseline'])} for the best fixed rule."
        )
    prec = effect_precision(run)
    for p in prec.to_dict("records"):
        lines.append(
            f"- `{p['ablation']}` ablation, `{p['metric']}`: {p['heads']} heads measured exactly, "
            f"{p['CI excludes 0']} with a 95% CI that excludes zero (median |effect| {p['median abs delta']:.3g}, "
            f"median CI width {p['median CI width']:.3g})."
        )
    rem = removable(run)
    zero_intact = set(run.effects.loc[run.effects["baseline"].abs() < 1e-12, "metric"])
    for r in rem.to_dict("records"):
        what = (
            "an absolute change of 0.01 / 0.05"
            if r["metric"] in zero_intact
            else "a 1% / 5% change"
        )
        lines.append(
            f"- pruning `{r['metric']}` (held-out sequences, its own order): the share of heads that go "
            f"before it leaves a tolerance of {what}: {_pct(r['within 1%'])} / {_pct(r['within 5%'])}."
        )
    return lines


def results_block(runs: dict[str, RunTables]) -> str:
    out = [
        "Measured on this project's 2-core CPU by runs that `analyses/packaged.py` makes; "
        "`analyses/RESULTS.md` holds the full tables.",
        "",
    ]
    for name, run in runs.items():
        out += model_lines(name, run) + [""]
    return "\n".join(out).strip() + "\n"


def main(argv: list[str]) -> None:
    fresh = "--fresh" in argv
    names = [a for a in argv if not a.startswith("--")] or list(MODELS)
    runs = {name: make_run(name, quick=False, fresh=fresh) for name in names}
    body = []
    for name, run in runs.items():
        body += [
            f"### {name}",
            "",
            "\n".join(model_lines(name, run)),
            "",
            md(role_counts(run.roles)),
            "",
        ]
        for title, frame in (
            ("Known heads", known_heads(name, run)),
            ("Subject-verb heads", subject_verb(run, 5)),
            ("Exact effects", effect_precision(run)),
            ("Removable share", removable(run)),
        ):
            if not frame.empty:
                body += [f"#### {title}", "", md(frame), ""]
    write("Packaged models", SCRIPT, "\n".join(body))
    if set(names) == set(MODELS):
        quick = make_run("smollm2-135m", quick=True, fresh=fresh)
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "results.md").write_text(results_block(runs), encoding="utf-8")
        (OUT / "quickstart.md").write_text(
            quickstart_block(runs["smollm2-135m"], quick) + "\n", encoding="utf-8"
        )
        regenerate("results", "quickstart")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main(sys.argv[1:])

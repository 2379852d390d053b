"""Benchmark: wall time of the whole `interp run` on each packaged model, and how stable its answers are.

Commands, each in a fresh process (imports, model load and every stage included):

1. ``interp models --prepare`` with an empty model cache: the one-time GGUF dequantization
   that ``make demo`` / ``make test`` do at set-up;
2. per packaged model: ``interp run`` (the defaults: collect, weights, classify, the sequential
   exact sweep, pruning, report), the same with ``--seed 1``, and ``--quick``.

The runs use the cache that 1 filled, as every run after set-up does. Per-stage seconds come
from each run's manifest; the ablate stage's own split (thread probe, estimator, exact sweep,
pruning) from its timings; the scored positions its estimator read per metric from
``estimator_corpus``. Then, per model and metric: how many of the 5 largest exact effects of the
seed-1 run and of the quick run are among the default run's 5 (the issue's stability target: at
least 4), how many of each full run's 20 largest exact effects met the precision rule, and how
many of those 20 belong to heads whose role is ``unexplained``.
Written to the ``run_time`` section of RESULTS.md.

Usage: ``python benchmarks/run_time.py [--no-write]``  (about 25 minutes on a 2-core CPU)
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import tempfile
from pathlib import Path

import pandas as pd
from _results import interp_command, write_section  # noqa: E402

from interp.ablate.settle import TOP as TOP_PRECISE  # noqa: E402

SCRIPT = "benchmarks/run_time.py"
MODELS = ("smollm2-135m", "minilm-l6")
DEFAULT_MODEL = MODELS[0]
RUNS = {"default": [], "seed 1": ["--seed", "1"], "quick": ["--quick"]}
LIMITS = {
    "default": 10 * 60,
    "seed 1": 10 * 60,
    "quick": 3 * 60,
}  # the default model's targets on a 2-core CPU
TOP = 5  # the stability target compares the 5 largest effects


def timed(args: list[str], env: dict[str, str]) -> float:
    return interp_command(args, env)[0]


def ablate_info(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())["stages"]["ablate"]


def stage_lines(run_dir: Path) -> tuple[str, str]:
    stages = json.loads((run_dir / "manifest.json").read_text())["stages"]
    split = ", ".join(f"{name} {info['seconds']:.0f} s" for name, info in stages.items())
    ablate = stages.get("ablate", {})
    parts = ablate.get("timings", {})
    inner = ", ".join(
        f"{k} {parts[k]:.0f} s"
        for k in ("threads", "integrated", "attribution", "atp_star", "exact", "pruning")
        if k in parts
    )
    return (
        split,
        f"{inner}; {ablate.get('exact_heads')} heads exact, {ablate.get('threads')} thread(s)",
    )


def exact_rows(run_dir: Path, metric: str) -> pd.DataFrame:
    """The exact rows of ``metric`` for the primary ablation kind, largest |delta| first."""
    effects = pd.read_parquet(run_dir / "effects.parquet")
    rows = effects[(effects["estimator"] == "exact") & (effects["metric"] == metric)]
    rows = rows[rows["ablation"] == rows["ablation"].iloc[0]]
    return rows.loc[rows["delta"].abs().sort_values(ascending=False, kind="stable").index]


def top_heads(run_dir: Path, metric: str, k: int = TOP) -> list[tuple[int, int]]:
    rows = exact_rows(run_dir, metric).head(k)
    return sorted(zip(rows["layer"].astype(int), rows["head"].astype(int)))


def met(run_dir: Path, metric: str) -> str:
    rows = exact_rows(run_dir, metric).head(TOP_PRECISE)
    return f"{int((rows['precision'] == 'met').sum())} of {len(rows)}"


@functools.cache
def primary_roles(run_dir: Path) -> pd.Series:
    """Each head's primary role in the run, read once per run (every metric asks)."""
    return pd.read_parquet(run_dir / "roles.parquet").set_index(["layer", "head"])["role"]


def unexplained(run_dir: Path, metric: str) -> str:
    """How many of the run's 20 largest exact effects on ``metric`` belong to heads whose primary
    role is ``unexplained`` (the roles issue's target: at most 6)."""
    roles = primary_roles(run_dir)
    rows = exact_rows(run_dir, metric).head(TOP_PRECISE)
    heads = list(zip(rows["layer"].astype(int), rows["head"].astype(int)))
    return str(sum(roles.get(head) == "unexplained" for head in heads))


def positions(run_dir: Path, metric: str) -> str:
    """Scored positions the run's estimator read for ``metric`` (its manifest's estimator_corpus)."""
    return str(ablate_info(run_dir).get("estimator_corpus", {}).get(metric, {}).get("n_scored", ""))


def name(heads: list[tuple[int, int]]) -> str:
    return " ".join(f"L{layer}H{head}" for layer, head in heads)


def stability_rows(model: str, runs: dict[str, Path]) -> list[str]:
    """Per metric: the seed-1 and quick runs' top heads that are among the default run's, the
    top-20 precision of both full runs, the quick run's estimator positions, and the lists."""
    default, seed, quick = runs["default"], runs["seed 1"], runs["quick"]
    out = []
    for metric in ablate_info(default)["metrics"]:
        a, b, c = top_heads(default, metric), top_heads(seed, metric), top_heads(quick, metric)
        out.append(
            f"| {model} | {metric} | {len(set(a) & set(b))} of {TOP} | {len(set(a) & set(c))} of {TOP} "
            f"| {met(default, metric)} | {met(seed, metric)} "
            f"| {unexplained(default, metric)} | {unexplained(seed, metric)} | {positions(default, metric)} "
            f"| {positions(quick, metric)} | {name(a)} | {name(b)} | {name(c)} |"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    times, stability = [], []
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, INTERP_CACHE=str(Path(tmp) / "cache"))
        prepare_s = timed(["models", "--prepare"], env)
        for model in MODELS:
            runs = {}
            for run, extra in RUNS.items():
                slug = run.replace(" ", "-")
                seconds = timed(
                    ["run", "--model", model, "--out", tmp, "--name", slug, "-q", *extra], env
                )
                runs[run] = Path(tmp) / model / slug
                split, inner = stage_lines(runs[run])
                target = "—"
                if model == DEFAULT_MODEL:
                    verdict = "within" if seconds <= LIMITS[run] else "OVER"
                    target = f"{verdict} {LIMITS[run] // 60} min"
                command = " ".join(["interp run", *extra])
                times.append(
                    f"| {model} | `{command}` | {seconds / 60:.1f} min ({seconds:.0f} s) | {target} "
                    f"| {split} | {inner} |"
                )
            stability += stability_rows(model, runs)
    body = "\n".join(
        [
            "`interp run` in a fresh process each, model cache filled at set-up.",
            "",
            f"One-time set-up, `interp models --prepare` on an empty cache (GGUF read and dequantized by "
            f"transformers, saved as safetensors): **{prepare_s:.0f} s**. A run on an empty cache pays it once.",
            "",
            "| model | command | wall time | target | stages | inside ablate |",
            "| --- | --- | ---: | --- | --- | --- |",
            *times,
            "",
            f"Stability, per model and metric (exact |delta|, primary ablation kind): how many of the {TOP} "
            f"largest effects of the `--seed 1` run and of the `--quick` run are among the default run's "
            f"{TOP} (target: at least 4); `top {TOP_PRECISE} met`: how many of a full run's {TOP_PRECISE} "
            "largest effects met the precision rule (half-width <= max(10% of |delta|, 0.01)); "
            f"`top {TOP_PRECISE} unexplained`: how many of them belong to heads whose role is "
            "`unexplained` (target: at most 6); "
            "`estimator positions`: scored positions its estimator read (a full sweep's estimator reads "
            "the sweep's corpus).",
            "",
            f"| model | metric | seed 1 in default top {TOP} | quick in default top {TOP} "
            f"| top {TOP_PRECISE} met, default | top {TOP_PRECISE} met, seed 1 "
            f"| top {TOP_PRECISE} unexplained, default | top {TOP_PRECISE} unexplained, seed 1 "
            "| estimator positions, default "
            f"| estimator positions, quick | default top {TOP} | seed 1 top {TOP} | quick top {TOP} |",
            "| --- | --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- | --- | --- |",
            *stability,
        ]
    )
    print(body)
    if not args.no_write:
        write_section("run_time", SCRIPT, body)


if __name__ == "__main__":
    main()

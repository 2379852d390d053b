"""Benchmark: wall time of the whole `interp run` on the default model, as a user runs it.

Three commands, each in a fresh process (imports, model load and every stage included):

1. ``interp models --prepare`` with an empty model cache: the one-time GGUF dequantization
   that ``make demo`` / ``make test`` do at set-up;
2. ``interp run --model smollm2-135m`` (the defaults: collect, classify, the exact all-head
   ablation sweep, pruning, report);
3. ``interp run --model smollm2-135m --quick``.

Runs 2 and 3 use the cache that 1 filled, as every run after set-up does. Per-stage seconds
come from each run's manifest; the ablate stage's own split (thread probe, attribution, exact
sweep, pruning) from its timings. Then, per metric, how many of the quick run's five largest
exact effects are among the default run's five (what a user who trusts ``--quick`` gets).
Written to the ``run_time`` section of RESULTS.md.

Usage: ``python benchmarks/run_time.py [--no-write]``  (about 15 minutes on a 2-core CPU)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from _results import write_section  # noqa: E402

SCRIPT = "benchmarks/run_time.py"
MODEL = "smollm2-135m"
LIMITS = {"default": 10 * 60, "quick": 3 * 60}  # the targets on a 2-core CPU
TOP = 5


def timed(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "interp", *args],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def stage_lines(run_dir: Path) -> tuple[str, str]:
    stages = json.loads((run_dir / "manifest.json").read_text())["stages"]
    split = ", ".join(f"{name} {info['seconds']:.0f} s" for name, info in stages.items())
    ablate = stages.get("ablate", {})
    parts = ablate.get("timings", {})
    inner = ", ".join(
        f"{k} {parts[k]:.0f} s"
        for k in ("threads", "integrated", "attribution", "exact", "pruning")
        if k in parts
    )
    return (
        split,
        f"{inner}; {ablate.get('exact_heads')} heads exact, {ablate.get('threads')} thread(s)",
    )


def top_heads(run_dir: Path, metric: str) -> list[tuple[int, int]]:
    """The ``TOP`` heads with the largest exact |delta| on ``metric`` (primary ablation kind)."""
    effects = pd.read_parquet(run_dir / "effects.parquet")
    rows = effects[(effects["estimator"] == "exact") & (effects["metric"] == metric)]
    rows = rows[rows["ablation"] == rows["ablation"].iloc[0]]
    order = rows["delta"].abs().sort_values(ascending=False, kind="stable").index[:TOP]
    return sorted(zip(rows.loc[order, "layer"].astype(int), rows.loc[order, "head"].astype(int)))


def overlap_rows(default: Path, quick: Path) -> list[str]:
    """Per metric: the quick run's top heads that are among the default run's, and both lists."""
    metrics = json.loads((default / "manifest.json").read_text())["stages"]["ablate"]["metrics"]
    wide = json.loads((quick / "manifest.json").read_text())["stages"]["ablate"].get(
        "estimator_corpus", {}
    )
    out = []
    for metric in metrics:
        a, b = top_heads(default, metric), top_heads(quick, metric)
        name = lambda heads: " ".join(f"L{layer}H{head}" for layer, head in heads)  # noqa: E731
        positions = wide.get(metric, {}).get("n_scored", "")
        out.append(
            f"| {metric} | {len(set(a) & set(b))} of {TOP} | {positions} | {name(a)} | {name(b)} |"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, INTERP_CACHE=str(Path(tmp) / "cache"))
        prepare_s = timed(["models", "--prepare"], env)
        rows = []
        for name, extra in (("default", []), ("quick", ["--quick"])):
            seconds = timed(
                ["run", "--model", MODEL, "--out", tmp, "--name", name, "-q", *extra], env
            )
            split, inner = stage_lines(Path(tmp) / MODEL / name)
            verdict = "within" if seconds <= LIMITS[name] else "OVER"
            rows.append(
                f"| `interp run{' --quick' if extra else ''}` | {seconds / 60:.1f} min ({seconds:.0f} s) "
                f"| {verdict} {LIMITS[name] // 60} min | {split} | {inner} |"
            )
        overlap = overlap_rows(Path(tmp) / MODEL / "default", Path(tmp) / MODEL / "quick")
    body = "\n".join(
        [
            f"`interp run --model {MODEL}` in a fresh process each, model cache filled at set-up.",
            "",
            f"One-time set-up, `interp models --prepare` on an empty cache (GGUF read and dequantized by "
            f"transformers, saved as safetensors): **{prepare_s:.0f} s**. A run on an empty cache pays it once.",
            "",
            "| command | wall time | target | stages | inside ablate |",
            "| --- | ---: | --- | --- | --- |",
            *rows,
            "",
            f"The quick run's {TOP} largest exact effects per metric against the default run's (exact |delta|, "
            f"{MODEL}); `estimator positions`: scored positions the quick run's estimator read.",
            "",
            f"| metric | quick top {TOP} in default top {TOP} | estimator positions | default top {TOP} | quick top {TOP} |",
            "| --- | --- | ---: | --- | --- |",
            *overlap,
        ]
    )
    print(body)
    if not args.no_write:
        write_section("run_time", SCRIPT, body)


if __name__ == "__main__":
    main()

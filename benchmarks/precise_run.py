"""Benchmark: ``interp run --precise`` on the default model: its time on this CPU, what it
reached, and what the cost model predicts for its ablate stage on one GPU.

A precise run can outlast a sitting, and it is resumable, so this script runs it in segments:
each call runs ``interp run --model M --precise --name precise --out DIR`` (with ``--resume`` once
DIR holds the run), times it, and appends the segment (seconds, exit status) to
``DIR/precise_segments.json``; a segment stopped by Ctrl-C or SIGTERM is kept, and the next call
resumes where the run's last finished round left it. Once a call finishes the run, the section
is written: the wall time summed over the segments, the rounds, per metric how many of the 20
largest exact effects met the precision rule and what stopped the others, and the cost model's
count (benchmarks/SCALING.md, :mod:`scaling`) of the FLOPs of the exact rounds the run actually
made (each head's sweep read the positions its ``n_tokens`` says, at the tokens per scored
position of its eval set, rerun from its layer) and of its estimator (attribution: three
forwards per token), turned into seconds on one GPU at the same assumed effective rate as
benchmarks/scaling.py (not measured here: benchmarks/gpu_check.py measures a GPU's stages).

Usage: ``python benchmarks/precise_run.py --out DIR [--model smollm2-135m] [--no-write]``
(more than an hour on a 2-core CPU for SmolLM2: stop it and call again to resume);
``--summary-only`` writes the section of the run DIR already holds, running nothing
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
from _results import write_section  # noqa: E402
from scaling import arch_of, block_flops, unembed_flops  # noqa: E402

from interp.ablate.config import AblateConfig  # noqa: E402
from interp.ablate.corpora import stage_corpus  # noqa: E402
from interp.ablate.settle import TOP, positions_needed  # noqa: E402
from interp.model.load import load_model  # noqa: E402

SCRIPT = "benchmarks/precise_run.py"
SECTION = "precise_run"
NAME = "precise"
GPU_RATE = 300e12  # FLOP/s: benchmarks/scaling.py's assumed effective bf16 rate of one GPU
SEGMENTS = "precise_segments.json"


def run_segment(model: str, out: Path) -> int:
    """One invocation of the precise run (a resume when the run exists); its segment is recorded."""
    run_dir = out / model / NAME
    resume = (run_dir / "manifest.json").exists()
    args = ["run", "--model", model, "--precise", "--name", NAME, "--out", str(out), "-q"]
    start = time.perf_counter()
    status = subprocess.run([sys.executable, "-m", "interp", *args, *(["--resume"] * resume)])
    seconds = time.perf_counter() - start
    log = out / SEGMENTS
    segments = json.loads(log.read_text()) if log.exists() else []
    segments.append({"seconds": round(seconds, 1), "exit": status.returncode, "resume": resume})
    log.write_text(json.dumps(segments, indent=1))
    return status.returncode


def tokens_per_row(model, metrics: tuple[str, ...]) -> dict[str, tuple[float, float]]:
    """Eval set -> (padded tokens per scored position, mean padded width), from the default
    corpus (the precise run draws its rounds' sequences the same way)."""
    corpus = stage_corpus(model, AblateConfig(), metrics)
    out: dict[str, list[float]] = {}
    for b in corpus.batches:
        n, w = b.tokens.shape
        acc = out.setdefault(b.eval_set, [0.0, 0.0, 0.0])
        acc[0] += n * w
        acc[1] += len(b.row_batch)
        acc[2] += n
    return {k: (t / rows, t / n) for k, (t, rows, n) in out.items()}


def exact_flops(model, effects: pd.DataFrame, ratio: dict[str, tuple[float, float]]) -> float:
    """FLOPs of the exact rounds: every head rerun from its layer on the positions it rests on,
    per eval set (one metric each: its metrics share the sequences), the metric read on them."""
    a = arch_of(model)
    rows = effects[(effects["estimator"] == "exact") & (effects["ablation"] == "mean")]
    total = 0.0
    for eval_set, (per_row, width) in ratio.items():
        part = rows[rows["metric"] == eval_set]
        scored = part["n_tokens"].to_numpy(float)
        depth = a.n_layers - part["layer"].to_numpy(float)
        total += float(
            (scored * per_row * block_flops(a, int(width)) * depth).sum()
            + scored.sum() * unembed_flops(a)
        )
    return total


def estimator_flops(model, manifest: dict, ratio: dict[str, tuple[float, float]]) -> float:
    """Attribution over the estimator's corpus: one forward and one backward, about 3 forwards."""
    a = arch_of(model)
    ablate = manifest["stages"]["ablate"]
    corpus = ablate.get("estimator_corpus") or ablate["corpus"]
    total = 0.0
    for eval_set, (per_row, width) in ratio.items():
        scored = corpus.get(eval_set, {}).get("n_scored", 0)
        total += 3 * scored * per_row * (block_flops(a, int(width)) * a.n_layers + unembed_flops(a))
    return total


def duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min ({seconds:.0f} s)" if seconds >= 60 else f"{seconds:.1f} s"


def top_need(rows: pd.DataFrame, top: pd.DataFrame) -> str:
    """The most times its positions an unmet effect among ``top`` needs, with what stopped the
    effect that needs it (interp.ablate.settle.positions_needed); '-' where every one is met."""
    unmet = top[top["precision"] != "met"]
    if unmet.empty:
        return "-"
    need = positions_needed(rows).reindex(unmet.index).dropna()
    if need.empty:
        return f"undecided {len(unmet)}"
    undecided = len(unmet) - len(need)
    worst = need.idxmax()
    return f"{need[worst]:.1f}x ({unmet.loc[worst, 'precision']})" + (
        f", undecided {undecided}" if undecided else ""
    )


def summary(model_name: str, out: Path) -> str:
    run_dir = out / model_name / NAME
    manifest = json.loads((run_dir / "manifest.json").read_text())
    ablate = manifest["stages"]["ablate"]
    segments = json.loads((out / SEGMENTS).read_text())
    wall = sum(s["seconds"] for s in segments)
    effects = pd.read_parquet(run_dir / "effects.parquet")
    exact = effects[(effects["estimator"] == "exact") & (effects["ablation"] == "mean")]
    lines = []
    for metric in ablate["metrics"]:
        rows = exact[exact["metric"] == metric]
        top = rows.loc[rows["delta"].abs().sort_values(ascending=False, kind="stable").index[:TOP]]
        counts = rows["precision"].value_counts()
        others = ", ".join(f"{k} {v}" for k, v in counts.items() if k != "met")
        lines.append(
            f"| {metric} | {int((top['precision'] == 'met').sum())} of {len(top)} "
            f"| {int(counts.get('met', 0))} of {len(rows)} | {others or '-'} "
            f"| {int(rows['n_tokens'].max())} | {top_need(rows, top)} |"
        )
    model = load_model(model_name)
    ratio = tokens_per_row(model, tuple(ablate["metrics"]))
    exact_pf, estimate_pf = (
        exact_flops(model, effects, ratio) / 1e15,
        estimator_flops(model, manifest, ratio) / 1e15,
    )
    gpu = (exact_pf + estimate_pf) * 1e15 / GPU_RATE
    stages = ", ".join(f"{k} {v['seconds']:.0f} s" for k, v in manifest["stages"].items())
    return "\n".join(
        [
            f"`interp run --model {model_name} --precise`, in {len(segments)} segment(s) "
            f"(a segment stopped by SIGTERM, the next resumed with `--resume`): "
            f"**{duration(wall)}** on this CPU in all, {len(ablate['rounds'])} exact rounds. "
            f"The last segment's stages: {stages}.",
            "",
            f"Per metric (mean ablation): how many of the {TOP} largest exact effects met the precision rule "
            "(half-width <= max(10% of |delta|, 0.01)), how many of all heads did, what stopped the others "
            "(`rounds`: its head read the last slice it may: every one, or past the 100th only for an effect "
            "decided but not yet precise; `corpus`: its eval set had no further sequence, "
            "as prose has so many lines), the most positions one effect rests on, and `top 20 needs`: "
            "for the unmet effects among the top 20, the most times its positions one of them needs "
            "(its half-width shrinking as one over the square root of the positions; a projection, not "
            "measured) and what stopped it. Where that is `rounds`, its eval set is generated and more "
            "slices of it (`--max-rounds`) are projected to meet it; where it is `corpus`, only a "
            "larger eval set can; an effect still undecided against the tolerance has no projection.",
            "",
            f"| metric | top {TOP} met | all heads met | the others | most positions | top {TOP} needs |",
            "| --- | --- | --- | --- | ---: | --- |",
            *lines,
            "",
            f"Cost model: the exact rounds this run made come to {exact_pf:.2f} PFLOP and its estimator to "
            f"{estimate_pf:.2f} PFLOP; at the {GPU_RATE / 1e12:.0f} TFLOP/s assumed for one GPU "
            f"(benchmarks/scaling.py; not measured) that is **{duration(gpu)}** of ablate compute, "
            "before collect, weights, model load and report.",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--summary-only", action="store_true", help="write the section of the finished run in --out"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    status = 0 if args.summary_only else run_segment(args.model, args.out)
    if status != 0:
        sys.exit(f"the precise run stopped (exit {status}); run this again to resume it")
    body = summary(args.model, args.out)
    print(body)
    if not args.no_write:
        write_section(SECTION, SCRIPT, body)


if __name__ == "__main__":
    main()

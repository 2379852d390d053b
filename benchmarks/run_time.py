"""Benchmark: wall time of the whole `interp run` on the default model, as a user runs it.

Three commands, each in a fresh process (imports, model load and every stage included):

1. ``interp models --prepare`` with an empty model cache: the one-time GGUF dequantization
   that ``make demo`` / ``make test`` do at set-up;
2. ``interp run --model smollm2-135m`` (the defaults: collect, classify, the exact all-head
   ablation sweep, pruning, report);
3. ``interp run --model smollm2-135m --quick``.

Runs 2 and 3 use the cache that 1 filled, as every run after set-up does. Per-stage seconds
come from each run's manifest; the ablate stage's own split (thread probe, attribution, exact
sweep, pruning) from its timings. Written to the ``run_time`` section of RESULTS.md.

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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_section  # noqa: E402

SCRIPT = "benchmarks/run_time.py"
MODEL = "smollm2-135m"
LIMITS = {"default": 15 * 60, "quick": 3 * 60}  # what issue 5 asks of a 2-core CPU


def timed(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "interp", *args], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def stage_lines(run_dir: Path) -> tuple[str, str]:
    stages = json.loads((run_dir / "manifest.json").read_text())["stages"]
    split = ", ".join(f"{name} {info['seconds']:.0f} s" for name, info in stages.items())
    ablate = stages.get("ablate", {})
    parts = ablate.get("timings", {})
    inner = ", ".join(f"{k} {parts[k]:.0f} s" for k in ("threads", "integrated", "attribution", "exact", "pruning") if k in parts)
    return split, f"{inner}; {ablate.get('exact_heads')} heads exact, {ablate.get('threads')} thread(s)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, INTERP_CACHE=str(Path(tmp) / "cache"))
        prepare_s = timed(["models", "--prepare"], env)
        rows = []
        for name, extra in (("default", []), ("quick", ["--quick"])):
            seconds = timed(["run", "--model", MODEL, "--out", tmp, "--name", name, "-q", *extra], env)
            split, inner = stage_lines(Path(tmp) / MODEL / name)
            verdict = "within" if seconds <= LIMITS[name] else "OVER"
            rows.append(f"| `interp run{' --quick' if extra else ''}` | {seconds / 60:.1f} min ({seconds:.0f} s) "
                        f"| {verdict} {LIMITS[name] // 60} min | {split} | {inner} |")
    body = "\n".join([
        f"`interp run --model {MODEL}` in a fresh process each, model cache filled at set-up.",
        "",
        f"One-time set-up, `interp models --prepare` on an empty cache (GGUF read and dequantized by "
        f"transformers, saved as safetensors): **{prepare_s:.0f} s**. A run on an empty cache pays it once.",
        "",
        "| command | wall time | target | stages | inside ablate |",
        "| --- | ---: | --- | --- | --- |",
        *rows,
    ])
    print(body)
    if not args.no_write:
        write_section("run_time", SCRIPT, body)


if __name__ == "__main__":
    main()

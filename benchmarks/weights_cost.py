"""Benchmark: what the weights stage adds to the default run of the default model.

One ``interp run --model smollm2-135m`` with the defaults, in a fresh process (the model cache
filled beforehand, as every run after set-up finds it). From its manifest: every stage's seconds,
the weights stage's seconds over those of all the other stages (what it adds to the run; the
target is at most 20%), and the stage's own split (OV scores with their null and bootstrap; the
forward pass of the output sizes; composition of every pair). Both come from the same run on the
same machine, so the share holds whatever the machine's speed; run it on a quiet machine.
Written to the ``weights_cost`` section of RESULTS.md.

Usage: ``python benchmarks/weights_cost.py [--model NAME] [--no-write]``  (about 10 minutes on a
2-core CPU)
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

SCRIPT = "benchmarks/weights_cost.py"
TARGET = 0.20  # the weights stage may add at most this share to the default run


def run(model: str, out: str) -> tuple[float, dict]:
    """Wall seconds of the default run and its manifest's stages."""
    subprocess.run(
        [sys.executable, "-m", "interp", "models", "--prepare"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "interp", "run", "--model", model, "--out", out, "--name", "cost"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    seconds = time.perf_counter() - start
    manifests = list(Path(out).glob("*/cost/manifest.json"))
    return seconds, json.loads(manifests[0].read_text())["stages"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wall, stages = run(args.model, tmp)
    weights = stages["weights"]
    others = sum(info["seconds"] for name, info in stages.items() if name != "weights")
    share = weights["seconds"] / others
    split = ", ".join(f"{part} {s:.1f} s" for part, s in weights.get("timings", {}).items())
    all_stages = ", ".join(f"{name} {info['seconds']:.0f} s" for name, info in stages.items())
    verdict = "within" if share <= TARGET else "OVER"
    reading = weights.get("reading", {})
    body = "\n".join(
        [
            f"`interp run --model {args.model}` with the defaults, one fresh process, model cache filled.",
            "",
            "| run wall time | stages | weights stage | its share of the other stages | target |",
            "| ---: | --- | --- | ---: | --- |",
            f"| {wall:.0f} s | {all_stages} | {weights['seconds']:.1f} s ({split}) "
            f"| {100 * share:.1f}% | {verdict} {100 * TARGET:.0f}% |",
            "",
            f"OV circuits read on {reading.get('n_tokens')} sampled tokens (top-k {reading.get('top_k')}); "
            f"output sizes on {reading.get('output_sequences')} probes "
            f"({reading.get('output_positions')} content positions).",
        ]
    )
    print(body)
    if not args.no_write:
        write_section("weights_cost", SCRIPT, body)


if __name__ == "__main__":
    main()

"""Benchmark: the packaged pipeline on a GPU, against the CPU in the same run.

Runs `interp run --quick` on the packaged SmolLM2 three times through the Python API: on the CPU
in float32 (the reference), then on the GPU in float32 and in bfloat16. Writes each run's stage
times and the agreement of its tables with the CPU's: the largest difference of the attention-mass
features (the syntactic accuracies are listed apart: one flipped argmax moves them a whole arc),
of the exact effects relative to the largest effect, and the share of heads with the same
primary role; and for each GPU run, the collect stage's seconds against what the cost model of
benchmarks/SCALING.md predicts at an assumed effective rate (``--gpu-tflops``, the rate
benchmarks/scaling.py assumes for its GPU predictions). Without a CUDA GPU it prints one line
saying so and exits 0, writing nothing.

Usage: ``python benchmarks/gpu_check.py [--model smollm2-135m] [--no-write]``  (minutes on a GPU)
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from _results import markdown, write_section  # noqa: E402
from scaling import Arch, arch_of, block_flops  # noqa: E402

import interp  # noqa: E402
from interp.collect.features import STATIC_FEATURES  # noqa: E402

SCRIPT = "benchmarks/gpu_check.py"
KEYS = ["layer", "head", "ablation", "metric", "estimator"]


def make(model: str, device: str, dtype: str, out: Path) -> interp.RunTables:
    options = interp.RunOptions(
        model=interp.ModelSpec(name=model, device=device, dtype=dtype),
        quick=True,
        out_dir=str(out),
        run_name=f"{device.replace(':', '')}-{dtype}",
        skip=("report",),
    )
    return interp.load_run(interp.run(options, progress=False))


def agreement(reference: interp.RunTables, other: interp.RunTables) -> dict[str, float]:
    features = reference.features.merge(
        other.features, on=["layer", "head", "feature"], suffixes=("", "_b")
    )
    mass = features["feature"].isin(STATIC_FEATURES)
    gap = (features["value"] - features["value_b"]).abs()
    exact = reference.effects[reference.effects["estimator"] == "exact"]
    effects = exact.merge(other.effects, on=KEYS, suffixes=("", "_b"))
    scale = effects["delta"].abs().max()
    roles = reference.roles.merge(other.roles, on=["layer", "head"], suffixes=("", "_b"))
    return {
        "mass features, max |diff|": gap[mass].max(),
        "syntactic features, max |diff|": gap[~mass].max(),
        "exact effects, max |diff| / max |effect|": (effects["delta"] - effects["delta_b"])
        .abs()
        .max()
        / scale,
        "same primary role": (roles["role"] == roles["role_b"]).mean(),
    }


def collect_flops(a: Arch, corpora: dict[str, dict[str, Any]]) -> float:
    """Collection's FLOPs by the cost model (benchmarks/SCALING.md): one pass of every block over
    each suite's tokens, no unembedding; a suite's sequences are counted at their mean width."""
    return sum(
        c["n_tokens"] * a.n_layers * block_flops(a, c["n_tokens"] / c["n_sequences"])
        for c in corpora.values()
    )


def collect_prediction(a: Arch, run: interp.RunTables, tflops: float) -> dict[str, float]:
    """The collect stage's predicted seconds at ``tflops`` against its measured seconds."""
    flops = collect_flops(a, run.manifest["corpora"])
    predicted = flops / (tflops * 1e12)
    measured = run.manifest["stages"]["collect"]["seconds"]
    return {
        "collect GFLOP": flops / 1e9,
        "collect predicted s": predicted,
        "collect measured / predicted": measured / predicted,
    }


def stage_seconds(run: interp.RunTables) -> dict[str, float]:
    return {f"{name} s": entry.get("seconds") for name, entry in run.manifest["stages"].items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--gpu-tflops",
        type=float,
        default=300.0,
        help="assumed effective rate of the GPU for the collect prediction (TFLOP/s)",
    )
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu_check: no CUDA GPU here; nothing measured (run it on a machine with one)")
        return
    from interp.model.load import load_model

    arch = arch_of(load_model(interp.ModelSpec(name=args.model)))
    with tempfile.TemporaryDirectory() as out:
        cpu = make(args.model, "cpu", "float32", Path(out))
        rows = [{"run": "cpu float32", **stage_seconds(cpu)}]
        for dtype in ("float32", "bfloat16"):
            run = make(args.model, "cuda", dtype, Path(out))
            rows.append(
                {
                    "run": f"cuda {dtype}",
                    **stage_seconds(run),
                    **agreement(cpu, run),
                    **collect_prediction(arch, run, args.gpu_tflops),
                }
            )
    table = pd.DataFrame(rows)
    body = (
        f"`interp run --quick` on {args.model} ({torch.cuda.get_device_name()}), against the CPU in float32 in "
        f"the same run: stage times, how far each GPU run's tables are from the CPU's, and the collect "
        f"stage's seconds against the cost model's prediction at an assumed {args.gpu_tflops:.0f} TFLOP/s "
        f"(benchmarks/SCALING.md).\n\n{markdown(table)}"
    )
    print(body)
    if not args.no_write:
        write_section("GPU check", SCRIPT, body)


if __name__ == "__main__":
    main()

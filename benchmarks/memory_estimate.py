"""The memory estimate (interp.model.memory) against measured peaks, stage by stage.

Each case runs in a fresh process (tests/unit/memory_probe.py): the model is warmed up, the
stage runs, and the kernel's high-water mark of the resident size gives the measured peak. Two
measurements per case: with glibc's mmap threshold fixed (MALLOC_MMAP_THRESHOLD_=65536, so that
the resident size follows the live tensors, which is what the estimate counts) and with the
default allocator (which keeps freed blocks; the batch choice leaves room for that through
memory.HEADROOM).

    python benchmarks/memory_estimate.py [--no-smollm2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from _results import write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    ("collect", "tiny-llama", {"n_syntax": 100, "max_sentences": 60}),
    (
        "collect",
        "tiny-llama",
        {"n_syntax": 200, "max_sentences": 200, "max_tokens_per_batch": 8192},
    ),
    ("collect", "minilm-l6", {"n_syntax": 100, "max_sentences": 60}),
    ("collect", "minilm-l6", {"n_syntax": 200, "max_sentences": 200, "max_tokens_per_batch": 8192}),
    ("collect", "smollm2-135m", {"n_syntax": 200, "max_sentences": 100}),
    ("ablate", "tiny-llama", {}),
    ("ablate", "minilm-l6", {}),
    ("ablate", "minilm-l6", {"max_tokens_per_batch": 4096}),
    ("ablate", "smollm2-135m", {"top_k": 3}),
    ("ablate", "smollm2-135m", {"quick": True}),
]


def measure(stage: str, model: str, config: dict, live: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    if live:
        env["MALLOC_MMAP_THRESHOLD_"] = "65536"
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests" / "unit" / "memory_probe.py"),
            stage,
            model,
            json.dumps(config),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-smollm2", action="store_true")
    args = ap.parse_args()
    rows = []
    for stage, model, config in CASES:
        if args.no_smollm2 and model == "smollm2-135m":
            continue
        live, default = measure(stage, model, config, True), measure(stage, model, config, False)
        mib = 2**20
        rows.append(
            f"| {stage} | `{model}` | `{json.dumps(config)}` | {live['estimate'] / mib:.0f} | {live['measured'] / mib:.0f} "
            f"| {live['estimate'] / live['measured']:.2f} | {default['measured'] / mib:.0f} |"
        )
        print(rows[-1], flush=True)
    body = (
        "Peak memory a stage adds above the loaded (warmed-up) model, one fresh process per case, one thread.\n\n"
        "| stage | model | config | estimate (MiB) | measured, live tensors (MiB) | estimate / measured "
        "| measured, default allocator (MiB) |\n|---|---|---|---|---|---|---|\n" + "\n".join(rows)
    )
    write_section("Memory estimate vs measured peak", "benchmarks/memory_estimate.py", body)


if __name__ == "__main__":
    main()

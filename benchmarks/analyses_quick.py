"""Wall time of every experiment's ``--quick`` mode together, as the CI test runs them.

Runs ``python -m analyses --quick`` (the six experiments in order, each its own process) into a
fresh results folder and a fresh, empty model cache, exactly as tests/analyses/test_experiments.py
does, and writes the per-experiment and total seconds to the "analyses --quick" section of
benchmarks/RESULTS.md, against the 8-minute budget the CI test must keep on the 2-core machine.

Run under the shared CPU lock so that the time is honest:
``flock /tmp/interp-cpu.lock python benchmarks/analyses_quick.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
from _results import write_section  # noqa: E402

BUDGET_S = 8 * 60
COMMAND = "python -m analyses --quick --out TMP --cache TMP"


def run() -> tuple[dict[str, float], float]:
    """(seconds per experiment, total wall seconds) of one quick run from an empty cache."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "analyses",
                "--quick",
                "--out",
                f"{tmp}/out",
                "--cache",
                f"{tmp}/cache",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        total = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the quick run failed:\n{done.stdout}\n{done.stderr[-3000:]}")
    times = {
        m.group(1): float(m.group(2)) for m in re.finditer(r"^(\w+): (\d+) s$", done.stdout, re.M)
    }
    return times, total


def main() -> None:
    times, total = run()
    rows = "\n".join(f"| {name} | {seconds:.0f} |" for name, seconds in times.items())
    verdict = "within" if total <= BUDGET_S else "OVER"
    body = (
        f"`{COMMAND}` (what `tests/analyses/test_experiments.py` runs), empty model cache, "
        f"`OMP_NUM_THREADS` {os.environ.get('OMP_NUM_THREADS', 'unset')}.\n\n"
        f"| experiment | seconds |\n|---|---|\n{rows}\n| **all six (wall)** | **{total:.0f}** |\n\n"
        f"{total / 60:.1f} min in all: {verdict} the CI budget of {BUDGET_S // 60} min."
    )
    write_section("analyses --quick", "benchmarks/analyses_quick.py", body)
    print(body)


if __name__ == "__main__":
    main()

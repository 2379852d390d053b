"""Benchmark: how long `interp report` takes with its sections drawn in one process and in several.

The report's sections are drawn in forked worker processes (interp/report/drawing.py). This
times the whole command, each in a fresh process (imports, table reads, figures, HTML and PDF),
on two copies of one run directory: ``--processes 1`` (the reference, every section drawn in the
command's own process) against ``--processes N``, N this machine's CPUs, interleaved over
``--rounds`` rounds. Wall and CPU seconds (the child's user + system time, its workers included)
per command; then whether the two copies ended with the same figure files, byte for byte (the
process count is a placement setting: it must not change what the report writes).

The run is ``--run DIR`` if given, else a fresh ``interp run --quick`` of the default model
(about 3 minutes more).

Usage: ``python benchmarks/report_time.py [--run DIR] [--rounds 3] [--no-write]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from _results import interp_command, write_section  # noqa: E402

SCRIPT = "benchmarks/report_time.py"
MODEL = "smollm2-135m"


def figures(run: Path) -> dict[str, bytes]:
    """Every figure file the report drew in ``run``, by its path under the figures folder."""
    folder = run / "figures"
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def summary(seconds: list[float]) -> str:
    return f"{statistics.median(seconds):.1f} s ({min(seconds):.1f}-{max(seconds):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run", type=Path, help="a run directory (default: a fresh --quick run)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    many = os.cpu_count() or 1
    counts = sorted({1, many})
    with tempfile.TemporaryDirectory() as tmp:
        source = args.run
        if source is None:
            interp_command(
                ["run", "--model", MODEL, "--quick", "--out", tmp, "--name", "quick", "-q"]
            )
            source = Path(tmp) / MODEL / "quick"
        copies = {n: Path(tmp) / f"processes-{n}" for n in counts}
        for copy in copies.values():
            shutil.copytree(source, copy)
        wall: dict[int, list[float]] = {n: [] for n in counts}
        cpu: dict[int, list[float]] = {n: [] for n in counts}
        for _ in range(args.rounds):
            for n in counts:
                w, c = interp_command(["report", str(copies[n]), "--processes", str(n)])
                wall[n].append(w)
                cpu[n].append(c)
        drawn = {n: figures(copy) for n, copy in copies.items()}
    same = all(drawn[n] == drawn[1] for n in counts)
    reference = statistics.median(wall[1])
    rows = [
        f"| {n} | {summary(wall[n])} | {summary(cpu[n])} | {statistics.median(wall[n]) / reference:.2f} "
        f"| {statistics.median(cpu[n]) / statistics.median(cpu[1]):.2f} |"
        for n in counts
    ]
    body = "\n".join(
        [
            f"`interp report RUN --processes N` on copies of one run directory ({args.run or f'a fresh `interp run --model {MODEL} --quick`'}), "
            f"each command a fresh process (imports, tables, figures, HTML and PDF), {args.rounds} interleaved rounds; "
            "median (min-max). CPU: the command's user + system seconds, its drawing workers included. "
            "Ratios against one process, measured in the same rounds.",
            "",
            "| processes | wall | CPU | wall / 1 process | CPU / 1 process |",
            "| ---: | --- | --- | ---: | ---: |",
            *rows,
            "",
            f"Figure files the copies ended with: {len(drawn[1])} per copy, "
            + ("**byte-identical** for every process count." if same else "**they differ**."),
        ]
    )
    print(body)
    if not same:
        sys.exit("report_time: the figure files differ between process counts")
    if not args.no_write:
        write_section("report_time", SCRIPT, body)


if __name__ == "__main__":
    main()

"""Shared helper: each benchmark (and analysis) owns one section of its RESULTS.md and rewrites only it."""

from __future__ import annotations

import datetime as dt
import os
import platform
import re
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")
HEADER = "# Benchmark results\n\nEach section is written by the script it names; rerun the script to refresh it.\n"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, {platform.system()}"


def markdown(frame) -> str:
    """A pipe table of a DataFrame (pandas' to_markdown needs tabulate, which the project does not
    depend on); floats with three decimals."""
    cells = [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row] for row in frame.itertuples(index=False)]
    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + " --- |" * len(frame.columns)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells])


def write_section(name: str, script: str, body: str, results: Path = RESULTS, header: str = HEADER) -> None:
    """Replace (or append) the section ``name`` of ``results`` (benchmarks/RESULTS.md; the analyses
    pass analyses/RESULTS.md) with ``body``, stamped with date and machine."""
    stamp = f"_{dt.date.today().isoformat()} on {machine()}; written by `{script}`._"
    section = f"<!-- begin {name} -->\n## {name}\n\n{stamp}\n\n{body.strip()}\n<!-- end {name} -->\n"
    text = results.read_text() if results.exists() else header
    pattern = re.compile(rf"<!-- begin {re.escape(name)} -->.*?<!-- end {re.escape(name)} -->\n", re.S)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
    results.write_text(text)

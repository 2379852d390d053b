"""Shared helper: each benchmark (and analysis) owns one section of its RESULTS.md.

A script writes its section's source, ``sections/<slug>.md`` beside the RESULTS.md it belongs
to (stamped with the date, the machine and the script), and then has tools/docs.py, the one
docs generator, put it in the RESULTS.md as the block ``generated:<slug>``; nothing here edits
a RESULTS.md by itself.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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
    cells = [
        [f"{v:.3f}" if isinstance(v, float) else str(v) for v in row]
        for row in frame.itertuples(index=False)
    ]
    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + " --- |" * len(frame.columns)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells])


def slug(name: str) -> str:
    """A section's block name: ``"Agreement with detect_head (smollm2-135m)"`` ->
    ``agreement-with-detect_head-smollm2-135m``."""
    return re.sub(r"[^a-z0-9_]+", "-", name.lower()).strip("-")


def section_source(name: str, results: Path = RESULTS) -> Path:
    """Where section ``name`` of ``results`` is written: ``sections/<slug>.md`` beside it."""
    return results.parent / "sections" / f"{slug(name)}.md"


def write_section(
    name: str, script: str, body: str, results: Path = RESULTS, header: str = HEADER
) -> None:
    """Write section ``name`` of ``results`` (benchmarks/RESULTS.md; the analyses pass
    analyses/RESULTS.md): its source, stamped with date and machine, then the block."""
    stamp = f"_{dt.date.today().isoformat()} on {machine()}; written by `{script}`._"
    source = section_source(name, results)
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(f"## {name}\n\n{stamp}\n\n{body.strip()}\n")
    if not results.exists():
        results.write_text(header)
    regenerate(slug(name))


def interp_command(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall and CPU seconds of ``python -m interp ARGS`` in a fresh process (its output dropped;
    ``env``: its environment, None for this one's); a failed command raises."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "interp", *args],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def regenerate(*blocks: str) -> None:
    """Run the docs generator (``python tools/docs.py BLOCK ...``) for these blocks, as a person would."""
    subprocess.run([sys.executable, str(ROOT / "tools" / "docs.py"), *blocks], check=True)

"""Shared helper: each benchmark owns one section of benchmarks/RESULTS.md and rewrites only it."""

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


def write_section(name: str, script: str, body: str) -> None:
    """Replace (or append) the section ``name`` of RESULTS.md with ``body``, stamped with date and machine."""
    stamp = f"_{dt.date.today().isoformat()} on {machine()}; written by `{script}`._"
    section = f"<!-- begin {name} -->\n## {name}\n\n{stamp}\n\n{body.strip()}\n<!-- end {name} -->\n"
    text = RESULTS.read_text() if RESULTS.exists() else HEADER
    pattern = re.compile(rf"<!-- begin {re.escape(name)} -->.*?<!-- end {re.escape(name)} -->\n", re.S)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text)

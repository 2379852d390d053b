"""The committed results: six write-ups from full runs of committed code, their figures and tables,
labels from the installed classifier, and the documentation section generated from them.

When this fails after a classifier change, ``python -m analyses --stale`` redoes what is out of date.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from analyses._common import EXPERIMENTS, RESULTS, ROOT, why_stale


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_a_full_run_write_up_with_its_figures_and_tables(name):
    text = (RESULTS / f"{name}.md").read_text()
    command = re.search(r"^- Command: `(.+)`(.*)$", text, re.M)
    assert command and command.group(1).startswith(f"python -m analyses.{name}"), name
    assert "--quick" not in command.group(1) and "quick mode" not in command.group(2), (
        f"{name}: a quick run"
    )
    assert re.search(r"^- Run time: [\d.]+ min \(\d+ s\) on ", text, re.M), name
    assert "uncommitted changes" not in text, f"{name}: made by code that was not committed"
    figures = re.findall(rf"!\[[^\]]*\]\(({name}/[^)]+\.png)\)", text)
    assert figures, f"{name}: no figure"
    for figure in figures:
        assert (RESULTS / figure).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", figure
    assert list((RESULTS / name).glob("*.csv")), f"{name}: no table"


def test_a_stale_write_up_is_never_shown_as_current():
    """A write-up made under another features version, reference classifier or ablation default
    may wait for its rerun, but the documentation says it is stale, and why."""
    page = (ROOT / "docs" / "results" / "experiments.md").read_text(encoding="utf-8")
    block = page[
        page.index("<!-- begin generated:experiments -->") : page.index(
            "<!-- end generated:experiments -->"
        )
    ]
    lines = {
        name: next((line for line in block.splitlines() if f"results/{name}.md" in line), "")
        for name in EXPERIMENTS
    }
    for name in EXPERIMENTS:
        reasons = why_stale(RESULTS, name)
        assert ("*Stale (" in lines[name]) == bool(reasons), (name, reasons, lines[name])
        assert all(reason in lines[name] for reason in reasons), name


def test_the_experiments_section_is_the_one_the_write_ups_make():
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "docs.py"), "--check", "experiments"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"{done.stdout}regenerate it: python tools/docs.py"

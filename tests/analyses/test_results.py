"""The committed results: six write-ups from full runs of committed code, their figures and tables,
labels from the installed classifier, and the README section copied from them.

When this fails after a classifier change, ``python -m analyses --stale`` redoes what is out of date.
"""

from __future__ import annotations

import re

import pytest

from analyses.__main__ import stale
from analyses._common import EXPERIMENTS, RESULTS, ROOT
from analyses.readme import BEGIN, END, section


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_a_full_run_write_up_with_its_figures_and_tables(name):
    text = (RESULTS / f"{name}.md").read_text()
    command = re.search(r"^- Command: `(.+)`(.*)$", text, re.M)
    assert command and command.group(1).startswith(f"python -m analyses.{name}"), name
    assert "--quick" not in command.group(1) and "quick mode" not in command.group(2), f"{name}: a quick run"
    assert re.search(r"^- Run time: [\d.]+ min \(\d+ s\) on ", text, re.M), name
    assert "uncommitted changes" not in text, f"{name}: made by code that was not committed"
    figures = re.findall(rf"!\[[^\]]*\]\(({name}/[^)]+\.png)\)", text)
    assert figures, f"{name}: no figure"
    for figure in figures:
        assert (RESULTS / figure).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", figure
    assert list((RESULTS / name).glob("*.csv")), f"{name}: no table"


def test_head_labels_come_from_the_installed_classifier():
    assert stale(RESULTS) == [], "rerun them: python -m analyses --stale"


def test_the_readme_section_is_the_one_the_write_ups_make():
    readme = (ROOT / "README.md").read_text()
    assert BEGIN in readme and END in readme
    shown = readme[readme.index(BEGIN): readme.index(END) + len(END)]
    assert shown == section(RESULTS, ROOT), "regenerate it: python -m analyses.readme"

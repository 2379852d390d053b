"""Every measured figure in the README, the documentation pages and analyses/RESULTS.md is written
by a script.

The README and the pages of docs/ quote measurements only inside ``<!-- begin generated:NAME -->``
blocks (assembled by tools/docs.py from what the measuring scripts wrote); outside them a decimal
or a multiplier would be a typed number that goes stale. Every section of analyses/RESULTS.md and
benchmarks/RESULTS.md names the script that measured it, and that script exists.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = {
    path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
    for path in sorted((ROOT / "docs").rglob("*.md"))
}
# Not measurements: the supported Python, the pinned torch build, the bootstrap quantiles, the
# absolute tolerance of a metric that is 0 intact.
VERSIONS = {"3.10", "2.13", "2.5%", "97.5%", "0.01"}
MEASURED = re.compile(r"\b\d+\.\d{2,}\b|\b\d+\.\d+%|\b\d+(?:\.\d+)?x\b")


def _outside_generated(text: str) -> str:
    text = re.sub(r"<!-- begin (\S+) -->.*?<!-- end \1 -->", "", text, flags=re.S)
    return re.sub(r"```.*?```", "", text, flags=re.S)


def test_measured_numbers_live_in_generated_blocks():
    for name, text in {"README.md": README, **PAGES}.items():
        typed = [
            m.group(0)
            for m in MEASURED.finditer(_outside_generated(text))
            if m.group(0) not in VERSIONS
        ]
        assert not typed, f"numbers typed into {name} outside generated blocks: {typed}"


def test_measured_blocks_are_generated():
    for page, name in (
        ("docs/getting-started.md", "quickstart"),
        ("docs/results/index.md", "results"),
    ):
        block = re.search(
            rf"<!-- begin generated:{name} -->\n(.*?)<!-- end generated:{name} -->",
            PAGES[page],
            re.S,
        )
        assert block, name
        assert "not yet generated" not in block.group(1), (
            f"run python analyses/packaged.py to fill {name}"
        )


def test_quoted_validation_matches_the_shipped_reference():
    held = json.loads((ROOT / "interp" / "classify" / "reference" / "model.json").read_text())[
        "held_out"
    ]
    m = re.search(
        r"accuracy (\d\.\d+), expected calibration error (\d\.\d+)", PAGES["docs/results/index.md"]
    )
    assert m, "the results block quotes the reference bank's held-out accuracy and ECE"
    assert float(m.group(1)) == round(held["accuracy"], 2)
    assert float(m.group(2)) == round(held["ece"], 3)


def test_every_results_section_names_an_existing_script():
    for results in (ROOT / "analyses" / "RESULTS.md", ROOT / "benchmarks" / "RESULTS.md"):
        text = results.read_text(encoding="utf-8")
        sections = re.findall(
            r"<!-- begin generated:(\S+) -->\n\n## .*?\n\n_.*?written by `([^`]+)`", text, re.S
        )
        assert sections, results
        headings = re.findall(r"^## ", text, re.M)
        assert len(sections) == len(headings), f"{results.name}: a section without its script stamp"
        for name, script in sections:
            assert (ROOT / script.split()[0]).is_file(), (results.name, name, script)

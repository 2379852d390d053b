"""The documentation's "Experiments" block, from the experiments' write-up data in analyses/results/.

One line per claim: its title, a link to the write-up, its run time and its **Answer** line,
which each experiment generates from the numbers it measured. All of it is read from the data
file every run writes beside its write-up (``NAME.json``, see :meth:`analyses._common.Experiment.write`),
never parsed back out of the markdown. tools/docs.py puts the block in
docs/results/experiments.md (``generated:experiments``); this module only says what the block
holds.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from analyses._common import EXPERIMENTS, why_stale, write_up_data

QUICK_SECTION = (
    Path("benchmarks") / "sections" / "analyses-quick.md"
)  # benchmarks/analyses_quick.py's


def claim_line(data: dict, link: str) -> str:
    """``- **Title** ([write-up](link)) (N min to run): answer`` from one write-up's data."""
    return (
        f"- **{data['title']}** ([write-up]({link})) ({data['run_seconds'] / 60:.1f} min to run): "
        f"{data['answer']}"
    )


def section(results: Path, relative_to: Path, root: Path) -> str:
    """The block's text: how the experiments are run, one line per claim (links relative to
    ``relative_to``, the folder of the page that shows the block; ``root``: the checkout)."""
    lines = [
        "Six claims about multi-head attention, each measured by one command "
        "(`python -m analyses.NAME`; `--quick` for a smoke test) that writes its tables, seaborn figures "
        "and write-up (with the exact command, run time, seeds and error bars) into `analyses/results/`. "
        "The lines below are copied from those write-ups' data (`python tools/docs.py`; every full run "
        f"refreshes them). `python -m analyses` runs all six in order{total_time(results)}; "
        "`python -m analyses --stale` reruns those made under another version of what they depend on "
        f"(the features, the reference classifier, the ablate stage's default kind); a line marked stale says which.{quick_time(root)}",
        "",
    ]
    for name in EXPERIMENTS:
        path = results / f"{name}.md"
        data = write_up_data(path)
        if data is not None and path.exists():
            reasons = why_stale(results, name)
            stale = (
                f" *Stale ({'; '.join(reasons)}): rerun with `python -m analyses --stale`.*"
                if reasons
                else ""
            )
            lines.append(claim_line(data, os.path.relpath(path, relative_to)) + stale)
        else:
            lines.append(f"- `{name}`: not run yet (`python -m analyses.{name}`)")
    return "\n".join(lines)


def total_time(results: Path) -> str:
    """`` (N min in their last full runs)``: the sum of the write-ups' run times ('' unless all six have one)."""
    found = [write_up_data(results / f"{name}.md") for name in EXPERIMENTS]
    if not all(found):
        return ""
    return f" ({sum(d['run_seconds'] for d in found) / 60:.0f} min in their last full runs)"


def quick_time(root: Path) -> str:
    """The CI test's time for all six quick modes, as benchmarks/analyses_quick.py measured it ('' if never)."""
    path = root / QUICK_SECTION
    found = (
        re.search(r"([\d.]+) min in all: (\w+) the CI budget of (\d+) min", path.read_text())
        if path.exists()
        else None
    )
    if not found:
        return ""
    return (
        f" All six `--quick` modes together, as the CI test runs them: {found.group(1)} min "
        f"(budget {found.group(3)} min; `benchmarks/analyses_quick.py`)."
    )

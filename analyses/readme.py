"""Write the README's "Experiments" section from the write-ups in analyses/results/.

One line per claim: its title, a link to the write-up and the write-up's **Answer** line, which
each experiment generates from the numbers it measured. The section sits between
``<!-- begin experiments -->`` and ``<!-- end experiments -->`` (appended at the end of README.md
if the markers are missing); nothing else in the README is touched.

    python -m analyses.readme [--results DIR] [--readme PATH]
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from analyses._common import EXPERIMENTS, RESULTS, ROOT

BEGIN, END = "<!-- begin experiments -->", "<!-- end experiments -->"


def claim_line(path: Path, link: str) -> str:
    """``- **Title** ([write-up](link)): answer`` from one write-up."""
    text = path.read_text()
    title = re.search(r"^# (.+)$", text, re.M)
    answer = re.search(r"^\*\*Answer\.\*\* (.+)$", text, re.M)
    if not title or not answer:
        raise ValueError(f"{path} has no '# title' or '**Answer.**' line: rerun its experiment")
    run_time = re.search(r"^- Run time: ([^(]+)", text, re.M)
    took = f" ({run_time.group(1).strip()} to run)" if run_time else ""
    return f"- **{title.group(1)}** ([write-up]({link})){took}: {answer.group(1)}"


def section(results: Path, relative_to: Path) -> str:
    lines = [BEGIN, "## Experiments", "",
             "Six claims about multi-head attention, each measured by one command "
             "(`python -m analyses.NAME`; `--quick` for a smoke test) that writes its tables, seaborn figures "
             "and write-up (with the exact command, run time, seeds and error bars) into `analyses/results/`. "
             "The lines below are copied from those write-ups (`python -m analyses.readme`; every full run "
             f"refreshes them). `python -m analyses` runs all six in order{total_time(results)}; "
             "`python -m analyses --stale` reruns those whose head labels came from an older classifier "
             f"(features version).{quick_time(relative_to)}", ""]
    for name in EXPERIMENTS:
        path = results / f"{name}.md"
        if path.exists():
            lines.append(claim_line(path, os.path.relpath(path, relative_to)))
        else:
            lines.append(f"- `{name}`: not run yet (`python -m analyses.{name}`)")
    return "\n".join(lines + ["", END])


def total_time(results: Path) -> str:
    """`` (N min in their last full runs)``: the sum of the write-ups' run times ('' unless all six have one)."""
    found = [re.search(r"^- Run time: [\d.]+ min \((\d+) s\)", p.read_text(), re.M) if p.exists() else None
             for p in (results / f"{name}.md" for name in EXPERIMENTS)]
    if not all(found):
        return ""
    return f" ({sum(int(m.group(1)) for m in found) / 60:.0f} min in their last full runs)"


def quick_time(root: Path) -> str:
    """The CI test's time for all six quick modes, as benchmarks/analyses_quick.py measured it ('' if never)."""
    path = root / "benchmarks" / "RESULTS.md"
    found = re.search(r"([\d.]+) min in all: (\w+) the CI budget of (\d+) min", path.read_text()) if path.exists() else None
    if not found:
        return ""
    return (f" All six `--quick` modes together, as the CI test runs them: {found.group(1)} min "
            f"(budget {found.group(3)} min; `benchmarks/analyses_quick.py`).")


def update(readme: Path, results: Path) -> str:
    """Replace (or append) the section in ``readme``; returns the new text."""
    text = readme.read_text() if readme.exists() else ""
    new = section(results, readme.parent)
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    text = pattern.sub(lambda _: new, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + new + "\n"
    readme.write_text(text)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m analyses.readme", description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    args = parser.parse_args()
    update(args.readme, args.results)
    print(f"wrote the experiments section of {args.readme}")


if __name__ == "__main__":
    main()

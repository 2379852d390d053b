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
             "refreshes them). `python -m analyses` runs all six in order (about an hour on 2 cores); "
             "`python -m analyses --stale` reruns those whose head labels came from an older classifier "
             "(features version).", ""]
    for name in EXPERIMENTS:
        path = results / f"{name}.md"
        if path.exists():
            lines.append(claim_line(path, os.path.relpath(path, relative_to)))
        else:
            lines.append(f"- `{name}`: not run yet (`python -m analyses.{name}`)")
    return "\n".join(lines + ["", END])


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

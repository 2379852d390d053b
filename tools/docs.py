"""The one generator of the documentation's generated blocks.

A generated block is the text between ``<!-- begin generated:NAME -->`` and
``<!-- end generated:NAME -->`` in a page of the documentation site (``docs/``),
benchmarks/RESULTS.md, benchmarks/SCALING.md or analyses/RESULTS.md (the only marker form). Every
block has one source, and this script only assembles: it never measures, never loads a model.
Scripts that measure write their source file and then run this script for their block.

Measured blocks:

- ``quickstart`` (docs/getting-started.md): ``analyses/results/packaged/quickstart.md`` (written
  by analyses/packaged.py from the default and ``--quick`` runs' manifests);
- ``results`` (docs/results/index.md): ``analyses/results/packaged/results.md``
  (analyses/packaged.py), then the classifier's held-out scores from
  ``interp/classify/reference/model.json``;
- ``experiments`` (docs/results/experiments.md): each experiment's write-up data,
  ``analyses/results/NAME.json`` (written beside ``NAME.md`` by every run), through
  :mod:`analyses.readme`;
- ``ray-overhead`` (docs/how-to/scaling.md): the summary of
  ``benchmarks/sections/ray-executor-overhead-on-one-machine.md`` (written by
  benchmarks/ray_overhead.py);
- ``scaling`` (docs/how-to/scaling.md): the predictions of
  ``benchmarks/sections/scaling-the-cost-model-checked.md`` (written by benchmarks/scaling.py),
  whose whole text is also the block ``scaling`` of ``benchmarks/SCALING.md``.
- ``precise`` (README.md and docs/concepts/precision.md): the time of ``--precise`` on the default
  model, how many of each metric's 20 largest effects it got to the precision rule, and the cost
  model's one-GPU figure, from ``benchmarks/sections/precise_run.md`` (written
  by benchmarks/precise_run.py).

Reference blocks, made from the code (tools/reference.py):

- ``cli`` (docs/reference/cli.md): every command and option of the click group ``interp``;
- ``stages`` (docs/architecture.md): the stage registry (:mod:`interp.pipeline.stages`: each
  stage's package, what it reads and writes, its report sections);
- ``columns`` (docs/reference/tables.md): the table schemas (:mod:`interp.pipeline.tables`: each
  table's description, and every column with its type and meaning from
  ``interp/pipeline/tables.tsv``);
- ``troubleshooting`` (docs/reference/troubleshooting.md): the message catalogue,
  ``interp/troubleshooting.tsv``;
- ``module-map`` (docs/architecture.md): the first paragraph of the docstring of every module
  under ``interp/``.

``benchmarks/RESULTS.md`` and ``analyses/RESULTS.md``: one block per file of their ``sections/``
folder, named after it (``benchmarks/sections/run_time.md`` is ``generated:run_time``), which
the benchmark or analysis writes through ``benchmarks/_results.py``; a new file becomes a new
block at the end of its document.

    python tools/docs.py                    # rewrite every block from its source
    python tools/docs.py --check            # name each stale block (exit 1); write nothing
    python tools/docs.py [--check] [--root DIR] [NAME | DOCUMENT ...]   # only these

``tests/docs/test_docs_generated.py`` runs ``--check``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as ``python tools/docs.py``: the checkout's packages
    sys.path.insert(0, str(ROOT))

from analyses.readme import section as experiments_section  # noqa: E402
from tools.reference import (  # noqa: E402
    SourceMissing,
    cli_reference,
    columns,
    module_map,
    stages,
    troubleshooting,
)
from tools.reference import read_source as _read  # noqa: E402

MARKED = re.compile(r"<!-- begin generated:([\w.-]+) -->\n(.*?)\n<!-- end generated:\1 -->", re.S)
# The documentation pages that hold generated blocks (the site's pages, docs/ in the checkout).
GETTING_STARTED = "docs/getting-started.md"
RESULTS_PAGE = "docs/results/index.md"
EXPERIMENTS_PAGE = "docs/results/experiments.md"
TROUBLESHOOTING_PAGE = "docs/reference/troubleshooting.md"
TABLES_PAGE = "docs/reference/tables.md"
CLI_PAGE = "docs/reference/cli.md"
ARCHITECTURE_PAGE = "docs/architecture.md"
SCALING_PAGE = "docs/how-to/scaling.md"
RESULTS = ("benchmarks/RESULTS.md", "analyses/RESULTS.md")


def begin(name: str) -> str:
    return f"<!-- begin generated:{name} -->"


def end(name: str) -> str:
    return f"<!-- end generated:{name} -->"


def block_text(name: str, body: str) -> str:
    """A whole block: markers around the body, a blank line on either side of it."""
    return f"{begin(name)}\n\n{body.strip()}\n\n{end(name)}"


@dataclass(frozen=True)
class Block:
    document: str  # relative to the root
    name: str
    source: str  # where the text comes from, for the reader of a --check line
    render: Callable[[Path], str]  # root -> body


# --- measured blocks -----------------------------------------------------------------------------

PACKAGED = "analyses/results/packaged"
REFERENCE = "interp/classify/reference/model.json"


def quickstart(root: Path) -> str:
    return _read(root, f"{PACKAGED}/quickstart.md")


def results(root: Path) -> str:
    held = json.loads(_read(root, REFERENCE))["held_out"]
    validation = (
        f"**Classifier validation**: on a held-out reference bank (another seed; synthetic heads) accuracy "
        f"{held['accuracy']:.2f}, expected calibration error {held['ece']:.3f} (`{REFERENCE}`); on heads of "
        "trained models whose role was found by intervention, and on planted heads, see "
        '`benchmarks/RESULTS.md` ("Head-role classifier on trained heads").'
    )
    return _read(root, f"{PACKAGED}/results.md") + "\n\n" + validation


def experiments(root: Path) -> str:
    """The experiments' lines, each linking its write-up relative to the page that shows them."""
    return experiments_section(
        root / "analyses" / "results", (root / EXPERIMENTS_PAGE).parent, root
    )


RAY_OVERHEAD = "benchmarks/sections/ray-executor-overhead-on-one-machine.md"


def ray_overhead(root: Path) -> str:
    """The Ray executor's overhead as its benchmark summed it up (the paragraph on the ratios), with its date."""
    text = _read(root, RAY_OVERHEAD)
    stamp = (
        next(line for line in text.splitlines() if line.startswith("_")).strip("_").split(";")[0]
    )
    summary = next(p for p in text.split("\n\n") if p.startswith("Ray / local"))
    return (
        f"Measured by `benchmarks/ray_overhead.py` ({stamp}; its table is in `benchmarks/RESULTS.md`, "
        f'"Ray executor overhead on one machine"): {summary}'
    )


SCALING = "benchmarks/sections/scaling-the-cost-model-checked.md"


def scaling(root: Path) -> str:
    """The cost model's checks and predictions as benchmarks/scaling.py wrote them (its heading dropped)."""
    return _read(root, SCALING).split("\n", 1)[1].strip()


def scaling_predictions(root: Path) -> str:
    """The predictions table of benchmarks/scaling.py, with its date, for the scaling page."""
    text = _read(root, SCALING)
    stamp = (
        next(line for line in text.splitlines() if line.startswith("_")).strip("_").split(";")[0]
    )
    predictions = text.split("### Predictions", 1)[1].strip()
    return f"Predicted by `benchmarks/scaling.py` ({stamp}; the model and its checks: `benchmarks/SCALING.md`): {predictions}"


PRECISE = "benchmarks/sections/precise_run.md"
PRECISION_PAGE = "docs/concepts/precision.md"


def precise(root: Path) -> str:
    """How long ``--precise`` took on the default model, its per-metric precision table and what the
    cost model predicts on one GPU, as benchmarks/precise_run.py wrote them, with its date."""
    text = _read(root, PRECISE)
    stamp = (
        next(line for line in text.splitlines() if line.startswith("_")).strip("_").split(";")[0]
    )
    paragraphs = text.split("\n\n")
    run = next(p for p in paragraphs if p.startswith("`interp run"))
    per_metric = next(p for p in paragraphs if p.startswith("Per metric"))
    table = next(p for p in paragraphs if p.startswith("| metric"))
    cost = next(p for p in paragraphs if p.startswith("Cost model"))
    return (
        f"Measured by `benchmarks/precise_run.py` ({stamp}; also in `benchmarks/RESULTS.md`, "
        f'"precise_run"): {run}\n\n{per_metric}\n\n{table}\n\n{cost}'
    )


DOC_BLOCKS = (
    Block(
        GETTING_STARTED,
        "quickstart",
        f"{PACKAGED}/quickstart.md, written by analyses/packaged.py",
        quickstart,
    ),
    Block(
        RESULTS_PAGE,
        "results",
        f"{PACKAGED}/results.md, written by analyses/packaged.py, and {REFERENCE}",
        results,
    ),
    Block(
        EXPERIMENTS_PAGE,
        "experiments",
        "analyses/results/*.json (the experiments' write-up data)",
        experiments,
    ),
    Block(TROUBLESHOOTING_PAGE, "troubleshooting", "interp/troubleshooting.tsv", troubleshooting),
    Block(TABLES_PAGE, "columns", "interp/pipeline/tables.py and tables.tsv", columns),
    Block(CLI_PAGE, "cli", "the click commands of interp/cli/", cli_reference),
    Block(ARCHITECTURE_PAGE, "stages", "the stage registry, interp/pipeline/stages.py", stages),
    Block(ARCHITECTURE_PAGE, "module-map", "the docstrings of interp/**/*.py", module_map),
    Block(
        SCALING_PAGE,
        "ray-overhead",
        f"{RAY_OVERHEAD}, written by benchmarks/ray_overhead.py",
        ray_overhead,
    ),
    Block(
        SCALING_PAGE, "scaling", f"{SCALING}, written by benchmarks/scaling.py", scaling_predictions
    ),
    Block("README.md", "precise", f"{PRECISE}, written by benchmarks/precise_run.py", precise),
    Block(PRECISION_PAGE, "precise", f"{PRECISE}, written by benchmarks/precise_run.py", precise),
    Block(
        "benchmarks/SCALING.md", "scaling", f"{SCALING}, written by benchmarks/scaling.py", scaling
    ),
)


# --- RESULTS.md sections ------------------------------------------------------------------------


def sections(root: Path, document: str) -> list[Block]:
    """One block per file of the document's ``sections/`` folder."""
    folder = (root / document).parent / "sections"
    found = sorted(folder.glob("*.md")) if folder.is_dir() else []
    return [
        Block(
            document,
            p.stem,
            p.relative_to(root).as_posix(),
            lambda r, rel=p.relative_to(root).as_posix(): _read(r, rel),
        )
        for p in found
    ]


def blocks(root: Path = ROOT) -> list[Block]:
    return [*DOC_BLOCKS, *(b for document in RESULTS for b in sections(root, document))]


# --- assembling ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    document: str
    name: str
    problem: str
    fixable: bool = (
        False  # rewriting the document puts it right (stale or new); otherwise a person must act
    )

    def __str__(self) -> str:
        return f"{self.document}: generated:{self.name} {self.problem}"


def assemble(
    root: Path, document: str, chosen: list[Block], everything: bool
) -> tuple[str, list[Finding]]:
    """The document with the chosen blocks rendered, and what was stale or wrong in it."""
    path = root / document
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    findings = []
    marked = [m.group(1) for m in MARKED.finditer(text)]
    appendable = document in RESULTS
    for name in dict.fromkeys(n for n in marked if marked.count(n) > 1):
        findings.append(Finding(document, name, "appears more than once: keep one"))
    for block in chosen:
        try:
            new = block_text(block.name, block.render(root))
        except SourceMissing as missing:
            findings.append(Finding(document, block.name, f"has no source: {missing} is missing"))
            continue
        if block.name not in marked:
            if not appendable:
                findings.append(
                    Finding(
                        document,
                        block.name,
                        f"is missing: add `{begin(block.name)}` "
                        f"and `{end(block.name)}` where it belongs",
                    )
                )
                continue
            text = text.rstrip("\n") + "\n\n" + new + "\n"
            findings.append(
                Finding(document, block.name, f"is missing (source: {block.source})", fixable=True)
            )
            continue
        span = _span(text, block.name)
        old = text[span[0] : span[1]]
        if old != new:
            line = text.count("\n", 0, span[0]) + 1
            findings.append(
                Finding(
                    document,
                    block.name,
                    f"is stale: {_summary(old, new, line)} (source: {block.source})",
                    fixable=True,
                )
            )
            text = text[: span[0]] + new + text[span[1] :]
    if everything:
        known = {b.name for b in blocks(root) if b.document == document}
        for name in dict.fromkeys(marked):
            if name not in known:
                where = (
                    f"{Path(document).parent.as_posix()}/sections/{name}.md"
                    if appendable
                    else "a source in tools/docs.py"
                )
                findings.append(Finding(document, name, f"has no source: {where} is missing"))
    return text, findings


def _span(text: str, name: str) -> tuple[int, int]:
    m = re.search(re.escape(begin(name)) + r"\n.*?\n" + re.escape(end(name)), text, re.S)
    assert m is not None, name
    return m.span()


def _summary(old: str, new: str, line: int) -> str:
    """``+A -R lines, first at line N``: a one-line account of a block's diff."""
    a, b = old.splitlines(), new.splitlines()
    added = removed = 0
    first = None
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        first = i1 if first is None else first
        removed += i2 - i1
        added += j2 - j1
    return f"+{added} -{removed} lines, first at line {line + (first or 0)}"


def select(root: Path, only: list[str]) -> list[Block]:
    every = blocks(root)
    if not only:
        return every
    unknown = [o for o in only if not any(o in (b.name, b.document) for b in every)]
    if unknown:
        raise ValueError(
            f"no generated block or document named {', '.join(unknown)}; "
            f"blocks: {', '.join(b.name for b in every)}"
        )
    return [b for b in every if b.name in only or b.document in only]


def run(root: Path = ROOT, only: list[str] = (), write: bool = True) -> list[Finding]:
    """Render the chosen blocks (all when ``only`` is empty); write the documents unless
    ``write`` is false. Returns every block that was stale, missing or without a source."""
    chosen = select(root, list(only))
    findings = []
    for document in dict.fromkeys(b.document for b in chosen):
        text, found = assemble(
            root, document, [b for b in chosen if b.document == document], not only
        )
        findings += found
        if write and found and (root / document).is_file():
            (root / document).write_text(text, encoding="utf-8")
    return findings


def check(root: Path = ROOT, only: list[str] = ()) -> list[Finding]:
    """What ``--check`` reports; writes nothing."""
    return run(root, only, write=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tools/docs.py", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "only",
        nargs="*",
        metavar="NAME",
        help="only these blocks, or every block of these documents",
    )
    parser.add_argument(
        "--check", action="store_true", help="report stale blocks and exit 1; write nothing"
    )
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the checkout to work on (default: this one)"
    )
    args = parser.parse_args(argv)
    try:
        findings = run(args.root.resolve(), args.only, write=not args.check)
    except ValueError as exc:
        parser.error(str(exc))
    if args.check:
        for finding in findings:
            print(finding)
        if findings:
            print(
                f"{len(findings)} generated block(s) out of date: run python tools/docs.py",
                file=sys.stderr,
            )
        return 1 if findings else 0
    failed = [f for f in findings if not f.fixable]
    for finding in findings:
        print(
            f"rewrote {finding.document}: generated:{finding.name}" if finding.fixable else finding
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Every generated block of the documentation pages (docs/), benchmarks/RESULTS.md,
benchmarks/SCALING.md and analyses/RESULTS.md is what its source makes, and
``python tools/docs.py --check`` can tell when one is not.

The first test runs the check on this checkout. The others break a copy of the checkout the way
docs fall behind (a module added, a docstring line lost, a block edited by hand, a schema, a
catalogue line, a write-up or a measured section changed) and see the check fail, naming that
block and no other; then a plain run puts the copy right.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "docs.py"


def _load_generator():
    spec = importlib.util.spec_from_file_location("tools.docs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


docs = _load_generator()  # puts the checkout on sys.path
from tools.reference import docstring  # noqa: E402


def check_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--check", *args], cwd=cwd, capture_output=True, text=True
    )


def test_every_generated_block_is_current(tmp_path):
    done = check_cli(cwd=tmp_path)  # from anywhere: the script finds its checkout
    assert done.returncode == 0, (
        f"stale generated blocks; run python tools/docs.py\n{done.stdout}{done.stderr}"
    )


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A copy of what the generator reads and writes (the documents, their sources, interp/)."""
    copy = tmp_path / "checkout"
    shutil.copytree(ROOT / "docs", copy / "docs")
    for name in (
        "README.md",
        "benchmarks/RESULTS.md",
        "benchmarks/SCALING.md",
        "analyses/RESULTS.md",
    ):
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, copy / name)
    for folder in ("benchmarks/sections", "analyses/sections", "analyses/results/packaged"):
        shutil.copytree(ROOT / folder, copy / folder)
    for path in (ROOT / "analyses" / "results").glob("*.*"):
        shutil.copy(path, copy / "analyses" / "results" / path.name)
    shutil.copytree(
        ROOT / "interp",
        copy / "interp",
        ignore=lambda folder, names: [
            n for n in names if n == "__pycache__" or n.endswith((".csv", ".npz"))
        ],
    )
    docs.run(copy)  # whatever this checkout's state, the copy starts current
    assert [str(f) for f in docs.check(copy)] == []
    return copy


def stale_names(root: Path) -> list[str]:
    return [f.name for f in docs.check(root)]


def test_a_new_module_makes_the_module_map_stale(checkout):
    (checkout / "interp" / "collect" / "heads_seen.py").write_text(
        '"""Which heads a probe batch saw."""\n'
    )
    assert stale_names(checkout) == ["module-map"]
    done = check_cli("--root", str(checkout))
    assert done.returncode == 1
    assert done.stdout.startswith(
        "docs/architecture.md: generated:module-map is stale: +1 -0 lines"
    ), done.stdout
    assert docs.main(["--root", str(checkout)]) == 0
    assert (
        "| `interp/collect/heads_seen.py` | Which heads a probe batch saw. |"
        in (checkout / "docs" / "architecture.md").read_text()
    )
    assert stale_names(checkout) == []


def test_a_lost_docstring_line_makes_the_module_map_stale(checkout):
    module = checkout / "interp" / "collect" / "stage.py"
    text = module.read_text()
    first = text.split("\n")[0]
    assert first.startswith('"""') and len(first) > 10
    module.write_text('"""' + text.split("\n", 1)[1])  # the docstring's first line is gone
    assert stale_names(checkout) == ["module-map"]


def test_every_module_says_what_it_holds():
    rendered = docs.module_map(ROOT)
    assert "(no docstring)" not in rendered, (
        "every interp module says what it holds in its docstring"
    )
    for path in (ROOT / "interp").rglob("*.py"):
        if path.name not in {"__init__.py", "__main__.py"}:
            assert f"`{path.relative_to(ROOT).as_posix()}`" in rendered, path


def test_docstring_reads_the_first_paragraph(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text('"""One line\nthat wraps.\n\nDetails."""\nx = 1\n')
    assert docstring(mod) == "One line that wraps."


def test_a_block_edited_by_hand_is_stale(checkout):
    page = checkout / "docs" / "reference" / "tables.md"
    text = page.read_text()
    assert text.count("| `layer` | int | layer index, 0-based |") >= 3  # one per table with heads
    page.write_text(
        text.replace(
            "| `layer` | int | layer index, 0-based |", "| `layer` | float | layer index |", 1
        )
    )
    [finding] = docs.check(checkout)
    assert (finding.document, finding.name) == ("docs/reference/tables.md", "columns")
    assert "is stale: +1 -1 lines, first at line" in finding.problem
    assert page.read_text() != text, "--check writes nothing"
    docs.run(checkout)
    assert page.read_text() == text


def test_the_column_reference_is_every_column_of_every_table():
    from interp.pipeline.tables import TABLES

    rendered = docs.columns(ROOT)
    for table in TABLES.values():
        assert f"## `{table.name}`\n\n{table.doc}\n" in rendered
        for col in table.columns + table.pattern_columns:
            assert (
                f"| `{col.name}` | {col.dtype} | {col.doc.replace('|', chr(92) + '|')} |"
                in rendered
            )


def test_the_troubleshooting_block_follows_the_catalogue(checkout):
    tsv = checkout / "interp" / "troubleshooting.tsv"
    text = tsv.read_text()
    assert "The path does not exist." in text
    tsv.write_text(text.replace("The path does not exist.", "No file or folder has that path."))
    assert stale_names(checkout) == ["troubleshooting"]


def test_the_results_block_follows_the_shipped_classifier(checkout):
    model = checkout / "interp" / "classify" / "reference" / "model.json"
    data = json.loads(model.read_text())
    data["held_out"]["ece"] += 0.01
    model.write_text(json.dumps(data))
    assert stale_names(checkout) == ["results"]


def test_the_experiments_block_follows_the_write_ups_data(checkout):
    path = checkout / "analyses" / "results" / "one_head.json"
    data = json.loads(path.read_text())
    data["run_seconds"] += 600
    path.write_text(json.dumps(data))
    assert stale_names(checkout) == ["experiments"]
    path.unlink()
    docs.run(checkout)
    assert (
        "- `one_head`: not run yet (`python -m analyses.one_head`)"
        in (checkout / "docs" / "results" / "experiments.md").read_text()
    )


def test_a_measured_section_is_assembled_from_its_source(checkout):
    sections = checkout / "benchmarks" / "sections"
    run_time = sections / "run_time.md"
    run_time.write_text(run_time.read_text() + "\nOne more line.\n")
    assert stale_names(checkout) == ["run_time"]
    (sections / "new_bench.md").write_text(
        "## new_bench\n\n_written by `benchmarks/run_time.py`._\n\nSome numbers.\n"
    )
    findings = {f.name: f.problem for f in docs.check(checkout)}
    assert set(findings) == {"run_time", "new_bench"} and findings["new_bench"].startswith(
        "is missing"
    )
    assert docs.main(["--root", str(checkout)]) == 0
    results = (checkout / "benchmarks" / "RESULTS.md").read_text()
    assert results.endswith(
        "<!-- begin generated:new_bench -->\n\n## new_bench\n\n_written by `benchmarks/run_time.py`._"
        "\n\nSome numbers.\n\n<!-- end generated:new_bench -->\n"
    )
    assert stale_names(checkout) == []
    (sections / "new_bench.md").unlink()
    [finding] = docs.check(checkout)
    assert str(finding) == (
        "benchmarks/RESULTS.md: generated:new_bench has no source: "
        "benchmarks/sections/new_bench.md is missing"
    )


def test_a_block_without_its_markers_is_reported_not_guessed(checkout):
    page = checkout / "docs" / "getting-started.md"
    text = page.read_text()
    page.write_text(
        text.replace("<!-- begin generated:quickstart -->\n", "").replace(
            "<!-- end generated:quickstart -->\n", ""
        )
    )
    [finding] = docs.check(checkout)
    assert finding.name == "quickstart" and finding.problem.startswith(
        "is missing: add `<!-- begin generated:quickstart -->`"
    )
    assert docs.main(["--root", str(checkout)]) == 1


def test_only_the_named_blocks(checkout):
    (checkout / "interp" / "collect" / "heads_seen.py").write_text(
        '"""Which heads a probe batch saw."""\n'
    )
    assert check_cli("--root", str(checkout), "troubleshooting").returncode == 0
    assert check_cli("--root", str(checkout), "docs/architecture.md").returncode == 1
    unknown = check_cli("--root", str(checkout), "nothing-by-this-name")
    assert (
        unknown.returncode == 2
        and "no generated block or document named nothing-by-this-name" in unknown.stderr
    )


def test_an_experiment_records_the_data_its_readme_line_is_made_of(tmp_path):
    from analyses._common import Experiment, features_version
    from analyses.readme import claim_line
    from interp.collect.config import FEATURES_VERSION

    exp = Experiment(
        "one_head", quick=True, out=tmp_path, cache=None, processes=1, argv=["--quick"]
    )
    path = exp.write("Title", "A claim.", "An answer.", "0, 1", [("Setup", "How.")])
    data = json.loads(path.with_suffix(".json").read_text())
    assert data["features_version"] == FEATURES_VERSION == features_version(path)
    assert (data["title"], data["answer"], data["quick"]) == ("Title", "An answer.", True)
    text = path.read_text()
    assert (
        f"features version {FEATURES_VERSION}" in text and f"({data['run_seconds']:.0f} s)" in text
    )
    assert claim_line(data, "one_head.md") == (
        f"- **Title** ([write-up](one_head.md)) "
        f"({data['run_seconds'] / 60:.1f} min to run): An answer."
    )


def _imports(path: Path, names: dict[str, str]) -> set[str]:
    """The modules of ``names`` that a file imports anywhere in it (inside functions too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return {names[f] for f in found if f in names}


def test_the_writers_and_the_generator_import_in_one_direction():
    # analyses/ and benchmarks/ scripts also import their helpers by bare name (``from _runs import``)
    files = [*(ROOT / "analyses").glob("*.py"), *(ROOT / "benchmarks").glob("*.py"), SCRIPT]
    names = {}
    for path in files:
        dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        names[dotted] = names[path.stem] = dotted
    graph = {".".join(p.relative_to(ROOT).with_suffix("").parts): _imports(p, names) for p in files}
    assert "analyses.readme" in graph["tools.docs"] and "tools.docs" not in set().union(
        *graph.values()
    )

    def walk(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, f"import circle: {' -> '.join(path[path.index(node) :] + (node,))}"
        for nxt in graph[node]:
            walk(nxt, path + (node,))

    for module in graph:
        walk(module, ())


def test_a_benchmark_writes_its_source_and_the_generator_its_block(checkout):
    for name in (
        "tools/docs.py",
        "tools/reference.py",
        "benchmarks/_results.py",
        *(f"analyses/{p.name}" for p in (ROOT / "analyses").glob("*.py")),
    ):
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, checkout / name)
    write = (
        "import sys; sys.path.insert(0, 'benchmarks'); from _results import write_section; "
        "write_section('New bench (tiny, float32)', 'benchmarks/run_time.py', 'Took 1 s.')"
    )
    done = subprocess.run(
        [sys.executable, "-c", write], cwd=checkout, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    source = checkout / "benchmarks" / "sections" / "new-bench-tiny-float32.md"
    assert source.read_text().startswith("## New bench (tiny, float32)\n\n_")
    results = (checkout / "benchmarks" / "RESULTS.md").read_text()
    assert results.endswith(
        f"<!-- begin generated:new-bench-tiny-float32 -->\n\n{source.read_text().strip()}\n\n"
        "<!-- end generated:new-bench-tiny-float32 -->\n"
    )
    assert stale_names(checkout) == []

"""The places a new built-in stage touches: its package, one entry in the registry, and its
tables' rows in the schema. Every other place reads the registry, so none of them names a stage,
its config or its tables (the e2e contract test shows a new stage reaching each of them)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from interp.pipeline.stages import BUILT_IN, STAGES, declared
from interp.pipeline.tables import TABLES

ROOT = Path(__file__).resolve().parents[2]
# What adding a built-in stage takes, and nothing else.
PLACES = (
    "interp/<stage>/: config.py (its config), its entry point, STAGE = Stage(...) in __init__.py",
    "interp/pipeline/stages.py: one entry in BUILT_IN",
    "interp/pipeline/tables.tsv: its tables' rows",
)
# Places that once needed a hand edit per stage and now read the registry.
WIRING = (
    "interp/__init__.py",  # the exported configs
    "interp/cli/run.py",  # the options of `interp run`
    "interp/cli/stage.py",  # the stage commands
    "interp/pipeline/options.py",  # one config per stage
    "interp/pipeline/execute.py",  # the stage loop
    "interp/report/document.py",  # the report's sections and their order
    "tools/docs.py",  # the generated reference
)
BUILT_INS = [st for st in STAGES if st.entry.startswith("interp.")]


def strings(path: Path) -> set[str]:
    """The string constants of a module's code (docstrings aside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    }


def names(path: Path) -> set[str]:
    """The identifiers a module imports or uses."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= {a.name for a in node.names} | {getattr(node, "module", None) or ""}
    return found


@pytest.mark.parametrize("st", BUILT_INS, ids=lambda st: st.name)
def test_a_built_in_stage_is_declared_by_its_package_and_listed_once(st):
    package = f"interp.{st.name}"
    assert declared(package) is st
    lines = (ROOT / "interp" / "pipeline" / "stages.py").read_text(encoding="utf-8").splitlines()
    assert sum(f'"{package}"' in line for line in lines) == 1
    assert package in BUILT_IN
    schema = (ROOT / "interp" / "pipeline" / "tables.tsv").read_text(encoding="utf-8")
    for table in st.tables + st.optional_tables:
        assert table in TABLES and f"\n{table}\t\t\ttable\t" in schema


@pytest.mark.parametrize("st", BUILT_INS, ids=lambda st: st.name)
@pytest.mark.parametrize("place", WIRING)
def test_no_place_that_reads_the_registry_names_a_stage(st, place):
    path = ROOT / place
    named = strings(path) & {st.name, *st.tables, *st.optional_tables}
    where = f"a stage is added in {'; '.join(PLACES)}"
    assert not named, f"{place} names {sorted(named)}: read the registry instead ({where})"
    assert st.config.__name__ not in names(path), f"{place} names {st.config.__name__} ({where})"


def test_setuptools_finds_every_package_without_a_list():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert "[tool.setuptools.packages.find]" in pyproject and "\npackages = [" not in pyproject

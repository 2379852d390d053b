"""Every benchmark, analysis and tool script imports only names the package still has, and
imports as a script does.

These scripts run rarely (a benchmark when its figures are refreshed), so a module that moved
breaks them silently until someone needs the numbers. Each ``from interp... import NAME`` in
them is resolved here without running the script; an analysis that reaches benchmarks/' helpers
through ``_runs`` is imported as Python runs a script, with only its own folder on the path.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(
    p for folder in ("benchmarks", "analyses", "tools") for p in (ROOT / folder).glob("*.py")
)


def unresolved(path: Path) -> list[str]:
    """``module.name`` for every name a ``from interp...`` import in ``path`` cannot find."""
    missing = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and node.module.split(".")[0] == "interp"
        ):
            continue
        module = importlib.import_module(node.module)
        for alias in node.names:
            if alias.name == "*" or hasattr(module, alias.name):
                continue
            try:
                importlib.import_module(f"{node.module}.{alias.name}")
            except ModuleNotFoundError:
                missing.append(f"{node.module}.{alias.name}")
    return missing


def test_scripts_are_found():
    assert len(SCRIPTS) > 10


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_interp_import_resolves(path):
    assert unresolved(path) == []


def test_a_moved_name_is_caught(tmp_path):
    script = tmp_path / "old.py"
    script.write_text(
        "from interp.pipeline.rundir import RunTables\nfrom interp.model import bridge\n"
    )
    assert unresolved(script) == ["interp.pipeline.rundir.RunTables", "interp.model.bridge"]


# analyses that import _runs, which puts benchmarks/ on the path for the results helpers
PATH_SCRIPTS = sorted(
    p.stem
    for p in (ROOT / "analyses").glob("*.py")
    if "from _runs import" in p.read_text() or "import _runs" in p.read_text()
)


def test_the_path_scripts_are_found():
    assert "packaged" in PATH_SCRIPTS


@pytest.mark.parametrize("name", PATH_SCRIPTS)
def test_an_analysis_imports_with_only_its_own_folder_on_the_path(name):
    """Python puts a script's folder first on the path and nothing else of the checkout: an import
    of benchmarks/' helpers before _runs has put that folder on the path fails there, and not
    under pytest's wider path."""
    code = f"import sys; sys.path[0] = {str(ROOT / 'analyses')!r}; import {name}"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]

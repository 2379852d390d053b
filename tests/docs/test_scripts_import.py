"""Every benchmark, analysis and tool script imports only names the package still has.

These scripts run rarely (a benchmark when its figures are refreshed), so a module that moved
breaks them silently until someone needs the numbers. Each ``from interp... import NAME`` in
them is resolved here without running the script.
"""

from __future__ import annotations

import ast
import importlib
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

"""The error catalogue (interp.troubleshooting) is complete, and the documentation shows it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from interp import errors
from interp.troubleshooting import CATALOGUE, find

ROOT = Path(__file__).resolve().parents[2]
ERROR_TYPES = {
    name
    for name, obj in vars(errors).items()
    if isinstance(obj, type) and issubclass(obj, errors.InterpError)
}
HOLE = "\x00"  # stands for an interpolated value in a message sample


def _sample(node: ast.AST) -> str | None:
    """The message of a constructor call as a template, None when it is not spelled out."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else HOLE for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _sample(node.left), _sample(node.right)
        return None if left is None else left + (right if right is not None else HOLE)
    return None


def _calls(names: set[str] | None, attribute: str | None = None) -> list[tuple[str, str | None]]:
    """(file:line, message sample) of every call of the named error types (or of ``warnings.warn``)."""
    found = []
    for path in sorted((ROOT / "interp").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            hit = (names is not None and getattr(func, "id", None) in names) or (
                attribute is not None
                and isinstance(func, ast.Attribute)
                and func.attr == attribute
                and getattr(func.value, "id", None) == "warnings"
            )
            if hit:
                found.append(
                    (
                        f"{path.relative_to(ROOT)}:{node.lineno}",
                        _sample(node.args[0]) if node.args else None,
                    )
                )
    return found


ERROR_SITES = _calls(ERROR_TYPES)
WARNING_SITES = _calls(None, "warn")


def test_the_scan_finds_the_raise_sites():
    assert len(ERROR_SITES) > 80 and len(WARNING_SITES) >= 4


@pytest.mark.parametrize("where, message", ERROR_SITES)
def test_every_error_message_is_in_the_catalogue(where, message):
    assert message is not None, (
        f"{where}: spell the message out at the raise site, so the catalogue can be checked"
    )
    assert find(message), f"{where}: add this message to interp/troubleshooting.py: {message!r}"


@pytest.mark.parametrize("where, message", WARNING_SITES)
def test_every_warning_is_in_the_catalogue(where, message):
    assert message is not None, where
    assert find("warning: " + message), (
        f"{where}: add this warning to interp/troubleshooting.py: {message!r}"
    )


def test_no_catalogue_entry_is_stale():
    samples = [m for _, m in ERROR_SITES + WARNING_SITES if m]
    for trouble in CATALOGUE:
        if trouble.kind in ERROR_TYPES:
            assert any(trouble.matches(m) for m in samples), (
                f"no raise site says {trouble.message!r}"
            )


def test_the_documentation_shows_the_catalogue():
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "docs.py"), "--check", "troubleshooting"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"{done.stdout}regenerate it: python tools/docs.py"


def test_a_template_matches_what_it_describes_and_nothing_else():
    entry = find("/x/c.txt:3: bytes that are not UTF-8; re-save the file as UTF-8")
    assert entry is not None and entry.kind == "CorpusError"
    assert find("something nobody wrote") is None

"""A module of interp/ over 400 lines says at its top why it is one module."""

from __future__ import annotations

from pathlib import Path

LIMIT = 400
REASON = "# Over 400 lines:"
ROOT = Path(__file__).resolve().parents[2] / "interp"


def long_modules_without_a_reason(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > LIMIT and not (lines and lines[0].startswith(REASON)):
            found.append(f"{path.relative_to(root.parent)} ({len(lines)} lines)")
    return found


def test_every_long_module_gives_its_reason_at_the_top():
    missing = long_modules_without_a_reason(ROOT)
    assert not missing, (
        f"split these modules or give '{REASON} <why>' as their first line: {missing}"
    )


def test_the_check_sees_a_long_module_without_a_reason(tmp_path):
    pkg = tmp_path / "interp"
    pkg.mkdir()
    (pkg / "short.py").write_text("x = 1\n" * LIMIT)
    (pkg / "long.py").write_text("x = 1\n" * (LIMIT + 1))
    (pkg / "justified.py").write_text(f"{REASON} one concern.\n" + "x = 1\n" * LIMIT)
    assert long_modules_without_a_reason(pkg) == ["interp/long.py (401 lines)"]

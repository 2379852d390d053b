"""The README documents every table column and every CLI command (kept true by this test)."""

from __future__ import annotations

from pathlib import Path

from interp.cli import main
from interp.pipeline.tables import TABLES

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_every_column_is_documented():
    for table in TABLES.values():
        for column in table.columns + table.pattern_columns:
            assert f"`{column.name}`" in README, (table.name, column.name)


def test_every_command_is_documented():
    for name in main.commands:
        assert f"`interp {name}" in README, name

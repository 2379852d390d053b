"""The example of docs/how-to/own-model.md ("A tiny model to try it on"), run as written: its
Python blocks in order, and each `interp` line of its shell block through the CLI, in a fresh
working directory."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import torch
from click.testing import CliRunner

from interp.cli import main

PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "own-model.md"


def section(title: str) -> str:
    """The text of a page's ``## title`` section (to the next heading or the end)."""
    text = PAGE.read_text(encoding="utf-8") + "\n## "
    start = text.index(f"\n## {title}\n")
    return text[start : text.index("\n## ", start + 1)]


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block, in order."""
    return re.findall(r"```(\w+)\n(.*?)```", text, flags=re.S)


def test_the_own_model_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        found = blocks(section("A tiny model to try it on"))
        assert [language for language, _ in found] == ["python", "bash", "python"]
        for language, code in found:
            if language == "python":
                exec(compile(code, str(PAGE), "exec"), {"__name__": "docs_example"})
                continue
            for line in code.strip().splitlines():
                args = shlex.split(line)
                assert args[0] == "interp"
                result = CliRunner().invoke(main, args[1:])
                assert result.exit_code == 0, (line, result.output)
    finally:
        torch.set_num_threads(old)
    assert (tmp_path / "reports" / "tiny-qwen2" / "mine" / "effects.parquet").exists()
    assert "layer" in capsys.readouterr().out  # the Python example printed its effects

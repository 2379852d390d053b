"""The README's "Bring your own model" example, run as written: its Python blocks in order, and
each `interp` line of its shell block through the CLI, in a fresh working directory."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import torch
from click.testing import CliRunner

from interp.cli import main

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    return README[start : README.index("\n## ", start + 1)]


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block, in order."""
    return re.findall(r"```(\w+)\n(.*?)```", text, flags=re.S)


def test_the_bring_your_own_model_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        found = blocks(section("Bring your own model"))
        assert [language for language, _ in found] == ["python", "bash", "python"]
        for language, code in found:
            if language == "python":
                exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
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

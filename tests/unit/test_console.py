"""How a command meets the user (interp.console): one-line errors, bugs with a traceback file,
warnings once each, signals as exit codes."""

from __future__ import annotations

import os
import signal
import warnings
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from interp.console import friendly
from interp.errors import ConfigError, CorpusError, InterpWarning


def command(body):
    @click.command()
    @friendly
    def cmd():
        body()

    return cmd


def run(body):
    return CliRunner().invoke(command(body), [], catch_exceptions=False)


def test_a_toolkit_error_is_one_line_and_exit_1():
    def body():
        raise CorpusError("x.txt:3: bytes that are not UTF-8; re-save the file as UTF-8")

    result = run(body)
    assert (
        result.exit_code == 1
        and result.stderr == "error: x.txt:3: bytes that are not UTF-8; re-save the file as UTF-8\n"
    )


def test_a_config_error_is_a_user_error_but_a_plain_value_error_is_a_bug():
    def user():
        raise ConfigError("n_syntax must be >= 0, got -1 (option --n-syntax)")

    assert run(user).exit_code == 1

    def bug():
        raise ValueError("an internal invariant broke\nwith a second line")

    result = run(bug)
    assert result.exit_code == 70
    line = result.stderr.strip()
    assert "\n" not in line and line.startswith(
        "error: internal error (ValueError: an internal invariant broke)"
    )
    report = Path(line.split("the full traceback is in ")[1])
    text = report.read_text()
    assert "Traceback (most recent call last)" in text and "an internal invariant broke" in text
    report.unlink()


def test_a_reader_that_leaves_early_ends_the_command_quietly(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))  # where a crash report would go

    def body():
        raise BrokenPipeError(32, "Broken pipe")

    result = run(body)
    assert result.exit_code == 141 and result.stderr == "" and not list(tmp_path.iterdir())


def test_the_toolkits_warnings_show_once_each_and_noisy_ones_do_not():
    def body():
        for _ in range(3):
            warnings.warn(
                "12 probe(s) longer than 512 tokens were truncated", InterpWarning, stacklevel=1
            )
        warnings.warn(
            "some library wants you to know", FutureWarning, stacklevel=1
        )  # attributed to this test module
        warnings.warn_explicit("noise", FutureWarning, "x.py", 1, module="transformers.utils")

    result = run(body)
    lines = result.stderr.strip().splitlines()
    assert lines.count("warning: 12 probe(s) longer than 512 tokens were truncated") == 1
    assert "noise" not in result.stderr
    assert result.exit_code == 0


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_ends_the_command_with_its_exit_code(sig, code):
    def body():
        os.kill(os.getpid(), sig)
        for _ in range(1000):  # the handler runs between bytecodes
            pass
        raise AssertionError("the signal did not interrupt")

    result = run(body)
    assert result.exit_code == code
    assert result.stderr.startswith(
        f"interrupted ({signal.Signals(sig).name}): finished stages are kept"
    )
    assert signal.getsignal(signal.SIGTERM) is not None  # handlers restored

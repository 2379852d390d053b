"""How a command meets the user (interp.console): one-line errors, bugs with a traceback file,
warnings once each, signals as exit codes."""

from __future__ import annotations

import signal
import time
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


@pytest.fixture
def as_from_a_shell():
    """SIGINT and SIGTERM as an interactive shell leaves them, whatever the test process inherited:
    a process started in the background of a non-interactive shell has SIGINT ignored, and an
    ignored signal stays ignored (the test below)."""
    given = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for s, handler in given.items():
        signal.signal(s, handler)


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_ends_the_command_with_its_exit_code(sig, code, as_from_a_shell):
    def body():
        signal.raise_signal(sig)  # to this thread: its handler runs at the next bytecode
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            time.sleep(0.01)
        raise AssertionError("the signal did not interrupt")

    result = run(body)
    assert result.exit_code == code
    assert result.stderr.startswith(
        f"interrupted ({signal.Signals(sig).name}): finished stages are kept"
    )
    assert signal.getsignal(signal.SIGTERM) is not None  # handlers restored


def test_a_signal_the_parent_ignored_stays_ignored(as_from_a_shell):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as nohup or a background job leaves it

    def body():
        signal.raise_signal(signal.SIGINT)
        time.sleep(0.05)

    result = run(body)
    assert result.exit_code == 0 and result.stderr == ""
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN

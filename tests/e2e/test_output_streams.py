"""Output that cannot be written, and signals: a full disk behind stdout or stderr, a reader that
went away, a closed stream, SIGPIPE and SIGHUP never lose a finished stage, and say so in one line."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from cli_cases import LONG_COLLECT, SMALL, finished, interp_process, one_line


@pytest.mark.timeout(300)
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_full_output_stream_never_loses_the_run(tmp_path, llama_dir, stream):
    out = tmp_path / "runs"
    with open("/dev/full", "w") as full:
        quiet = (
            ["-q"] if stream == "stdout" else []
        )  # a full stderr: progress bars too are lost, and must not stop it
        proc = interp_process(
            "run",
            "--model",
            str(llama_dir),
            *SMALL,
            *quiet,
            "--out",
            str(out),
            "--name",
            "r",
            **{stream: full},
        )
        stdout, stderr = proc.communicate(timeout=240)
    run = out / llama_dir.name / "r"
    assert "collect" in finished(run) and (run / "features.parquet").exists()
    if stream == "stdout":  # the run is complete; its last line could not be printed
        assert proc.returncode == 1
        assert "cannot write to standard output" in one_line(stderr)
    else:  # nothing could be said, and nothing needed to be
        assert proc.returncode == 0 and stdout.decode().startswith("run: ")


@pytest.mark.timeout(300)
def test_a_closed_pipe_never_loses_the_run_and_resume_restores_its_csv(tmp_path, llama_dir):
    out = tmp_path / "runs"
    proc = interp_process(
        "run", "--model", str(llama_dir), *SMALL, "--out", str(out), "--name", "r"
    )
    proc.stdout.close()  # the reader is gone before the run prints a word (`interp run ... | head -c 0`)
    _, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 141 and "Traceback" not in stderr.decode()
    run = out / llama_dir.name / "r"
    assert "collect" in finished(run)
    csv = (run / "features.csv").read_bytes()
    (run / "features.csv").unlink()
    resumed = interp_process(
        "run", "--model", str(llama_dir), *SMALL, "-q", "--out", str(out), "--name", "r", "--resume"
    )
    assert resumed.wait(timeout=240) == 0
    assert (run / "features.csv").read_bytes() == csv


@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig, code", [(signal.SIGHUP, 129), (signal.SIGPIPE, 141)])
def test_a_signal_in_the_first_stage_leaves_nothing_and_says_so(tmp_path, llama_dir, sig, code):
    """SIGHUP (a closed terminal) and SIGPIPE (a reader that went away, or `kill -PIPE`: Python
    ignores it from its start, and the command used to run on) stop the run like SIGINT."""
    out = tmp_path / "runs"
    proc = interp_process(
        "run",
        "--model",
        str(llama_dir),
        "--skip",
        "weights",
        "--skip",
        "classify",
        "--skip",
        "ablate",
        "--skip",
        "report",
        *LONG_COLLECT,
        "--out",
        str(out),
        "--name",
        "h",
    )
    os.set_blocking(proc.stderr.fileno(), False)
    seen, deadline = b"", time.monotonic() + 200
    while b"collect" not in seen:
        assert proc.poll() is None and time.monotonic() < deadline, seen.decode()
        time.sleep(0.05)
        seen += proc.stderr.read() or b""
    proc.send_signal(sig)
    os.set_blocking(proc.stderr.fileno(), True)
    seen += proc.stderr.read()
    assert proc.wait(timeout=120) == code
    last = seen.decode().replace("\r", "\n").strip().splitlines()[-1]
    name = signal.Signals(sig).name
    assert (
        last == f"interrupted ({name}) before any stage finished: no run was kept; start it again"
    )
    assert not out.exists()  # no manifest-only folder that would block the name


@pytest.mark.timeout(300)
def test_a_closed_stdout_never_blames_the_model(tmp_path, llama_dir):
    """`interp run ... >&-` and `interp show ... >&-`: Python's sys.stdout is None; the work is
    done and kept, and the one line says stdout is closed (it used to say the model's weights
    could not be read, from an AttributeError on None.flush)."""
    out = tmp_path / "runs"
    closed = {"stdout": subprocess.DEVNULL, "preexec_fn": lambda: os.close(1)}
    run = interp_process(
        "run", "--model", str(llama_dir), *SMALL, "-q", "--out", str(out), "--name", "r", **closed
    )
    _, stderr = run.communicate(timeout=240)
    line = one_line(stderr)
    assert run.returncode == 1 and "standard output (it is closed)" in line, line
    run_dir = out / llama_dir.name / "r"
    assert "collect" in finished(run_dir)
    show = interp_process(
        "show", str(run_dir), "--prompt", "the cat sat .", "--heads", "0.1", "-q", **closed
    )
    _, stderr = show.communicate(timeout=240)
    line = one_line(stderr)
    assert show.returncode == 1 and "standard output (it is closed)" in line, line
    assert (run_dir / "prompts.npz").is_file()

"""Two processes on one run, and a model file that changed under its cached name: never a merged
run, never the wrong model."""

from __future__ import annotations

import hashlib
import json
import os
import time

import pytest
from cli_cases import LONG_COLLECT, SMALL, interp_process, one_line, snapshot, write
from click.testing import CliRunner

from interp.cli import main


@pytest.mark.timeout(300)
def test_two_runs_on_one_name_never_merge(tmp_path, llama_dir):
    out = tmp_path / "runs"
    # the first collects long enough for the second to start while it holds the run
    first = interp_process(
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
        "-q",
        "--out",
        str(out),
        "--name",
        "same",
    )
    lock = out / llama_dir.name / "same" / ".interp.lock"
    deadline = time.monotonic() + 120
    while not (lock.exists() and lock.stat().st_size):  # the first holds the run
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.05)
    other = write(tmp_path / "other.txt", "another corpus entirely\n")
    second = interp_process(
        "run",
        "--model",
        str(llama_dir),
        *SMALL,
        "-q",
        "--out",
        str(out),
        "--name",
        "same",
        "--corpus",
        str(other),
    )
    _, err = second.communicate(timeout=120)
    assert second.returncode == 1
    line = one_line(err)
    assert "is in use by another interp process" in line and f"pid {first.pid} on " in line
    _, err = first.communicate(timeout=240)
    assert first.returncode == 0, err.decode()[-2000:]
    manifest = json.loads((out / llama_dir.name / "same" / "manifest.json").read_text())
    assert "collect" in manifest["stages"] and str(other) not in json.dumps(
        manifest
    )  # the first run's, whole
    assert not lock.exists()
    resumed = interp_process(
        "run",
        "--model",
        str(llama_dir),
        *SMALL,
        "-q",
        "--out",
        str(out),
        "--name",
        "same",
        "--resume",
    )
    assert resumed.wait(timeout=240) == 0  # a lock left by a finished run never blocks it


@pytest.mark.timeout(300)
def test_a_gguf_of_other_content_under_the_same_name_size_and_time_is_not_the_cached_model(
    tmp_path, monkeypatch
):
    from interp.model.tiny import write_tiny_gguf

    home, cwd = tmp_path / "home", tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv(
        "INTERP_CACHE", ""
    )  # empty: the default folder under HOME, never the current one
    monkeypatch.chdir(cwd)
    path = write_tiny_gguf(tmp_path / "tiny.gguf", "llama", n_kv_heads=2)
    args = ["run", "--model", str(path), *SMALL, "-q", "--out", str(tmp_path / "runs")]
    result = CliRunner().invoke(main, [*args, "--name", "real"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    [cached] = (home / ".cache" / "interp" / "gguf").iterdir()
    assert (
        json.loads((cached / "source.json").read_text())["sha256"]
        == hashlib.sha256(path.read_bytes()).hexdigest()
    )
    assert not any(cwd.iterdir())
    st = path.stat()
    path.write_bytes(bytes(st.st_size))  # zeros, same name and size ...
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # ... and the same modification time
    before = snapshot(tmp_path)
    result = CliRunner().invoke(main, [*args, "--name", "zeros"], catch_exceptions=False)
    assert result.exit_code == 1
    assert "cannot read GGUF file" in one_line(result.stderr)
    assert snapshot(tmp_path) == before  # no run of the cached model under the zero file's name

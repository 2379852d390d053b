"""Signals, resume and reproduction on the packaged encoder, as a scheduler would treat a run.

One uninterrupted run is the reference. Runs interrupted by SIGINT or SIGTERM must exit 130 or
143 with one line, keep their finished stages and leave no half-written file; runs killed by
SIGKILL (no clean-up at all) and then resumed, and a run made again from the reference's
manifest, must give tables identical to the reference, to the last bit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TABLES = ("features", "roles", "effects", "pruning")
# Small enough to take seconds, large enough that a signal lands inside the stage.
OPTIONS = ["--model", "minilm-l6", "--n-syntax", "60", "--max-sentences", "40", "--skip", "report"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def interp(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(
        [sys.executable, "-m", "interp", *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=600,
        preexec_fn=default_signals,
    )
    if check:
        assert out.returncode == 0, out.stderr[-2000:]
    return out


def default_signals() -> None:
    """In the child, before it runs: the signals a user sends get their default handling, whatever
    the test runner inherited (a suite started in the background, `make test &`, ignores SIGINT,
    and its children would too)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)


def start(out: Path, name: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "interp",
            "run",
            *OPTIONS,
            "--out",
            str(out),
            "--name",
            name,
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
        preexec_fn=default_signals,
    )


def signal_when(proc: subprocess.Popen, marker: str, sig: int) -> tuple[int, str]:
    """Send ``sig`` once ``marker`` (a progress bar's label) shows on stderr; return (exit code, stderr)."""
    os.set_blocking(proc.stderr.fileno(), False)
    seen, deadline = b"", time.monotonic() + 300
    while marker.encode() not in seen:
        assert proc.poll() is None, f"the run ended before {marker!r}: {seen.decode()[-2000:]}"
        assert time.monotonic() < deadline
        time.sleep(0.05)
        seen += proc.stderr.read() or b""
    proc.send_signal(sig)
    os.set_blocking(proc.stderr.fileno(), True)
    rest = proc.stderr.read()
    return proc.wait(timeout=120), (seen + rest).decode()


def tables(run_dir: Path) -> dict[str, pd.DataFrame]:
    return {t: pd.read_parquet(run_dir / f"{t}.parquet") for t in TABLES}


def assert_identical(run_dir: Path, reference: dict[str, pd.DataFrame]) -> None:
    for name, frame in tables(run_dir).items():
        pd.testing.assert_frame_equal(frame, reference[name], check_exact=True, obj=name)


def stages(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())["stages"]


def no_temporaries(root: Path) -> None:
    assert not [p for p in root.rglob("*") if p.name.endswith(".tmp")]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, dict[str, pd.DataFrame]]:
    out = tmp_path_factory.mktemp("reference")
    interp("run", *OPTIONS, "--out", str(out), "--name", "ref", "-q")
    run_dir = out / "minilm-l6" / "ref"
    return run_dir, tables(run_dir)


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_collect_leaves_nothing(tmp_path, sig, code):
    code_seen, stderr = signal_when(start(tmp_path, "x"), "collect:", sig)
    assert code_seen == code, stderr[-2000:]
    last = stderr.strip().splitlines()[-1].split("\r")[-1]
    assert (
        last.startswith(f"interrupted ({signal.Signals(sig).name})") and "Traceback" not in stderr
    )
    assert not any(tmp_path.iterdir()), "nothing had finished: no run folder, no model folder"


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_ablate_keeps_finished_stages_and_resume_completes(
    tmp_path, reference, sig, code
):
    code_seen, stderr = signal_when(start(tmp_path, "x"), "ablate:", sig)
    assert code_seen == code and "Traceback" not in stderr, stderr[-2000:]
    run_dir = tmp_path / "minilm-l6" / "x"
    assert set(stages(run_dir)) == {"collect", "weights"}  # classify runs after ablate
    assert not (run_dir / "effects.parquet").exists()
    no_temporaries(tmp_path)
    interp("run", *OPTIONS, "--out", str(tmp_path), "--name", "x", "--resume", "-q")
    assert set(stages(run_dir)) == {"collect", "weights", "classify", "ablate"}
    assert_identical(run_dir, reference[1])


@pytest.mark.parametrize("marker", ["collect:", "ablate: exact"])
def test_sigkill_then_resume_gives_the_same_tables(tmp_path, reference, marker):
    code, _ = signal_when(start(tmp_path, "k"), marker, signal.SIGKILL)
    assert code == -signal.SIGKILL
    interp("run", *OPTIONS, "--out", str(tmp_path), "--name", "k", "--resume", "-q")
    run_dir = tmp_path / "minilm-l6" / "k"
    assert_identical(run_dir, reference[1])
    no_temporaries(tmp_path)


def test_from_manifest_reproduces_the_run(tmp_path, reference):
    run_dir, expected = reference
    out = interp(
        "run", "--from-manifest", str(run_dir), "--out", str(tmp_path), "--name", "again", "-q"
    )
    again = tmp_path / "minilm-l6" / "again"
    assert str(again) in out.stdout
    assert_identical(again, expected)
    a, b = (json.loads((d / "manifest.json").read_text()) for d in (run_dir, again))
    assert a["provenance"]["model_hash"] == b["provenance"]["model_hash"] is not None
    # the replay pins the thread count the run recorded (the last digits depend on it); every
    # other option is the run's own
    before, after = dict(a["options"]["stages"]["collect"]), dict(b["options"]["stages"]["collect"])
    assert after.pop("threads") == a["stages"]["collect"]["threads"] >= 1
    before.pop("threads")
    assert before == after


def test_the_manifest_records_what_reproduces_the_run(reference):
    manifest = json.loads((reference[0] / "manifest.json").read_text())
    prov = manifest["provenance"]
    assert prov["seed"] == 0 and len(prov["model_hash"]) == 64 and len(prov["data_hash"]) == 64
    assert prov["versions"]["torch"] and prov["versions"]["transformers"] and prov["python"]
    assert manifest["options"]["stages"]["collect"]["n_syntax"] == 60 and manifest["format"] == 2
    assert all(
        s["inputs"]["model"] == prov["model_hash"]
        for n, s in manifest["stages"].items()
        if n in ("collect", "ablate")
    )

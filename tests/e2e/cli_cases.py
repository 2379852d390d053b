"""What the command-line tests of bad input share: running a command and checking that it ended
in one catalogued line with nothing on disk changed, and running one as a process of its own."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from interp.cli import main
from interp.troubleshooting import find


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with its kind and (for regular files) a content hash."""
    seen = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            seen[rel] = "link:" + os.readlink(path)
        elif path.is_dir():
            seen[rel] = "dir"
        elif path.is_file() and path.stat().st_size < 10**7:
            seen[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            seen[rel] = f"special:{path.stat().st_size}"
    return seen


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


def check(tmp: Path, args: list[str]) -> str:
    before = snapshot(tmp)
    start = time.perf_counter()
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    elapsed = time.perf_counter() - start
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1, (result.exit_code, result.output)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    assert find(lines[0]) is not None, f"not in the error catalogue: {lines[0]}"
    assert snapshot(tmp) == before, "the command changed files"
    assert elapsed < 60
    return lines[0]


ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
SMALL = [
    "--skip",
    "weights",
    "--skip",
    "classify",
    "--skip",
    "ablate",
    "--skip",
    "report",
    "--n-syntax",
    "5",
    "--n-repeated",
    "4",
    "--max-sentences",
    "10",
    "--n-bootstrap",
    "10",
]
# A collection that lasts seconds on the tiny Llama (about 9 s on 2 cores; 400 syntax sentences took
# under one, and a busy machine's signal or second process could arrive after it had finished)
LONG_COLLECT = ["--n-syntax", "4000", "--n-repeated", "2000"]


SENT = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # what the tests send to a run


def _default_signals() -> None:
    for s in SENT:
        signal.signal(s, signal.SIG_DFL)


def interp_process(*args: str, **popen) -> subprocess.Popen:
    """``python -m interp ARGS`` as a process of its own (default signal handling). A test run
    under ``nohup`` or started as a background job inherits SIGHUP or SIGINT ignored, which a
    run keeps ignored by design (interp.console): the child starts with them at their default,
    as from a terminal."""
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    also = popen.pop("preexec_fn", None)

    def before_exec() -> None:
        _default_signals()
        if also is not None:
            also()

    return subprocess.Popen(
        [sys.executable, "-m", "interp", *args],
        env=ENV,
        restore_signals=True,
        preexec_fn=before_exec,
        **popen,
    )


def finished(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())["stages"]


PHASE = re.compile(r"(collect|ablate): .+ done in \d+ s")


def one_line(stderr: bytes | str) -> str:
    """The one line a command ended with (beside the lines of the phases it finished, which -q
    prints instead of progress bars)."""
    text = stderr.decode() if isinstance(stderr, bytes) else stderr
    lines = [line for line in text.splitlines() if line.strip() and not PHASE.fullmatch(line)]
    assert len(lines) == 1 and "Traceback" not in text, text
    assert find(lines[0]) is not None, f"not in the error catalogue: {lines[0]}"
    return lines[0]

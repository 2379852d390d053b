"""A Ray cluster that does not answer at --address ends the command in one line naming the
address, before the model loads and well within 30 s (Ray itself retries for minutes)."""

from __future__ import annotations

import http.server
import socket
import threading
import time

import pytest
from click.testing import CliRunner

from interp.cli import main
from interp.executors import ray_workers
from interp.model.tiny import build_tiny

pytest.importorskip("ray")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny("llama", tmp_path_factory.mktemp("models") / "tiny-llama")


@pytest.fixture
def not_ray():
    """An HTTP server: something answers at the port, and it is no Ray cluster."""
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def refused(model_dir, tmp_path, *args) -> tuple[str, float]:
    start = time.monotonic()
    result = CliRunner().invoke(
        main,
        ["run", "--model", str(model_dir), "--out", str(tmp_path), "--executor", "ray", *args],
    )
    seconds = time.monotonic() - start
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.stderr
    assert not list(tmp_path.iterdir())  # nothing ran, no run folder
    return lines[0], seconds


def test_a_closed_port_is_refused_at_once(model_dir, tmp_path):
    address = f"127.0.0.1:{free_port()}"
    line, seconds = refused(model_dir, tmp_path, "--address", address)
    assert line.startswith(f"error: cannot reach the Ray cluster at {address}") and seconds < 30


def test_a_port_where_no_ray_answers_is_refused_at_the_timeout(
    model_dir, tmp_path, not_ray, monkeypatch
):
    monkeypatch.setattr(ray_workers, "CONNECT_TIMEOUT_S", 5.0)
    line, seconds = refused(model_dir, tmp_path, "--address", not_ray)
    assert line.startswith(f"error: cannot reach the Ray cluster at {not_ray}")
    assert "no Ray cluster answered within 5 s" in line and seconds < 30

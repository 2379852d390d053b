"""benchmarks/gpu_check.py: the collect stage's FLOP count by the cost model (benchmarks/SCALING.md),
checked by hand on a made-up architecture, and the machine without a GPU, where it says so in one
line, exits 0 and writes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_check  # noqa: E402
from scaling import Arch  # noqa: E402

# 2 layers, 2 query heads, 1 key/value head, d_model 4, d_head 2, d_mlp 8, plain (not gated) MLP.
ARCH = Arch("made-up", 2, 2, 1, 4, 2, 8, 10, gated=False)


def test_collect_flops_are_tokens_times_layers_times_the_block():
    # block(w) = 2 * (4*2*(2*2 + 2*1) + 2*4*8) + 4*2*2*w = 2 * (48 + 64) + 16 w = 224 + 16 w
    corpora = {"a": {"n_tokens": 12, "n_sequences": 3}, "b": {"n_tokens": 10, "n_sequences": 5}}
    expected = 12 * 2 * (224 + 16 * 4) + 10 * 2 * (224 + 16 * 2)
    assert gpu_check.collect_flops(ARCH, corpora) == expected == 12032


def test_the_collect_prediction_sets_the_count_at_the_rate_beside_the_measured_seconds():
    corpora = {"a": {"n_tokens": 12, "n_sequences": 3}}
    run = SimpleNamespace(manifest={"corpora": corpora, "stages": {"collect": {"seconds": 3.0}}})
    row = gpu_check.collect_prediction(ARCH, run, tflops=1e-9)  # 1000 FLOP/s
    assert row["collect GFLOP"] == pytest.approx(6912 / 1e9)
    assert row["collect predicted s"] == pytest.approx(6.912)
    assert row["collect measured / predicted"] == pytest.approx(3.0 / 6.912)


def test_without_a_gpu_it_says_so_in_one_line_and_writes_nothing():
    sections = ROOT / "benchmarks" / "sections"
    before = {p: p.stat().st_mtime_ns for p in sections.iterdir()}
    results = (ROOT / "benchmarks" / "RESULTS.md").read_bytes()
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_check.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "gpu_check: no CUDA GPU here; nothing measured (run it on a machine with one)"
    ]
    assert {p: p.stat().st_mtime_ns for p in sections.iterdir()} == before
    assert (ROOT / "benchmarks" / "RESULTS.md").read_bytes() == results

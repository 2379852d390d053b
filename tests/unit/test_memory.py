"""The memory estimate (interp.model.memory) against measured peaks, and the batch it chooses.

The measurement (tests/unit/memory_probe.py) runs the real collect or ablate stage in a fresh
process after one warm-up pass (which pages the weights in), with glibc's mmap threshold fixed
so that the resident size follows the live tensors: the estimate counts tensors; the
allocator's slack on top is what ``memory.HEADROOM`` leaves room for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from interp.errors import MemoryBudgetError
from interp.model import memory

ROOT = Path(__file__).resolve().parents[2]


def measure(stage: str, model: str, **config) -> tuple[float, float]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
        "MALLOC_MMAP_THRESHOLD_": "65536",
    }
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests" / "unit" / "memory_probe.py"),
            stage,
            model,
            json.dumps(config),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    return found["estimate"], found["measured"]


@pytest.mark.skipif(
    not Path("/proc/self/clear_refs").exists(), reason="needs Linux' resettable peak RSS"
)
@pytest.mark.parametrize(
    "stage, model, config",
    [
        ("collect", "tiny-llama", {"n_syntax": 100, "max_sentences": 60}),
        ("collect", "minilm-l6", {"n_syntax": 100, "max_sentences": 60}),
        ("ablate", "tiny-llama", {}),
        ("ablate", "minilm-l6", {}),
    ],
)
def test_the_estimate_is_within_30_percent_of_the_measured_peak(stage, model, config):
    estimate, measured = measure(stage, model, **config)
    assert 0.7 * measured <= estimate <= 1.3 * measured, (estimate / 2**20, measured / 2**20)


SHAPE = memory.Shape(
    n_layers=30, n_heads=9, d_model=576, d_mlp=1536, d_vocab=49152, causal=True, gated_mlp=True
)


def batches(lengths):
    def group(budget):
        out, current = [], []
        for n in sorted(lengths):
            if current and n * (len(current) + 1) > budget:
                out.append((len(current), current[-1]))
                current = []
            current.append(n)
        return out + ([(len(current), current[-1])] if current else [])

    return group


def test_a_batch_peak_is_its_attention_or_its_mlp_phase():
    # 4 x 512 tokens: 8.6 [4, 9, 512, 512] float32 patterns beside 6.4 [2048, 576] residuals
    assert memory.collect_batch_peak(SHAPE, 4, 512) == pytest.approx(
        8.6 * 4 * 9 * 512**2 * 4 + 6.4 * 2048 * 576 * 4
    )
    # 512 x 4 tokens: attention is tiny, the gated MLP's 3.9 [2048, 1536 + 576] tensors dominate
    assert memory.collect_batch_peak(SHAPE, 512, 4) == pytest.approx(3.9 * 2048 * (1536 + 576) * 4)


def test_the_configured_batch_is_kept_when_it_fits():
    lengths = [64] * 200
    assert (
        memory.collect_budget(SHAPE, lengths, 4096, 30, 200, batches(lengths), available=2**40)
        == 4096
    )


def test_an_unconfigured_batch_grows_to_fill_the_memory_and_stops_at_one_batch():
    lengths = [64] * 200  # 12,800 tokens: one batch from a budget of 16,384 on
    group = batches(lengths)
    # plenty of memory: doubled until one batch holds every probe, no further
    assert (
        memory.collect_budget(SHAPE, lengths, 4096, 30, 200, group, available=2**40, grow=True)
        == 16384
    )
    # memory for batches of 8192 tokens but not 16384: stops there
    room = memory.collect_peak(SHAPE, group(8192), 30, 200)
    assert memory.collect_peak(SHAPE, group(16384), 30, 200) > room
    chosen = memory.collect_budget(
        SHAPE, lengths, 4096, 30, 200, group, available=room / memory.HEADROOM, grow=True
    )
    assert chosen == 8192
    # without grow (a configured budget, or a CPU) the budget is kept
    assert memory.collect_budget(SHAPE, lengths, 4096, 30, 200, group, available=2**40) == 4096


def test_an_unconfigured_ablate_pass_grows_the_same_way():
    def shapes(budget):  # (sequences, width, scored rows, replicas): 9 heads stacked while they fit
        return [
            (n, 32, 31 * n, min(9, max(1, budget // (32 * n))))
            for n, _ in batches([32] * 64)(budget)
        ]

    # all 9 heads of a layer stacked on the whole corpus (64 x 32 x 9 = 18,432 tokens) first fit in 32,768
    assert memory.ablate_budget(SHAPE, 2048, shapes, available=2**40, grow=True) == 32768
    assert memory.ablate_budget(SHAPE, 2048, shapes, available=2**40) == 2048


def test_a_smaller_batch_is_chosen_with_a_warning_when_memory_is_short():
    lengths = [64] * 200
    need = memory.collect_peak(SHAPE, batches(lengths)(4096), 30, 200)
    room = 0.6 * need
    with pytest.warns(UserWarning, match=r"using \d+ tokens per batch \(--max-tokens-per-batch\)"):
        chosen = memory.collect_budget(
            SHAPE, lengths, 4096, 30, 200, batches(lengths), available=room / memory.HEADROOM
        )
    assert 64 <= chosen < 4096
    assert memory.collect_peak(SHAPE, batches(lengths)(chosen), 30, 200) <= room


def test_it_refuses_when_not_even_the_longest_probe_fits():
    lengths = [64, 8000]
    with pytest.raises(MemoryBudgetError, match="lower --max-seq-len"):
        memory.collect_budget(SHAPE, lengths, 8192, 30, 200, batches(lengths), available=2**30)


def test_a_refusal_leaves_no_run_folder(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from interp.cli import main

    monkeypatch.setattr(memory, "available_bytes", lambda device="cpu": 1.0)
    result = CliRunner().invoke(
        main,
        [
            "run",
            "--model",
            "minilm-l6",
            "--no-builtin",
            "--skip",
            "weights",
            "--skip",
            "classify",
            "--skip",
            "ablate",
            "--skip",
            "report",
            "-q",
            "--out",
            str(tmp_path / "runs"),
        ],
    )
    assert result.exit_code == 1 and "lower --max-seq-len" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_available_memory_is_known_here():
    assert 0 < memory.available_bytes() < float("inf")

"""benchmarks/collect_contention.py: the acceptance sentence and the busy loops it measures beside."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import collect_contention as C  # noqa: E402


def test_the_ratio_is_met_up_to_the_acceptance_and_not_beyond():
    assert "**3.00x**" in C.ratio_sentence(3.0) and "; met)" in C.ratio_sentence(3.0)
    assert "NOT met" in C.ratio_sentence(3.01)


def test_the_busy_loops_run_inside_the_block_and_are_gone_after(monkeypatch):
    monkeypatch.setattr(C, "SETTLE_S", 0.0)
    # a handler that defers SIGTERM (as a run's does) is inherited by the forked loops
    before = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        with C.Busy(2) as busy:
            assert [p.is_alive() for p in busy.procs] == [True, True]
    finally:
        signal.signal(signal.SIGTERM, before)
    assert [p.is_alive() for p in busy.procs] == [False, False]


def test_the_busy_loops_stop_without_a_deferring_handler(monkeypatch):
    monkeypatch.setattr(C, "SETTLE_S", 0.0)
    with C.Busy(2) as busy:
        assert [p.is_alive() for p in busy.procs] == [True, True]
    assert [p.is_alive() for p in busy.procs] == [False, False]

"""The ablate stage's thread choice: the faster count, measured, never a guess."""

from __future__ import annotations

import time

import pytest
import torch

from interp.ablate import threads as T


def probe_slow_under(slow: int, seconds: float = 0.02):
    seen = []

    def probe():
        n = torch.get_num_threads()
        seen.append(n)
        if n == slow:
            time.sleep(seconds)
    return probe, seen


@pytest.mark.parametrize("slow, expected", [(2, 1), (1, 2)])
def test_fastest_threads_picks_the_faster_count_and_restores_torch(slow, expected):
    before = torch.get_num_threads()
    probe, seen = probe_slow_under(slow)
    assert T.fastest_threads(probe, (1, 2), rounds=2) == expected
    assert seen == [1, 2, 1, 2]  # interleaved
    assert torch.get_num_threads() == before


def test_a_requested_count_is_not_measured():
    probe, seen = probe_slow_under(1)
    assert T.choose_threads(3, probe) == 3 and seen == []


def test_small_machines_measure_big_ones_keep_torchs_default(monkeypatch):
    probe, seen = probe_slow_under(1)
    monkeypatch.setattr(T.os, "cpu_count", lambda: 2)
    assert T.choose_threads(None, probe) == 2 and set(seen) == {1, 2}
    monkeypatch.setattr(T.os, "cpu_count", lambda: 1)
    assert T.choose_threads(None, probe) == 1
    monkeypatch.setattr(T.os, "cpu_count", lambda: 16)
    assert T.choose_threads(None, probe) is None


def test_stage_threads_scopes_the_setting():
    before = torch.get_num_threads()
    with T.stage_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with T.stage_threads(None):
        assert torch.get_num_threads() == before

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


class Stalling(torch.nn.Module):
    """Ten parts, each 200 ms under two threads (a stalled barrier) and 1 ms under one."""

    def __init__(self):
        super().__init__()
        self.parts = torch.nn.ModuleList(torch.nn.Identity() for _ in range(10))
        self.ran: list[int] = []

    def forward(self, x):
        for part in self.parts:
            time.sleep(0.2 if torch.get_num_threads() == 2 else 0.001)
            self.ran.append(torch.get_num_threads())
            x = part(x)
        return x


def test_a_pass_slower_than_the_best_so_far_is_cut_short():
    model = Stalling()
    start = time.perf_counter()
    assert T.fastest_threads(lambda: model(torch.zeros(1)), (1, 2), rounds=2, module=model) == 1
    assert time.perf_counter() - start < 1.5  # run to the end, the two-thread passes alone take 4 s
    assert (
        model.ran.count(1) == 20 and model.ran.count(2) <= 4
    )  # each two-thread pass stops after a part or two
    assert all(not m._forward_pre_hooks for m in model.modules())  # the deadline's hooks are gone


def test_a_second_round_runs_only_within_the_budget():
    probe, seen = probe_slow_under(2, seconds=0.1)
    assert T.fastest_threads(probe, (1, 2), rounds=3, budget=0.15) == 1
    assert seen == [1, 2]  # the first round took 0.1 s: a second would pass 0.15 s
    probe, seen = probe_slow_under(2, seconds=0.01)
    assert T.fastest_threads(probe, (1, 2), rounds=3, budget=1.0) == 1 and seen == [1, 2] * 3

"""Every stage's thread count: the CPUs this process may use that other processes leave free."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import torch

from interp.executors import threads as T

STAT = """cpu  900 0 100 1000 0 0 0 0 0 0
cpu0 400 0 50 500 0 0 0 0 0 0
cpu1 500 0 50 500 0 0 0 0 0 0
intr 1 2 3
"""
LATER = """cpu  1100 0 100 1200 0 0 0 0 0 0
cpu0 500 0 50 600 0 0 0 0 0 0
cpu1 600 0 50 600 10 0 0 0 0 0
intr 1 2 3
"""


def test_cpu_max_reads_the_quota_in_cpus():
    assert T.parse_cpu_max("150000 100000\n") == 1.5
    assert T.parse_cpu_max("max 100000\n") is None
    assert T.parse_cpu_max("") is None


def test_the_tightest_quota_of_the_cgroup_and_those_above_it_counts(tmp_path):
    own = tmp_path / "cgroup"
    (tmp_path / "fs" / "a" / "b").mkdir(parents=True)
    (tmp_path / "fs" / "a" / "cpu.max").write_text("300000 100000\n")
    (tmp_path / "fs" / "a" / "b" / "cpu.max").write_text("max 100000\n")
    own.write_text("0::/a/b\n")
    assert T.cpu_quota(tmp_path / "fs", own) == 3.0
    own.write_text("4:cpu,cpuacct:/c\n")  # cgroup v1: cfs quota and period
    (tmp_path / "fs" / "cpu,cpuacct" / "c").mkdir(parents=True)
    (tmp_path / "fs" / "cpu,cpuacct" / "c" / "cpu.cfs_quota_us").write_text("50000\n")
    (tmp_path / "fs" / "cpu,cpuacct" / "c" / "cpu.cfs_period_us").write_text("100000\n")
    assert T.cpu_quota(tmp_path / "fs", own) == 0.5
    (tmp_path / "fs" / "cpu,cpuacct" / "c" / "cpu.cfs_quota_us").write_text("-1\n")
    assert T.cpu_quota(tmp_path / "fs", own) is None
    assert T.cpu_quota(tmp_path / "nowhere", tmp_path / "no-such-file") is None


def test_busy_ticks_are_those_of_the_cpus_asked_for_without_idle_and_iowait():
    assert T.cpu_ticks(STAT, [0, 1]) == (1000, 2000)
    assert T.cpu_ticks(STAT, [1]) == (550, 1050)
    assert T.cpu_ticks(LATER, [1]) == (650, 1260)


def test_busy_elsewhere_leaves_out_this_process_own_time():
    stats, own = iter([STAT, LATER]), iter([0, 60])
    # cpu0+cpu1: 200 busy ticks of 410, 60 of them this process': 140 / 410 of 2 CPUs
    busy = T.busy_elsewhere([0, 1], 0, lambda: next(stats), lambda: next(own))
    assert busy == pytest.approx(2 * 140 / 410)
    assert T.busy_elsewhere([0], 0, lambda: "", lambda: 0) == 0.0  # nothing to read: all free


def test_the_count_is_the_free_cpus_rounded_at_least_one(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(T, "usable_cpus", lambda: 2)
    for busy, expected in [(0.0, 2), (0.4, 2), (0.6, 1), (1.9, 1), (3.0, 1)]:
        monkeypatch.setattr(T, "busy_elsewhere", lambda cpus, sample, b=busy: b)
        chosen = T.choose_threads(None)
        assert chosen.n == expected, busy
        assert chosen.why == f"{max(0.0, 2 - busy):.1f} of 2 CPUs free"
    assert T.choose_threads(3) == T.Threads(3, "--threads")
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    assert T.choose_threads(None) == T.Threads(4, "OMP_NUM_THREADS")
    assert T.choose_threads(2).n == 2  # the config's own count wins
    monkeypatch.setenv("OMP_NUM_THREADS", "x")
    assert T.choose_threads(None).n == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_busy_loops_on_every_cpu_leave_one_thread(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    if T.usable_cpus() > 4:
        pytest.skip("fills every usable CPU with a busy loop: meant for small machines")
    loop = [sys.executable, "-c", "while True: pass"]
    busy = [subprocess.Popen(loop) for _ in range(T.usable_cpus())]
    try:
        time.sleep(0.3)
        assert T.busy_elsewhere(sorted(T._affinity()), 0.5) >= T.usable_cpus() - 0.5
        assert T.choose_threads(None).n == 1
    finally:
        for process in busy:
            process.kill()
            process.wait()


def test_stage_threads_scopes_the_setting():
    before = torch.get_num_threads()
    with T.stage_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with T.stage_threads(None):
        assert torch.get_num_threads() == before

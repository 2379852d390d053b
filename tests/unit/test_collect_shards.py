"""Collection in shards (interp.collect.shards): shards that come back in any order, and
bootstrap weights that do not depend on the batching, give the tables of one process."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from interp import CollectConfig
from interp.collect import stage
from interp.collect.bootstrap import CHUNK, sequence_weights
from interp.collect.shards import partition
from interp.executors.work import LocalExecutor

CONFIG = CollectConfig(
    n_syntax=24,
    n_repeated=12,
    max_sentences=12,
    n_bootstrap=20,
    max_tokens_per_batch=96,
    threads=1,
)


def test_a_sequences_weights_are_its_own_however_it_is_batched():
    every = sequence_weights(7, torch.arange(3 * CHUNK), 5)
    picked = torch.tensor([CHUNK + 3, 2, 2 * CHUNK + 9, 5])
    assert torch.equal(sequence_weights(7, picked, 5), every[:, picked])
    assert not torch.equal(
        sequence_weights(8, picked, 5), every[:, picked]
    )  # another seed, other draws
    assert (every >= 0).all() and every.mean().item() == pytest.approx(1.0, abs=0.05)  # Poisson(1)


def test_partition_keeps_whole_batches_in_order():
    groups = [[0, 1], [2], [3, 4, 5], [6]]
    assert partition(groups, 3) == [[[0, 1], [2]], [[3, 4, 5]], [[6]]]
    assert partition(groups, 100) == [groups]


class Reversed(LocalExecutor):
    """An executor whose shards come back last first, as workers finishing out of order would."""

    def map(self, work, job, units, done):
        return reversed(list(super().map(work, job, units, done)))


def many_shards(monkeypatch) -> list[int]:
    """Shards of at least 4 sequences (whole batches); returns the shard counts seen."""
    seen = []

    def cut(groups):
        seen.append(len(partition(groups, 4)))
        return partition(groups, 4)

    monkeypatch.setattr(stage, "partition", cut)
    return seen


def test_shards_in_any_order_give_the_tables_of_one_process(llama, monkeypatch):
    seen = many_shards(monkeypatch)
    local = stage.collect(llama, CONFIG, progress=False)
    monkeypatch.setattr("interp.executors.choice.LocalExecutor", Reversed)
    shuffled = stage.collect(llama, CONFIG, progress=False)
    pd.testing.assert_frame_equal(local.features, shuffled.features, check_exact=True)
    pd.testing.assert_frame_equal(local.syntax, shuffled.syntax, check_exact=True)
    pd.testing.assert_frame_equal(local.sinks, shuffled.sinks, check_exact=True)
    assert (
        (local.replicates == shuffled.replicates)
        | (pd.isna(local.replicates) & pd.isna(shuffled.replicates))
    ).all()
    for a, b in zip(local.exemplars.probes, shuffled.exemplars.probes):
        assert (a.patterns == b.patterns).all() and a.patterns.any()
    assert min(seen) >= 3


def test_one_shard_and_many_agree(llama, monkeypatch):
    one = stage.collect(llama, CONFIG, progress=False)
    seen = many_shards(monkeypatch)
    many = stage.collect(llama, CONFIG, progress=False)
    assert seen[0] >= 3
    pd.testing.assert_frame_equal(one.features, many.features, rtol=1e-12, atol=1e-12)
    pd.testing.assert_frame_equal(one.syntax, many.syntax, rtol=1e-12, atol=1e-12)

"""The exact sweep through the executor seam: shards of whole layers, partial sums merged exactly."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from tiny_models import N_HEADS, N_LAYERS

from interp.ablate.config import AblateConfig
from interp.ablate.evaluation import build_corpus
from interp.ablate.executor import SWEEP, SweepJob, partition, sweep_with
from interp.ablate.forward import Ablator
from interp.ablate.metrics import PerSeq, metric_sizes
from interp.ablate.sequential import rounds
from interp.ablate.stats import SumStore, effects_from_sums
from interp.collect.config import CollectConfig
from interp.errors import ConfigError
from interp.executors.choice import check_executor
from interp.executors.work import LocalExecutor

pytestmark = pytest.mark.usefixtures("one_thread")
EVERY = [(layer, head) for layer in range(N_LAYERS) for head in range(N_HEADS)]


def per(index, num, den=None):
    num = torch.tensor(num, dtype=torch.float64)
    return PerSeq(
        torch.tensor(index),
        num,
        torch.ones_like(num) if den is None else torch.tensor(den, dtype=torch.float64),
    )


def test_merging_partial_sums_equals_one_store_filled_with_all_of_them():
    one = SumStore({"m": 4})
    a, b = SumStore({"m": 4}), SumStore({"m": 4})
    for store in (one, a):
        store.add_base({"m": per([0, 1], [0.5, 1.25], [2.0, 3.0])})
        store.add(("zero", 0, 1), {"m": per([0, 1], [0.75, 1.5])})
    for store in (one, b):  # b: another layer's head on the same sequences, and new sequences
        store.add_base({"m": per([0, 1], [0.5, 1.25], [2.0, 3.0])})
        store.add(("zero", 1, 0), {"m": per([0, 1], [0.125, 2.0])})
        store.add_base({"m": per([3], [1 / 3], [1.0])})
        store.add(("zero", 1, 0), {"m": per([3], [0.1])})
    merged = SumStore({"m": 4}).merge(a).merge(b)
    got, want = merged["m"], one["m"]
    assert torch.equal(got.base, want.base) and torch.equal(got.den, want.den)
    assert torch.equal(got.measured, want.measured) and got.measured.tolist() == [
        True,
        True,
        False,
        True,
    ]
    assert list(got.ablated) == list(want.ablated)
    for condition, row in want.ablated.items():
        assert torch.equal(got.ablated[condition].nan_to_num(-1), row.nan_to_num(-1))


def test_merging_refuses_a_head_measured_twice_or_a_different_intact_model():
    a, b = SumStore({"m": 2}), SumStore({"m": 2})
    for store in (a, b):
        store.add_base({"m": per([0], [0.5])})
        store.add(("zero", 0, 0), {"m": per([0], [0.75])})
    with pytest.raises(ValueError, match="measured by two shards"):
        SumStore({"m": 2}).merge(a).merge(b)
    c = SumStore({"m": 2})
    c.add_base({"m": per([0], [0.5 + 1e-12])})
    with pytest.raises(ValueError, match="intact model differently"):
        SumStore({"m": 2}).merge(a).merge(c)


def test_shards_hold_whole_layers_balanced_by_the_blocks_they_rerun():
    heads = [(layer, head) for layer in range(8) for head in range(3)]
    shards = partition(heads, 8, 3)
    assert [h for s in shards for h in s.heads] == heads  # every head once, in order
    assert all(len({layer for layer, _ in s.heads}) == len(s.layers) for s in shards)
    assert len(shards) == 3 and len(shards[0].layers) < len(
        shards[-1].layers
    )  # early layers cost more
    assert [s.layers for s in partition(heads, 8, 8)] == [[i] for i in range(8)]
    assert len(partition(heads, 8, 1)) == 1
    # fewer layers than shards: the costliest layer's heads are shared out
    split = partition([(0, h) for h in range(4)] + [(1, 0)], 2, 3)
    assert [s.heads for s in split] == [((0, 0), (0, 1)), ((0, 2), (0, 3)), ((1, 0),)]


@pytest.mark.parametrize("kinds", [("zero",), ("mean", "resample")])
def test_a_sweep_split_into_shards_gives_the_tables_of_the_unsplit_sweep(llama, kinds):
    corpus = build_corpus(llama, 3, 3, (6,), 6, 0, 256)
    ablator = Ablator(llama)
    means = torch.randn(N_LAYERS, N_HEADS, llama.bridge.cfg.d_head) if "mean" in kinds else None
    tables = []
    for n_shards in (1, 2, 5):
        executor = LocalExecutor(llama, {SWEEP.name: ablator})
        store = SumStore(metric_sizes(corpus.sizes))
        # two rounds, as a sequential sweep runs them: shards merge into the sums of earlier rounds
        for part in rounds(corpus, 2, 256, 0):
            assert sweep_with(
                executor,
                SweepJob(part, kinds, means, None, 256),
                EVERY,
                N_LAYERS,
                store,
                progress=False,
                n_shards=n_shards,
            )
        table = effects_from_sums(
            store, "exact", 50, 0
        )  # rows in the stage's order (shares of a layer interleave)
        tables.append(
            table.sort_values(["ablation", "metric", "layer", "head"]).reset_index(drop=True)
        )
        assert (
            len(executor.record()["shards"]) == 2 * n_shards
        )  # a shard per sweep, 5 as shares of layers
    for table in tables[1:]:
        pd.testing.assert_frame_equal(table, tables[0], check_exact=True)


def test_ray_is_checked_before_the_model_loads(monkeypatch):
    import importlib.util

    check_executor(AblateConfig())
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r'pip install "interp\[ray\]"'):
        check_executor(AblateConfig(executor="ray"))


@pytest.mark.parametrize("config", [AblateConfig, CollectConfig])
def test_workers_and_address_belong_to_ray(config):
    with pytest.raises(ConfigError, match="workers must be left unset with --executor local"):
        config(workers=2)
    assert config(executor="ray", address="auto", workers=2).workers == 2


def test_where_the_sweep_runs_is_not_compared_on_resume():
    from interp.config import without_placement
    from interp.pipeline.contract import _json

    ray_run = _json(AblateConfig(executor="ray", address="auto", workers=2))
    assert without_placement(AblateConfig, ray_run) == without_placement(
        AblateConfig, _json(AblateConfig())
    )
    assert without_placement(AblateConfig, _json(AblateConfig(seed=1))) != without_placement(
        AblateConfig, ray_run
    )


def test_every_option_of_every_command_says_what_it_does():
    """Inherited config fields (the placement ones) keep their help text: pydantic reads the
    docstrings of a class' own fields only."""
    from interp.cli import main

    for name, command in main.commands.items():
        for param in command.params:
            if param.param_type_name == "option":
                assert param.help, f"interp {name} {param.opts[0]} has no help"

"""--quick spends the exact budget its top heads leave: the heads the estimators rank next join
the sweep (``selected`` = widened) while time is left; a --top-k the user gave is kept as given."""

from __future__ import annotations

import dataclasses

import pytest
from tiny_models import N_HEADS, N_LAYERS

from interp.ablate.config import AblateConfig
from interp.ablate.selection import top_heads
from interp.ablate.stage import ablate

pytestmark = pytest.mark.usefixtures("one_thread")
QUICK = AblateConfig(
    ablations=("mean",), metrics=("loss_repeated",), prune=False, threads=1
).for_quick()


def _selected(effects):
    exact = effects[effects["estimator"] == "exact"].drop_duplicates(["layer", "head"])
    return {(int(r.layer), int(r.head)): r.selected for r in exact.itertuples()}


def test_quick_measures_the_heads_ranked_next_while_its_budget_lasts(llama):
    out = ablate(llama, QUICK, progress=False)
    selected = _selected(out.effects)
    estimates = out.effects[out.effects["estimator"] != "exact"]
    top = top_heads(estimates[estimates["ablation"] == "mean"], 5)
    # the top 5 of each estimator are chosen as before; a tiny model's budget has room for all
    assert {h for h, why in selected.items() if why == "top_k"} == top
    assert len(selected) == N_LAYERS * N_HEADS and out.summary["never_exact"] == []
    assert set(selected.values()) == {"top_k", "audit", "widened"}
    assert out.summary["exact_heads"] == N_LAYERS * N_HEADS


def test_a_top_k_the_user_gave_is_not_widened(llama):
    out = ablate(llama, dataclasses.replace(QUICK, top_k=1), progress=False)
    assert "widened" not in set(_selected(out.effects).values())
    assert out.summary["never_exact"]

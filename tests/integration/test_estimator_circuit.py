"""--quick on the toy model whose layer-0 previous-token head feeds a layer-1 induction head
(interp.synthetic.toy; slow: trains if uncached).

The previous-token head matters only through the induction head's saturated softmax, so its
first-order attribution is near zero (attribution alone ranks it last); ``--quick`` chooses its
exact heads by attribution or integrated gradients over the clean -> ablated path, whichever
ranks a head higher, and must put both heads of the circuit among them.
"""

from __future__ import annotations

import pytest

from interp import CollectConfig
from interp.ablate.stage import AblateConfig, ablate
from interp.collect.stage import collect


@pytest.fixture(scope="module")
def toy():
    from interp.synthetic.toy import toy_cached

    return toy_cached(progress=False).model


def best_head(features, feature: str, layer: int) -> tuple[int, int]:
    rows = features[(features["feature"] == feature) & (features["layer"] == layer)]
    return layer, int(rows.loc[rows["value"].idxmax(), "head"])


@pytest.mark.slow
def test_quick_finds_the_previous_token_and_the_induction_head(toy):
    probes = CollectConfig(suites=("repeated",), n_repeated=48, n_bootstrap=10)
    features = collect(toy, probes, suites=[], progress=False).features
    previous, induction = (
        best_head(features, "previous_token", 0),
        best_head(features, "induction", 1),
    )
    out = ablate(toy, AblateConfig(threads=1).for_quick(), progress=False)
    exact = out.effects[out.effects["estimator"] == "exact"]
    chosen = set(
        exact.loc[exact["selected"] == "top_k", ["layer", "head"]].itertuples(
            index=False, name=None
        )
    )
    assert len(chosen) < toy.n_layers * toy.n_heads  # a selection, not every head
    assert {previous, induction} <= chosen, (previous, induction, chosen)
    # the circuit's previous-token head really is needed by the repeated-token loss
    repeated = exact[
        (exact["metric"] == "loss_repeated")
        & (exact["layer"] == previous[0])
        & (exact["head"] == previous[1])
    ]
    assert repeated["ci_low"].item() > 0
    # no estimate of either head claims an interval that excludes its exact effect unflagged
    keys = ["layer", "head", "ablation", "metric"]
    estimates = out.effects[out.effects["estimator"] != "exact"]
    pairs = estimates.merge(exact[keys + ["delta"]].rename(columns={"delta": "exact"}), on=keys)
    pairs = pairs[pairs[["layer", "head"]].apply(tuple, axis=1).isin([previous, induction])]
    assert len(pairs) >= 4
    excludes = (pairs["exact"] < pairs["ci_low"]) | (pairs["exact"] > pairs["ci_high"])
    assert (pairs.loc[excludes, "vs_exact"] == "outside").all() and (
        pairs.loc[~excludes, "vs_exact"] == "inside"
    ).all()


@pytest.mark.slow
def test_atp_star_ranks_the_previous_token_head_first_or_second(toy):
    """AtP* as the stage's estimator: the QK fix recomputes the induction head's softmax when the
    previous-token head's output moves its keys, so the head that first-order attribution ranks
    last is among AtP*'s top two on repeated tokens; every estimate carries its GradDrop score."""
    probes = CollectConfig(suites=("repeated",), n_repeated=48, n_bootstrap=10)
    features = collect(toy, probes, suites=[], progress=False).features
    previous = best_head(features, "previous_token", 0)
    cfg = AblateConfig(
        ablations=("mean",),
        metrics=("loss_repeated",),
        estimator="atp_star",
        estimator_positions=1000,
        max_rounds=1,
        prune=False,
        threads=1,
    )
    out = ablate(toy, cfg, progress=False)
    star = out.effects[out.effects["estimator"] == "atp_star"]
    order = star.assign(size=star["delta"].abs()).sort_values("size", ascending=False)
    assert previous in list(zip(order["layer"], order["head"]))[:2]
    assert star["graddrop"].notna().all() and (star["graddrop"] >= 0).all()
    assert out.summary["estimator"] == "atp_star"

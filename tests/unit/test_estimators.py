"""Integrated gradients over the clean -> ablated path, and the top-k selection with its audit sample."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from tiny_models import N_HEADS, N_LAYERS, tiny_llama

from interp.ablate.attribution import attribute
from interp.ablate.evaluation import build_corpus
from interp.ablate.forward import Ablator, Edit
from interp.ablate.integrated import integrate, midpoints, path_terms
from interp.ablate.metrics import batch_metrics
from interp.ablate.selection import (
    annotate,
    audit_summary,
    choose,
    flag_estimates,
    never_exact,
    reserve,
    top_heads,
)
from interp.ablate.values import replacement

pytestmark = pytest.mark.usefixtures("one_thread")
HEADS = [(layer, head) for layer in range(N_LAYERS) for head in range(N_HEADS)]


def corpus_of(model):
    return build_corpus(
        model, n_prose=3, n_repeated=2, repeated_lengths=(6,), n_syntax=4, seed=0, max_tokens=512
    )


def test_midpoints():
    assert midpoints(1) == [0.5]
    assert midpoints(4) == [0.125, 0.375, 0.625, 0.875]
    with pytest.raises(ValueError):
        midpoints(0)


@pytest.mark.parametrize("kind", ["zero", "mean", "resample"])
def test_the_path_start_is_first_order_attribution(llama, kind):
    """At a = 0 the path's derivative is the intact gradient times (z' - z): attribution's estimate."""
    ablator = Ablator(llama)
    corpus = corpus_of(llama)
    attr = attribute(ablator, corpus, (kind,), progress=False)
    for batch in corpus.batches[:2]:
        clean = ablator.clean(batch, keep_z=True)
        terms = path_terms(ablator, batch, kind, 0.0, clean.z, attr.means)  # [layer, batch, head]
        per = batch_metrics(clean.readout, batch)
        for layer, head in ((0, 1), (2, 3)):
            for metric, p in per.items():
                if metric not in attr.store:  # no gradient: read beside the eval set's own metric
                    continue
                ours = float(terms[layer, :, head].sum())
                sums = attr.store[metric]
                theirs = float(
                    (sums.ablated[(kind, layer, head)][p.index] - sums.base[p.index]).sum()
                )
                assert ours == pytest.approx(
                    theirs, rel=1e-3, abs=1e-5
                )  # float32: attribution sums its terms apart


def test_estimates_add_up_to_ablating_every_head():
    """Completeness: the heads' shares of the path sum to the effect of ablating all of them (float64,
    many steps, so that the midpoint rule's error is small)."""
    model = tiny_llama(seed=1)
    model.bridge.to(torch.float64)
    ablator = Ablator(model)
    corpus = corpus_of(model)
    means = attribute(ablator, corpus, ("mean",), progress=False).means.double()
    for kind in ("zero", "mean"):
        store = integrate(ablator, corpus, (kind,), means, steps=48, progress=False)
        estimate = sum(
            float((s.ablated[(kind, *h)] - s.base).sum()) for s in store.values() for h in HEADS
        )
        exact = 0.0
        for batch in corpus.batches:
            clean = ablator.clean(batch)
            edits = [
                Edit(layer, head, replacement(kind, layer, head, batch, None, means))
                for layer, head in HEADS
            ]
            after = batch_metrics(ablator.run(batch, edits), batch, clean.readout)
            before = batch_metrics(clean.readout, batch)
            exact += sum(
                float(after[m].num.sum() - before[m].num.sum()) for m in after if m in store
            )
        assert estimate == pytest.approx(exact, rel=2e-3)


# --- selection ---------------------------------------------------------------------------------


def estimates_frame(deltas: dict[str, list[float]], method: str = "attribution") -> pd.DataFrame:
    heads = [(0, 0), (0, 1), (1, 0), (1, 1)]
    return pd.DataFrame(
        [
            {
                "layer": l,
                "head": h,
                "ablation": "zero",
                "metric": m,
                "delta": d,
                "estimator": method,
            }
            for m, ds in deltas.items()
            for (l, h), d in zip(heads, ds)
        ]
    )


def test_choose_takes_the_union_of_every_metrics_top_k_and_an_audit_sample():
    heads = [(0, 0), (0, 1), (1, 0), (1, 1)]
    est = estimates_frame({"a": [0.1, -0.9, 0.2, 0.3], "b": [5.0, 0.0, 0.1, 0.2]})
    # top 2 by |delta|: a -> (0, 1), (1, 1); b -> (0, 0), (1, 1); the union is three heads
    chosen = choose(heads, est, top_k=2, audit=1, kind="zero", metrics=("a", "b"), seed=0)
    assert chosen == {(0, 0): "top_k", (0, 1): "top_k", (1, 0): "audit", (1, 1): "top_k"}
    assert (
        choose(heads, est, top_k=2, audit=1, kind="zero", metrics=("a", "b"), seed=0) == chosen
    )  # seeded
    assert set(choose(heads, est, None, 1, "zero", ("a",), 0).values()) == {"all"}
    # the audit is never left out: by default a quarter as many as the top heads, at least one (seeded)
    assert choose(heads, est, top_k=1, audit=None, kind="zero", metrics=("a",), seed=0) == {
        (0, 1): "top_k",
        (1, 0): "audit",
    }
    assert choose(heads, est, top_k=1, audit=2, kind="zero", metrics=("a",), seed=0) == {
        (0, 1): "top_k",
        (1, 0): "audit",
        (1, 1): "audit",
    }
    # a second estimator that ranks (1, 0) first on "a" gets it chosen too
    both = pd.concat([est, estimates_frame({"a": [0.1, 0.2, 3.0, 0.0]}, "integrated")])
    assert top_heads(both[both["metric"] == "a"], 1) == {(0, 1), (1, 0)}
    assert choose(heads, both, top_k=1, audit=1, kind="zero", metrics=("a",), seed=0) == {
        (0, 1): "top_k",
        (1, 0): "top_k",
        (1, 1): "audit",
    }


def test_ties_at_the_kth_head_are_all_included():
    est = estimates_frame({"a": [0.5, -0.5, 0.5, 0.1]})  # three heads tie for first on |delta|
    assert top_heads(est, 1) == {(0, 0), (0, 1), (1, 0)}
    assert top_heads(est, 3) == {(0, 0), (0, 1), (1, 0)}
    assert top_heads(est, 4) == {(0, 0), (0, 1), (1, 0), (1, 1)}
    heads = [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert choose(heads, est, top_k=1, audit=None, kind="zero", metrics=("a",), seed=0) == {
        (0, 0): "top_k",
        (0, 1): "top_k",
        (1, 0): "top_k",
        (1, 1): "audit",
    }
    assert top_heads(estimates_frame({"a": [float("nan"), 0.2, 0.1, 0.0]}), 1) == {
        (0, 1)
    }  # NaN ranks nowhere


def test_the_reserve_comes_in_batches_of_doubling_rank_best_first():
    """Heads outside the top 1 by their best rank over every list: within 2, then 4 (every head
    of four: the unranked ones come too); ties share a batch; chosen heads are left out."""
    heads = [(0, 0), (0, 1), (1, 0), (1, 1)]
    est = estimates_frame({"a": [4.0, 3.0, 2.0, 1.0], "b": [0.0, 0.0, 9.0, float("nan")]})
    # ranks: a -> 1, 2, 3, 4; b -> 2, 2, 1, none (tied zeros share rank 2)
    assert reserve(heads, est, 1, "zero", ("a", "b"), {(0, 0)}) == [[(0, 1), (1, 0)], [(1, 1)]]
    # only the metrics and kind asked for rank: by "a" alone (1, 0) is third
    assert reserve(heads, est, 1, "zero", ("a",), {(0, 0)}) == [[(0, 1)], [(1, 0), (1, 1)]]
    assert reserve(heads, est, 1, "mean", ("a",), {(0, 0)}) == [[(0, 1), (1, 0), (1, 1)]]
    assert reserve(heads, None, 1, "zero", ("a",), set()) == [heads]
    assert reserve(heads, est, 1, "zero", ("a",), set(heads)) == []


def test_heads_never_ablated_exactly_are_named():
    est = estimates_frame({"a": [0.1, 0.2, 0.3, 0.4]})
    exact = est[est["head"] == 1].assign(estimator="exact")
    assert never_exact(pd.concat([est, exact]), 2, 2) == ["L0H0", "L1H0"]
    assert never_exact(est, 2, 2) == ["L0H0", "L0H1", "L1H0", "L1H1"]


def test_audit_summary_reports_error_and_misses():
    est = estimates_frame({"a": [1.0, 0.8, 0.1, 0.0]})
    exact = est.assign(delta=[0.9, 0.5, 0.7, 0.1], estimator="exact")
    chosen = {(0, 0): "top_k", (0, 1): "top_k", (1, 0): "audit", (1, 1): "audit"}
    rows = annotate(exact, est, chosen)
    assert rows["estimate"].tolist() == [1.0, 0.8, 0.1, 0.0]
    summary = audit_summary(rows)["zero/a"]
    assert summary["n_audit"] == 2 and summary["missed"] == 1  # (1, 0): 0.7 beats the top's 0.5
    assert summary["mean_abs_error"] == pytest.approx(0.35) and summary[
        "max_abs_error"
    ] == pytest.approx(0.6)
    assert summary["spearman"] == pytest.approx(0.8)


def test_an_estimate_whose_interval_misses_the_exact_effect_says_so():
    # the toy circuit's case: attribution near zero with a tight interval, exact effect large
    est = estimates_frame({"a": [1e-5, 0.5, 0.3, 0.0]}).assign(
        ci_low=[0.9e-5, 0.4, 0.2, -0.1], ci_high=[1.1e-5, 0.6, 0.4, 0.1]
    )
    exact = est[est["head"] == 0].assign(
        delta=[0.54, 0.35], estimator="exact"
    )  # heads (0, 0) and (1, 0)
    flagged = flag_estimates(est, exact)
    assert flagged["vs_exact"].fillna("-").tolist() == ["outside", "-", "inside", "-"]
    assert flagged.drop(columns="vs_exact").equals(est)
    assert flag_estimates(est, exact.iloc[:0])["vs_exact"].isna().all()


# --- effects with stated precision ---------------------------------------------------------------


def test_effects_rest_on_each_conditions_own_sequences():
    from interp.ablate.stats import SumStore, effects_from_sums

    store = SumStore({"loss_prose": 3})
    sums = store["loss_prose"]
    sums.base[:] = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    sums.den[:] = 1.0
    sums.ablated[("zero", 0, 0)] = torch.tensor(
        [2.0, 3.0, 4.0], dtype=torch.float64
    )  # +1 on every sequence
    sums.ablated[("zero", 0, 1)] = torch.tensor(
        [1.5, 2.5, float("nan")], dtype=torch.float64
    )  # stopped after two
    tokens = {"loss_prose": np.array([10, 20, 30])}
    rows = effects_from_sums(store, "exact", 50, 0, tokens).set_index("head")
    assert rows.loc[0, "delta"] == pytest.approx(1.0) and rows.loc[0, "n_tokens"] == 60
    assert rows.loc[1, "delta"] == pytest.approx(0.5) and rows.loc[1, "n_tokens"] == 30
    assert rows.loc[0, "ablated"] == pytest.approx(3.0) and (rows["baseline"] == 2.0).all()
    assert rows.loc[0, "ci_low"] == pytest.approx(1.0) and rows.loc[0, "ci_high"] == pytest.approx(
        1.0
    )  # paired


def test_decisions_against_zero_and_the_tolerance():
    from interp.ablate.stats import decisions

    frame = pd.DataFrame(
        {
            "metric": ["loss_prose"] * 4 + ["embedding_cosine", "kl_prose"],
            # a KL divergence is 0 at the intact model; rounding leaves 1e-9: still absolute
            "baseline": [2.0, 2.0, 2.0, 2.0, 0.0, 1e-9],
            "ci_low": [0.03, 0.005, -0.01, -0.5, 0.001, 0.002],
            "ci_high": [0.05, 0.015, 0.01, -0.03, 0.005, 0.004],
        }
    )
    out = decisions(frame)
    assert out["tolerance"].tolist() == pytest.approx([0.02, 0.02, 0.02, 0.02, 0.01, 0.01])
    assert out["vs_zero"].tolist() == ["above", "above", "undecided", "below", "above", "above"]
    assert out["vs_tolerance"].tolist() == [
        "above",
        "within",
        "within",
        "below",
        "within",
        "within",
    ]
    straddle = decisions(
        pd.DataFrame(
            {"metric": ["loss_prose"], "baseline": [2.0], "ci_low": [0.01], "ci_high": [0.03]}
        )
    )
    assert straddle["vs_tolerance"].item() == "undecided"

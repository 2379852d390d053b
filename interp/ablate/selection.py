"""Which heads get exact ablation when not all of them can, and how far the estimator was off.

With ``top_k`` the stage ablates exactly the *union*, over every metric and every estimator
(primary ablation kind), of the ``k`` heads with the largest |estimated delta|: a head near
the top for any one metric under either estimator is chosen, and none can crowd another out
(a shared budget once left a head ranked 2nd by both estimators on one metric unmeasured).
Ties are never broken by layer order: every head whose |estimate| equals the ``k``-th largest
of a list is taken too. Both estimators are needed: first-order attribution ranks the
packaged models' heads best, but is blind to a head whose effect runs through another head's
saturated softmax (the toy's previous-token head), which integrated gradients sees
(benchmarks/estimators.py). An estimator is only trusted as far as it was checked, so a random
*audit* sample of the other heads is always ablated exactly too (seeded; by default a quarter
as many as the top heads, at least one): their exact-vs-estimate error, and whether any of them
would have belonged in the top ``k``, go into the effects table (``selected``, ``estimate``) and
the manifest (:func:`audit_summary`); the heads never ablated exactly are listed there too
(:func:`never_exact`).
"""

from __future__ import annotations

import math
import random
import warnings

import numpy as np
import pandas as pd

from interp.ablate.config import AUDIT_SHARE

Head = tuple[int, int]
ALL, TOP, AUDIT, WIDENED = "all", "top_k", "audit", "widened"


def choose(
    heads: list[Head],
    estimates: pd.DataFrame | None,
    top_k: int | None,
    audit: int | None,
    kind: str,
    metrics: tuple[str, ...],
    seed: int,
) -> dict[Head, str]:
    """Head -> why it is ablated exactly (``all``, ``top_k`` or ``audit``), in ``heads`` order.

    ``audit``: heads sampled at random from the rest (None: ``AUDIT_SHARE`` as many as the top
    heads, at least one)."""
    if top_k is None or top_k >= len(heads):
        return {h: ALL for h in heads}
    rows = (
        None
        if estimates is None
        else estimates[(estimates["ablation"] == kind) & estimates["metric"].isin(metrics)]
    )
    if (
        rows is None or rows.empty
    ):  # e.g. an encoder asked for embedding_cosine only: nothing to rank by
        warnings.warn(
            "top_k needs a metric the estimator can estimate; ablating every head exactly",
            stacklevel=3,
        )
        return {h: ALL for h in heads}
    top = top_heads(rows, top_k)
    rest = [h for h in heads if h not in top]
    n_audit = max(1, math.ceil(AUDIT_SHARE * len(top))) if audit is None else audit
    sample = set(random.Random(seed).sample(rest, min(n_audit, len(rest))))
    return {h: TOP if h in top else AUDIT for h in heads if h in top or h in sample}


def top_heads(rows: pd.DataFrame, k: int) -> set[Head]:
    """The union over (method, metric) of ``rows`` of the ``k`` heads with the largest
    |delta|, every head tied with the ``k``-th included (NaN estimates rank nowhere)."""
    out: set[Head] = set()
    for _, group in rows.groupby(["estimator", "metric"]):
        size = (
            group.set_index(["layer", "head"])["delta"].abs().dropna().sort_values(ascending=False)
        )
        if size.empty:
            continue
        cut = size.iloc[min(k, len(size)) - 1]
        out |= {(int(layer), int(head)) for layer, head in size[size >= cut].index}
    return out


def reserve(
    heads: list[Head],
    estimates: pd.DataFrame | None,
    top_k: int,
    kind: str,
    metrics: tuple[str, ...],
    taken: set[Head],
) -> list[list[Head]]:
    """The other ``heads`` (not in ``taken``) in batches, best ranked first: a head's rank is its
    best over the (estimator, metric) lists of ``estimates`` (primary ablation ``kind``), and
    batch i holds the heads ranked within ``top_k * 2**(i + 1)`` (ties share a rank and so a
    batch; heads no list ranks, such as those of a metric with no estimate, come last). What a
    time budget that the top ``top_k`` leave unspent measures next
    (:func:`interp.ablate.sequential.sequential_sweep`)."""
    rows = (
        None
        if estimates is None
        else estimates[(estimates["ablation"] == kind) & estimates["metric"].isin(metrics)]
    )
    best = {h: np.inf for h in heads if h not in taken}
    for _, group in () if rows is None else rows.groupby(["estimator", "metric"]):
        size = group.set_index(["layer", "head"])["delta"].abs().dropna()
        for (layer, head), rank in size.rank(ascending=False, method="min").items():
            key = (int(layer), int(head))
            if key in best:
                best[key] = min(best[key], rank)
    out, cut = [], top_k
    while best:
        cut *= 2
        last = cut >= len(heads)  # every rank is within the cut: the unranked heads come too
        batch = sorted(h for h, rank in best.items() if last or rank <= cut)
        best = {h: rank for h, rank in best.items() if h not in batch}
        if batch:
            out.append(batch)
    return out


def never_exact(effects: pd.DataFrame, n_layers: int, n_heads: int) -> list[str]:
    """The heads with no exact row in ``effects``, as ``L{layer}H{head}`` in layer order: their
    effects are estimates only (what the manifest and the report list)."""
    exact = (
        effects[effects["estimator"] == "exact"]
        if "estimator" in effects.columns
        else effects.iloc[:0]
    )
    done = set(zip(exact["layer"].astype(int), exact["head"].astype(int)))
    return [
        f"L{layer}H{head}"
        for layer in range(n_layers)
        for head in range(n_heads)
        if (layer, head) not in done
    ]


def annotate(
    exact: pd.DataFrame, estimates: pd.DataFrame | None, chosen: dict[Head, str]
) -> pd.DataFrame:
    """Exact rows with ``selected`` (why the head was ablated) and ``estimate`` (the estimator's
    delta for the same head, kind and metric; NaN where there is none)."""
    if exact.empty:
        return exact
    out = exact.assign(
        selected=[chosen.get((int(r.layer), int(r.head)), ALL) for r in exact.itertuples()]
    )
    if estimates is None or estimates.empty:
        return out.assign(estimate=np.nan)
    keys = ["layer", "head", "ablation", "metric"]
    est = estimates[keys + ["delta"]].rename(columns={"delta": "estimate"})
    return out.merge(est, on=keys, how="left")


def flag_estimates(estimates: pd.DataFrame | None, exact: pd.DataFrame) -> pd.DataFrame | None:
    """Estimate rows with ``vs_exact``: ``inside`` / ``outside`` where the same head, kind and
    metric was also ablated exactly and its exact delta lies in / outside the estimate's
    interval; NaN where it was not. An estimate's interval covers the sampling of evaluation
    sequences only, not the estimator's own error (first-order attribution puts a head whose
    effect runs through a saturated softmax near zero, with a tight interval), so ``outside``
    says plainly where the interval would mislead."""
    if estimates is None or estimates.empty:
        return estimates
    keys = ["layer", "head", "ablation", "metric"]
    truth = exact[keys + ["delta"]].rename(columns={"delta": "_exact"}) if len(exact) else None
    if truth is None:
        return estimates.assign(vs_exact=np.nan)
    out = estimates.merge(truth, on=keys, how="left")
    inside = (out["_exact"] >= out["ci_low"]) & (out["_exact"] <= out["ci_high"])
    verdict = np.where(inside, "inside", "outside").astype(object)
    out["vs_exact"] = np.where(out["_exact"].isna(), np.nan, verdict)
    return out.drop(columns="_exact")


def audit_summary(effects: pd.DataFrame) -> dict[str, dict[str, float | int]]:
    """Per (kind, metric) of the exact rows that carry an estimate: the audit heads' error.

    ``n_audit``: audit heads; ``mean_abs_error`` / ``max_abs_error``: |exact - estimate| over
    them; ``missed``: audit heads whose exact |delta| beats the smallest exact |delta| among the
    top-k heads (heads the estimator should have chosen); ``spearman``: rank agreement of
    estimate and exact over every head measured both ways.
    """
    if "selected" not in effects.columns:
        return {}
    rows = effects[(effects["estimator"] == "exact") & effects["estimate"].notna()]
    out: dict[str, dict[str, float | int]] = {}
    for (kind, metric), group in rows.groupby(["ablation", "metric"]):
        audit = group[group["selected"] == AUDIT]
        top = group[group["selected"] == TOP]
        error = (audit["delta"] - audit["estimate"]).abs()
        floor = top["delta"].abs().min() if len(top) else np.inf
        out[f"{kind}/{metric}"] = {
            "n_audit": len(audit),
            "mean_abs_error": float(error.mean()) if len(audit) else float("nan"),
            "max_abs_error": float(error.max()) if len(audit) else float("nan"),
            "missed": int((audit["delta"].abs() > floor).sum()),
            "spearman": float(group["delta"].rank().corr(group["estimate"].rank()))
            if len(group) >= 3
            else float("nan"),
        }
    return out

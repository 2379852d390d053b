"""Which heads get exact ablation when not all of them can, and how far the estimator was off.

With ``top_k`` the stage ablates exactly the ``k`` heads the estimators rank highest: a head's
score is its best percentile of |estimated delta| among the metrics and the estimators
(primary ablation kind), so a head near the top for any one metric under either estimator is
chosen. Both are needed: first-order attribution ranks the packaged models' heads best, but is
blind to a head whose effect runs through another head's saturated softmax (the toy's
previous-token head), which integrated gradients sees (benchmarks/estimators.py). An estimator is only trusted as far as it
was checked, so a random *audit* sample of the other heads is ablated exactly too (seeded):
their exact-vs-estimate error, and whether any of them would have belonged in the top ``k``,
go into the effects table (``selected``, ``estimate``) and the manifest (:func:`audit_summary`).
"""

from __future__ import annotations

import random
import warnings

import numpy as np
import pandas as pd

Head = tuple[int, int]
ALL, TOP, AUDIT = "all", "top_k", "audit"


def choose(heads: list[Head], estimates: pd.DataFrame | None, top_k: int | None, audit: int, kind: str,
           metrics: tuple[str, ...], seed: int) -> dict[Head, str]:
    """Head -> why it is ablated exactly (``all``, ``top_k`` or ``audit``), in ``heads`` order."""
    if top_k is None or top_k >= len(heads):
        return {h: ALL for h in heads}
    rows = None if estimates is None else estimates[(estimates["ablation"] == kind) & estimates["metric"].isin(metrics)]
    if rows is None or rows.empty:  # e.g. an encoder asked for embedding_cosine only: nothing to rank by
        warnings.warn("top_k needs a metric the estimator can estimate; ablating every head exactly", stacklevel=3)
        return {h: ALL for h in heads}
    ranks = rows.assign(pct=rows.groupby(["method", "metric"])["delta"].transform(lambda d: d.abs().rank(pct=True)))
    score = ranks.groupby(["layer", "head"])["pct"].max()
    top = {(int(layer), int(head)) for layer, head in score.sort_values(ascending=False, kind="stable").index[:top_k]}
    rest = [h for h in heads if h not in top]
    sample = set(random.Random(seed).sample(rest, min(audit, len(rest))))
    return {h: TOP if h in top else AUDIT for h in heads if h in top or h in sample}


def annotate(exact: pd.DataFrame, estimates: pd.DataFrame | None, chosen: dict[Head, str]) -> pd.DataFrame:
    """Exact rows with ``selected`` (why the head was ablated) and ``estimate`` (the estimator's
    delta for the same head, kind and metric; NaN where there is none)."""
    if exact.empty:
        return exact
    out = exact.assign(selected=[chosen.get((int(r.layer), int(r.head)), ALL) for r in exact.itertuples()])
    if estimates is None or estimates.empty:
        return out.assign(estimate=np.nan)
    keys = ["layer", "head", "ablation", "metric"]
    est = estimates[keys + ["delta"]].rename(columns={"delta": "estimate"})
    return out.merge(est, on=keys, how="left")


def audit_summary(effects: pd.DataFrame) -> dict[str, dict[str, float | int]]:
    """Per (kind, metric) of the exact rows that carry an estimate: the audit heads' error.

    ``n_audit``: audit heads; ``mean_abs_error`` / ``max_abs_error``: |exact - estimate| over
    them; ``missed``: audit heads whose exact |delta| beats the smallest exact |delta| among the
    top-k heads (heads the estimator should have chosen); ``spearman``: rank agreement of
    estimate and exact over every head measured both ways.
    """
    if "selected" not in effects.columns:
        return {}
    rows = effects[(effects["method"] == "exact") & effects["estimate"].notna()]
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
            "spearman": float(group["delta"].rank().corr(group["estimate"].rank())) if len(group) >= 3 else float("nan"),
        }
    return out

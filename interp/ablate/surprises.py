"""Roles meet effects: does what a head attends to predict how much the model needs it?

Both functions take the ``roles`` table (None when the classify stage has not run: they then
return an empty frame with their columns) and the ``effects`` table. Where a head has an exact
effect it is used, otherwise its attribution estimate; the ``estimator`` column says which.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

ROLE_EFFECT_COLUMNS = [
    "role",
    "ablation",
    "metric",
    "estimator",
    "n_heads",
    "mean_delta",
    "median_delta",
    "q25_delta",
    "q75_delta",
    "max_delta",
    "share_important",
]
SURPRISE_COLUMNS = [
    "layer",
    "head",
    "role",
    "confidence",
    "surprise",
    "ablation",
    "metric",
    "estimator",
    "delta",
    "ci_low",
    "ci_high",
    "delta_rank",
    "reason",
]
UNEXPLAINED = "unexplained"
TOP_SHARE = 0.10  # "important": among the top 10% of heads by delta on some metric...
LABEL_CONFIDENCE = 0.5  # "labelled": the classifier's primary role at least this probable


def best_effects(effects: pd.DataFrame) -> pd.DataFrame:
    """One row per (layer, head, ablation, metric): exact where present, attribution otherwise."""
    ranked = effects.assign(_exact=(effects["estimator"] == "exact").astype(int))
    ranked = ranked.sort_values("_exact", ascending=False, kind="stable")
    return ranked.drop_duplicates(["layer", "head", "ablation", "metric"]).drop(columns="_exact")


def mark_important(effects: pd.DataFrame) -> pd.DataFrame:
    """Add ``important`` and ``delta_rank`` per (ablation, metric).

    Rule: a head is important for a metric when its effect is among the top 10% of heads
    (``delta_rank <= ceil(0.1 * n_heads)``, rank 1 = the largest delta, positive = worse) *and*
    its 95% interval excludes zero (``ci_low > 0``): big relative to the other heads and not
    resampling noise.
    """
    out = best_effects(effects).copy()
    groups = out.groupby(["ablation", "metric"])["delta"]
    out["delta_rank"] = groups.rank(ascending=False, method="min")
    cutoff = np.ceil(TOP_SHARE * groups.transform("size"))
    out["important"] = (out["delta_rank"] <= cutoff) & (out["ci_low"] > 0)
    return out


def role_effects(roles: pd.DataFrame | None, effects: pd.DataFrame) -> pd.DataFrame:
    """Effect distribution per role: quantiles of ``delta`` and the share of important heads."""
    if roles is None or roles.empty or effects is None or effects.empty:
        return pd.DataFrame(columns=ROLE_EFFECT_COLUMNS)
    merged = mark_important(effects).merge(
        roles[["layer", "head", "role"]], on=["layer", "head"], how="inner"
    )
    grouped = merged.groupby(["role", "ablation", "metric", "estimator"])
    out = grouped.agg(
        n_heads=("delta", "size"),
        mean_delta=("delta", "mean"),
        median_delta=("delta", "median"),
        q25_delta=("delta", lambda d: d.quantile(0.25)),
        q75_delta=("delta", lambda d: d.quantile(0.75)),
        max_delta=("delta", "max"),
        share_important=("important", "mean"),
    ).reset_index()
    return out[ROLE_EFFECT_COLUMNS]


def surprises(roles: pd.DataFrame | None, effects: pd.DataFrame) -> pd.DataFrame:
    """Heads where role and effect disagree, one row each:

    - ``unexplained_but_important``: role ``unexplained``, yet important (see
      :func:`mark_important`) for at least one metric; the row shows its most important metric.
    - ``labelled_but_unimportant``: a named role held with confidence >= 0.5, yet important
      for no metric and ablation; the row shows its largest effect, to show how small it is.
    """
    if roles is None or roles.empty or effects is None or effects.empty:
        return pd.DataFrame(columns=SURPRISE_COLUMNS)
    marked = mark_important(effects).merge(
        roles[["layer", "head", "role", "confidence"]], on=["layer", "head"]
    )
    rows = []
    for _, group in marked.groupby(["layer", "head"]):
        role, confidence = group["role"].iloc[0], float(group["confidence"].iloc[0])
        important = group[group["important"]]
        if role == UNEXPLAINED and not important.empty:
            top = important.sort_values("delta_rank").iloc[0]
            rows.append(
                _row(
                    top,
                    "unexplained_but_important",
                    f"no role, but rank {int(top.delta_rank)} on {top.metric} ({top.ablation})",
                )
            )
        elif role != UNEXPLAINED and confidence >= LABEL_CONFIDENCE and important.empty:
            top = group.sort_values("delta_rank").iloc[0]
            rows.append(
                _row(
                    top,
                    "labelled_but_unimportant",
                    f"{role} ({confidence:.2f}), best rank {int(top.delta_rank)} on {top.metric}",
                )
            )
    return pd.DataFrame(rows, columns=SURPRISE_COLUMNS)


def _row(r: pd.Series, surprise: str, reason: str) -> dict:
    # r["head"], not r.head: a Series' .head is its method.
    return {
        "layer": int(r["layer"]),
        "head": int(r["head"]),
        "role": r["role"],
        "confidence": float(r["confidence"]),
        "surprise": surprise,
        "ablation": r["ablation"],
        "metric": r["metric"],
        "estimator": r["estimator"],
        "delta": float(r["delta"]),
        "ci_low": float(r["ci_low"]),
        "ci_high": float(r["ci_high"]),
        "delta_rank": int(r["delta_rank"]),
        "reason": reason,
    }

"""Two runs of one shape compared head by head (``interp compare RUN_A RUN_B``): what changed for
each head both runs have, from their tables alone.

- :func:`role_differences`: the heads whose primary role differs (or, both ``mixed``, whose blends
  hold other roles), with what decided it in each run (the roles table's ``evidence``:
  attention, weights, output, task) and the blends, where the runs say;
- :func:`score_differences`: every matching head's role and confidence in both runs, the role
  score that moved most (``score_<role>`` of the roles table) and the feature whose lift
  (``value - baseline`` of the features table) moved most, each with its change B - A; the heads
  whose role changed first, then the largest moves;
- :func:`effect_differences`: every matching head's effect on each metric in both runs and its
  change B - A. Like is compared with like: the ablation and estimator that run A's report shows
  (:func:`interp.report.summary.choose_effect`) are read from both runs. The heads whose effect
  changed most first, a change measured against the metric's largest effect in either run (so a
  loss in nats and a logit difference can be ranked together).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from interp.classify.mixture import MIXED, blend_key, component_roles
from interp.pipeline.results import RunTables
from interp.report import summary as S

KEYS = ["layer", "head"]
SCORE_PREFIX = "score_"


def role_differences(roles_a: pd.DataFrame, roles_b: pd.DataFrame) -> pd.DataFrame:
    """Heads whose primary role differs: layer, head, role_a, confidence_a, role_b, confidence_b,
    and evidence_a, evidence_b and components_a, components_b where both tables have the column
    (an older run has not). A head ``mixed`` in both runs differs when its blends hold other
    roles (their shares aside): the label is the same, what it says is not."""
    cols = ["layer", "head", "role", "confidence"]
    cols += [c for c in ("evidence", "components") if c in roles_a and c in roles_b]
    both = roles_a[cols].merge(roles_b[cols], on=KEYS, how="outer", suffixes=("_a", "_b"))
    differs = both["role_a"].fillna("(none)") != both["role_b"].fillna("(none)")
    if "components" in cols:
        blend_a, blend_b = (both[f"components_{r}"].map(_blend) for r in "ab")
        differs |= (both["role_a"] == MIXED) & (both["role_b"] == MIXED) & (blend_a != blend_b)
    return both[differs].sort_values(KEYS).reset_index(drop=True)


def _blend(components: object) -> str:
    """A components cell's roles, in catalogue order ('' where none)."""
    return blend_key(component_roles(components)) if isinstance(components, str) else ""


def largest_move(
    a: pd.DataFrame | None, b: pd.DataFrame | None, index: pd.MultiIndex, name: str
) -> pd.DataFrame:
    """Per head of ``index``: the column of ``a``/``b`` (one row per head, one column per item) whose
    value moved most between the runs, ``{name}_moved_most``, and its change B - A, ``{name}_change``
    (NaN where nothing is measured in both; no name where nothing moved)."""
    out = pd.DataFrame(
        {
            f"{name}_moved_most": pd.Series(None, index=index, dtype=object),
            f"{name}_change": np.nan,
        },
        index=index,
    )
    if a is None or b is None:
        return out
    shared = [c for c in a.columns if c in b.columns]
    moves = (b[shared].reindex(index) - a[shared].reindex(index)).astype(float)
    size = moves.abs()
    measured = size.notna().any(axis=1)
    if not shared or not measured.any():
        return out
    most = size[measured].fillna(-1.0).idxmax(axis=1)
    out.loc[measured, f"{name}_change"] = [moves.at[i, c] for i, c in most.items()]
    moved = measured & (size.max(axis=1) > 0)  # nothing moved: no item to name
    out.loc[moved, f"{name}_moved_most"] = most[moved[measured]]
    return out


def _scores(roles: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in roles.columns if c.startswith(SCORE_PREFIX)]
    frame = roles.groupby(KEYS)[cols].mean()
    return frame.rename(columns=lambda c: c[len(SCORE_PREFIX) :])


def _lifts(features: pd.DataFrame | None) -> pd.DataFrame | None:
    if features is None or features.empty:
        return None
    return (
        features.assign(lift=features["value"] - features["baseline"])
        .pivot_table(index=KEYS, columns="feature", values="lift", aggfunc="mean")
        .rename_axis(columns=None)
    )


def score_differences(a: RunTables, b: RunTables) -> pd.DataFrame:
    """Every head in both roles tables: layer, head, role_a, role_b, confidence_a, confidence_b,
    score_moved_most, score_change, feature_moved_most, feature_change (see the module docstring)."""
    cols = ["layer", "head", "role", "confidence"]
    if a.roles is None or b.roles is None:
        raise ValueError("both runs need a roles table")
    both = a.roles[cols].merge(b.roles[cols], on=KEYS, suffixes=("_a", "_b"))
    index = pd.MultiIndex.from_frame(both[KEYS])
    moved = pd.concat(
        [
            largest_move(_scores(a.roles), _scores(b.roles), index, "score"),
            largest_move(_lifts(a.features), _lifts(b.features), index, "feature"),
        ],
        axis=1,
    )
    both = pd.concat([both.reset_index(drop=True), moved.reset_index(drop=True)], axis=1)
    order = pd.DataFrame(
        {
            "role": both["role_a"] != both["role_b"],
            "score": both["score_change"].abs().fillna(-1),
            "feature": both["feature_change"].abs().fillna(-1),
        }
    )
    both = both.loc[
        order.sort_values(["role", "score", "feature"], ascending=False, kind="stable").index
    ]
    columns = [
        "layer",
        "head",
        "role_a",
        "role_b",
        "confidence_a",
        "confidence_b",
        "score_moved_most",
        "score_change",
        "feature_moved_most",
        "feature_change",
    ]
    return both[columns].reset_index(drop=True)


def _effects(run: RunTables, choice: S.EffectChoice) -> pd.DataFrame:
    effects = (
        run.effects
        if run.effects is not None
        else pd.DataFrame(columns=[*KEYS, "ablation", "estimator", "metric", "delta"])
    )
    rows = effects[
        (effects["ablation"] == choice.ablation) & (effects["estimator"] == choice.estimator)
    ]
    return rows.pivot_table(
        index=KEYS, columns="metric", values="delta", aggfunc="mean"
    ).rename_axis(columns=None)


def effect_differences(a: RunTables, b: RunTables) -> pd.DataFrame | None:
    """Every head with an effect in either run: layer, head, role_a, role_b, then per metric
    ``METRIC A``, ``METRIC B``, ``METRIC Δ`` (B - A), of the slice ``choose_effect(a.effects)``.
    None when run A has no effects."""
    choice = S.choose_effect(a.effects)
    if choice is None:
        return None
    ea, eb = _effects(a, choice), _effects(b, choice)
    metrics = S.metric_order(pd.Series([*ea.columns, *eb.columns]))
    index = ea.index.union(eb.index)
    ea, eb = ea.reindex(index=index, columns=metrics), eb.reindex(index=index, columns=metrics)
    out = pd.DataFrame(index=index)
    for run, letter in ((a, "a"), (b, "b")):
        out[f"role_{letter}"] = (
            run.roles.groupby(KEYS)["role"].last().reindex(index) if run.roles is not None else None
        )
    for m in metrics:
        out[f"{m} A"], out[f"{m} B"], out[f"{m} Δ"] = ea[m], eb[m], eb[m] - ea[m]
    scale = (
        pd.concat([ea.abs(), eb.abs()]).max().replace(0.0, np.nan)
    )  # each metric's largest effect
    relative = ((eb - ea).abs() / scale).max(axis=1).fillna(-1)
    out = out.loc[relative.sort_values(ascending=False, kind="stable").index]
    return out.reset_index()

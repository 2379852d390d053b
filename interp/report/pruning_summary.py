"""What the report says about pruning: the pandas side of its pruning figures, cards and tables.

Pure functions from the ablate stage's pruning curve (and the effects table, for each metric's
orientation) to the shares of heads that can go, the change for the worse at each step and per
role, and the sentences that say a metric got better; :mod:`interp.report.summary` gathers them
into the summary the HTML and the PDF read.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from interp.ablate.catalogue import BEHAVIOUR_METRICS, ORIENTATION
from interp.ablate.removable import (
    TOLERANCES,
    change_scale,
    effect_curve,
    improved,
    removable_fraction,
)
from interp.report.formatting import percent, small_percent


def worse_sign(metric: str, effects: pd.DataFrame | None) -> float:
    """+1 if a larger value of ``metric`` means a worse model (a loss), -1 if smaller is worse.

    Read from the effects table, whose delta is oriented so that positive means worse:
    sign(delta / (ablated - baseline)). Without effects rows, the metric's known orientation;
    for a metric the toolkit does not know, a larger value is taken as worse (right for losses).
    """
    if effects is not None and not effects.empty:
        rows = effects[effects["metric"] == metric]
        moved = rows["ablated"] - rows["baseline"]
        ratio = (rows["delta"] / moved)[moved.abs() > 1e-12].dropna()
        if not ratio.empty:
            return float(np.sign(ratio.median())) or 1.0
    return float(ORIENTATION.get(metric, 1))


def degradation(pruning: pd.DataFrame, metric: str, effects: pd.DataFrame | None) -> pd.DataFrame:
    """The metric's pruning steps in order, with ``worse`` = relative change for the worse vs step 0."""
    rows = _curve(pruning, metric)
    found = _worse_scale(rows, metric, effects)
    if found is None:
        return rows.assign(worse=pd.Series(dtype=float))
    start, sign, scale = found
    return rows.assign(worse=sign * (rows["value"] - start) / scale)


def prunable_table(
    pruning: pd.DataFrame | None,
    effects: pd.DataFrame | None,
    removable: dict[str, Any] | None = None,
) -> pd.DataFrame | None:
    """One row per pruning metric: metric; per tolerance, the prunable share ``within_1%`` and
    its 95% interval ``within_1%_low`` .. ``within_1%_high``; ``improved_by`` / ``improved_at``:
    how much better than intact the metric got, at its best step, and with what share of heads
    removed (NaN unless by more than the tightest tolerance).

    The interval is the ablate stage's bootstrap over held-out sequences (``removable``: its
    record in the manifest, metric -> "1%" -> share, ci_low, ci_high); it is used only where
    the stage's share is the table's (NaN for a run made under another rule)."""
    if pruning is None or pruning.empty:
        return None
    rows = []
    present = pruning["metric"].dropna().astype(str).unique()
    for metric in sorted(present, key=lambda m: (m not in BEHAVIOUR_METRICS, m)):
        row: dict[str, Any] = {"metric": metric}
        for tol in TOLERANCES:
            key = f"within_{tol:.0%}"
            row[key] = removable_fraction(pruning, metric, tol)
            stated = ((removable or {}).get(metric) or {}).get(f"{tol:.0%}") or {}
            same = isinstance(stated.get("share"), (int, float)) and math.isclose(
                stated["share"], row[key]
            )
            row[f"{key}_low"] = float(stated.get("ci_low", np.nan)) if same else np.nan
            row[f"{key}_high"] = float(stated.get("ci_high", np.nan)) if same else np.nan
        better = improved(pruning, metric, worse_sign(metric, effects), TOLERANCES[0])
        row["improved_by"], row["improved_at"] = (
            (better["by"], better["at"]) if better else (np.nan, np.nan)
        )
        rows.append(row)
    return pd.DataFrame(rows)


def headline(prunable: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """The row of "how much of the model can be removed": the KL divergence from the intact
    model (the user's corpus first, then prose), which only the intact model minimises, so a
    damaged model that grows confident in another way cannot look prunable; the first row
    where a run has no KL curve (an encoder: its embedding's distance from the intact one)."""
    rows = prunable or []
    for metric in BEHAVIOUR_METRICS:
        found = [r for r in rows if r["metric"] == metric]
        if found:
            return found[0]
    return rows[0] if rows else None


def improved_row(row: dict[str, Any]) -> bool:
    """Whether a prunable row's metric got better than the intact model as heads went."""
    return isinstance(row.get("improved_by"), float) and not math.isnan(row["improved_by"])


def improvement_notes(prunable: list[dict[str, Any]] | None) -> list[str]:
    """One plain sentence per metric that got better than the intact model as heads were removed."""
    return [
        f"{r['metric']} improves as heads are removed: {percent(r['improved_by'])} better than the intact model "
        f"with {small_percent(r['improved_at'])} of the heads removed. The prunable shares count only steps within "
        f"{' / '.join(f'±{t:.0%}' for t in TOLERANCES)} of the intact model, on either side."
        for r in prunable or []
        if improved_row(r)
    ]


def role_pruning_table(
    pruning: pd.DataFrame | None, effects: pd.DataFrame | None
) -> pd.DataFrame | None:
    """One row per (role, metric) whose heads the ablate stage removed all at once: role, heads,
    metric, and ``worse`` (relative change for the worse against the intact model, with its
    interval ``worse_low``..``worse_high``: the paired interval of the change, ``change_low``..
    ``change_high``, where the table has it; a run written before it has the interval of the
    ablated value only, which also holds the metric's spread between sequences). None for a
    table without role rows."""
    if pruning is None or pruning.empty or "removed_by" not in pruning.columns:
        return None
    by_role = pruning[pruning["removed_by"].fillna("").astype(str).str.startswith("role:")]
    scales = {m: _worse_scale(_curve(pruning, m), m, effects) for m in by_role["metric"].unique()}
    rows = []
    for r in by_role.itertuples():
        found = scales[r.metric]
        if found is None:
            continue
        start, sign, scale = found
        paired = pd.notna(getattr(r, "change_low", np.nan))
        changes = (r.change_low, r.change_high) if paired else (r.ci_low - start, r.ci_high - start)
        bounds = sorted(sign * v / scale for v in changes)
        rows.append(
            {
                "role": r.removed_by.removeprefix("role:"),
                "heads": int(r.heads_removed),
                "metric": r.metric,
                "worse": sign * (r.value - start) / scale,
                "worse_low": bounds[0],
                "worse_high": bounds[1],
            }
        )
    return pd.DataFrame(rows) if rows else None


def _curve(pruning: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The metric's pruning steps in order, steps without a value left out."""
    return effect_curve(pruning, metric).dropna(subset=["value"])


def _worse_scale(
    rows: pd.DataFrame, metric: str, effects: pd.DataFrame | None
) -> tuple[float, float, float] | None:
    """(the intact value of ``metric``, its worse sign, its change scale) from its curve
    ``rows`` (:func:`_curve`): a value v is ``sign * (v - start) / scale`` worse than intact;
    None for an empty curve."""
    if rows.empty:
        return None
    start = float(rows["value"].iloc[0])
    return start, worse_sign(metric, effects), change_scale(metric, start)

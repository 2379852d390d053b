"""What the run says about each head, as plain data for the explorer's page and notebooks
(:mod:`interp.report.explorer`): its roles and what decided them, its features, its weight
evidence, its composition partners and its effects. Pandas only, no torch."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from interp.pipeline.results import RunTables
from interp.report import summary as S
from interp.report.prompt_store import Head

N_FEATURES = (
    8  # features shown per head: those furthest above their baseline (with their raw share)
)
PARTNERS = 3  # composition partners shown per head: per kind it reads, and heads that read it


def head_name(layer: int, head: int) -> str:
    return f"L{layer}H{head}"


def page_number(value: Any, digits: int = 4) -> float | None:
    """A finite number rounded for the page, None for a missing one (JSON has no NaN)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return round(value, digits) if math.isfinite(value) else None


def page_text(value: Any) -> str | None:
    return (
        None
        if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA
        else str(value)
    )


def head_facts(run: RunTables) -> dict[str, dict[str, Any]]:
    """``"layer.head"`` -> role, confidence, second role, stability, sink mass, what was not
    measured, where it looks (a mixed head's components too), what it writes, what decided its
    role, its task role, the features furthest above their baseline (feature, raw share: how much
    of all its attention goes there, value, baseline), its weight evidence (score, value, null 2.5% and 97.5%), its composition
    partners (:func:`composition_partners`) and the effect per metric (exact where measured)."""
    facts: dict[str, dict[str, Any]] = {}

    def of(layer: Any, head: Any) -> dict[str, Any]:
        return facts.setdefault(f"{int(layer)}.{int(head)}", {})

    if run.roles is not None:
        for r in run.roles.to_dict("records"):
            of(r["layer"], r["head"]).update(
                role=page_text(r.get("role")),
                confidence=page_number(r.get("confidence")),
                second=page_text(r.get("second_role")),
                stability=page_number(r.get("stability")),
                sink=page_number(r.get("sink_mass")),
                unmeasured=page_text(r.get("unmeasured")),
                looks=page_text(r.get("looks")),
                components=page_text(r.get("components")),
                writes=page_text(r.get("writes")),
                evidence=page_text(r.get("evidence")),
                task_role=page_text(r.get("task_role")),
                task=page_text(r.get("task")),
                task_key=page_text(r.get("task_key")),
                partner=page_text(r.get("task_partner")),
                output_size=page_number(r.get("output_size")),
            )
    weights = run.tables.get("weights")
    if weights is not None and not weights.empty:
        for (layer, head), rows in weights.groupby(["layer", "head"], sort=False):
            of(layer, head)["weights"] = [
                [
                    str(r.score),
                    page_number(r.value),
                    page_number(r.null_low),
                    page_number(r.null_high),
                ]
                for r in rows.itertuples()
                if page_number(r.value) is not None
            ]
    for key, partners in composition_partners(run.tables.get("composition")).items():
        of(*key)["partners"] = partners
    if run.features is not None and not run.features.empty:
        feats = run.features.assign(excess=run.features["value"] - run.features["baseline"])
        feats = feats.sort_values("excess", ascending=False, kind="stable")
        for (layer, head), rows in feats.groupby(["layer", "head"], sort=False):
            of(layer, head)["features"] = [
                [
                    str(r.feature),
                    page_number(getattr(r, "raw", None)),
                    page_number(r.value),
                    page_number(r.baseline),
                ]
                for r in rows.head(N_FEATURES).itertuples()
            ]
    best = S.best_effects(run.effects)
    if best is not None:
        for (layer, head), rows in best.groupby(["layer", "head"], sort=False):
            of(layer, head)["effects"] = [
                [
                    str(r.metric),
                    page_number(r.delta),
                    page_number(r.ci_low),
                    page_number(r.ci_high),
                    str(r.estimator),
                ]
                for r in rows.itertuples()
            ]
    return facts


def composition_partners(
    composition: pd.DataFrame | None, top: int = PARTNERS
) -> dict[Head, list[list[Any]]]:
    """Per head, the heads it composes with above the random-pair null's 97.5% quantile, strongest
    first: the earlier heads it reads (``reads``, per kind, ``top`` of them) and the later heads that
    read it (``read by``, ``top`` in all), each ``[direction, kind, head, value, null_high]``."""
    if composition is None or composition.empty:
        return {}
    strong = composition[composition["value"] > composition["null_high"]]
    strong = strong.sort_values("value", ascending=False, kind="stable")
    out: dict[Head, list[list[Any]]] = {}
    for (layer, head), rows in strong.groupby(["layer", "head"], sort=False):
        for r in rows.groupby("kind", sort=False).head(top).itertuples():
            out.setdefault((int(layer), int(head)), []).append(
                [
                    "reads",
                    r.kind,
                    head_name(r.writer_layer, r.writer_head),
                    page_number(r.value),
                    page_number(r.null_high),
                ]
            )
    for (layer, head), rows in strong.groupby(["writer_layer", "writer_head"], sort=False):
        for r in rows.head(top).itertuples():
            out.setdefault((int(layer), int(head)), []).append(
                [
                    "read by",
                    r.kind,
                    head_name(r.layer, r.head),
                    page_number(r.value),
                    page_number(r.null_high),
                ]
            )
    return out

# Over 400 lines: every number the report states about a run as a whole (roles, effects, precision,
# provenance), so figures, HTML and PDF agree; its pruning numbers are in pruning_summary.py.
"""What the report says in numbers: the pandas side of the report stage.

Pure functions from a run's tables to small frames and a summary dict; plots, the HTML page and
the PDF all read these, so a figure and the sentence under it cannot disagree.

Which effect is "the" effect of a head: the effects table can hold several ablations (zero, mean,
resample), several metrics and two estimators (exact ablation; an estimate, by first-order attribution
or integrated gradients). The report shows one of them, chosen by :func:`choose_effect`: exact rows if the run has any, then the first
ablation and metric present in the preference orders below.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import pandas as pd

from interp.ablate.catalogue import ESTIMATORS
from interp.ablate.config import REL_PRECISION
from interp.ablate.selection import never_exact
from interp.ablate.settle import among_largest, positions_needed, rank_open
from interp.pipeline.results import RunTables
from interp.pipeline.stages import STAGES
from interp.report.pruning_summary import prunable_table, role_pruning_table
from interp.roles import ROLES, UNEXPLAINED, UNMEASURED

# Mean ablation keeps the head's average output, so it measures what the head adds on top of
# its typical contribution; zero ablation also removes that constant and overstates effects.
ABLATION_PREFERENCE = ("mean", "resample", "zero")
METRIC_PREFERENCE = (
    "loss_corpus",
    "loss_prose",
    "kl_corpus",
    "kl_prose",
    "embedding_cosine",
    "loss_repeated",
    "sv_logit_diff",
    "sv_prob",
    "retrieval_margin",
)


@dataclass(frozen=True)
class EffectChoice:
    """The (ablation, metric, estimator) slice of the effects table that the report shows."""

    ablation: str
    metric: str
    estimator: str

    @property
    def label(self) -> str:
        return f"{self.metric}, {self.ablation} ablation, {self.estimator}"


def _first_present(preference: tuple[str, ...], present: pd.Series) -> str:
    values = present.dropna().astype(str).unique().tolist()
    for name in preference:
        if name in values:
            return name
    return sorted(values)[0]


def choose_effect(effects: pd.DataFrame | None, exact_only: bool = False) -> EffectChoice | None:
    """Pick the effects slice to show: exact if present (else the estimates), then ablation, then metric."""
    if effects is None or effects.empty:
        return None
    rows = effects.dropna(subset=["delta"])
    exact = rows[rows["estimator"] == "exact"]
    if not exact.empty:
        rows, estimator = exact, "exact"
    elif exact_only:
        return None
    else:
        estimator = estimator_of(rows)
        rows = rows[rows["estimator"] == estimator]
    if rows.empty:
        return None
    ablation = _first_present(ABLATION_PREFERENCE, rows["ablation"])
    rows = rows[rows["ablation"] == ablation]
    return EffectChoice(ablation, _first_present(METRIC_PREFERENCE, rows["metric"]), estimator)


def estimator_of(effects: pd.DataFrame) -> str:
    """The estimator whose rows the report shows: AtP* where the table holds it (it was the
    stage's own estimator, and it sees through attention), else the first of ``ESTIMATORS`` (the
    default first) that it holds (a ``--top-k`` run holds several)."""
    estimated = effects.loc[effects["estimator"] != "exact", "estimator"]
    preferred = tuple(sorted(ESTIMATORS, key=lambda name: name != "atp_star"))
    return _first_present(preferred, estimated) if len(estimated) else ESTIMATORS[0]


def head_effects(effects: pd.DataFrame, choice: EffectChoice) -> pd.DataFrame:
    """One row per head of the chosen slice: layer, head, delta, delta_rel, ci_low, ci_high."""
    mask = (
        (effects["ablation"] == choice.ablation)
        & (effects["metric"] == choice.metric)
        & (effects["estimator"] == choice.estimator)
    )
    cols = ["delta", "delta_rel", "ci_low", "ci_high"]
    # Duplicate (layer, head) rows would come from a rerun appended to the table: average them.
    return (
        effects.loc[mask, ["layer", "head", *cols]]
        .groupby(["layer", "head"], as_index=False)[cols]
        .mean()
    )


def preferred_ablation(effects: pd.DataFrame | None) -> str | None:
    """The ablation the per-metric figures show: the first of ``ABLATION_PREFERENCE`` present."""
    if effects is None or effects.dropna(subset=["delta"]).empty:
        return None
    return _first_present(ABLATION_PREFERENCE, effects.dropna(subset=["delta"])["ablation"])


def best_effects(effects: pd.DataFrame | None) -> pd.DataFrame | None:
    """One row per (metric, layer, head) of the preferred ablation, exact where the head has an
    exact row, else the estimate: metric, layer, head, delta, ci_low, ci_high, method."""
    ablation = preferred_ablation(effects)
    if effects is None or ablation is None:
        return None
    rows = effects[(effects["ablation"] == ablation)].dropna(subset=["delta"])
    rows = rows.assign(rank=(rows["estimator"] != "exact").astype(int)).sort_values(
        ["metric", "layer", "head", "rank"]
    )
    cols = ["metric", "layer", "head", "delta", "ci_low", "ci_high", "estimator"]
    return rows.drop_duplicates(["metric", "layer", "head"], keep="first")[cols].reset_index(
        drop=True
    )


def audit_pairs(effects: pd.DataFrame | None) -> pd.DataFrame | None:
    """Heads with both an exact effect and an estimate (preferred ablation): metric, layer, head,
    estimate, exact, and ``selected`` (top_k / audit / widened / all) where the table has it. None when no
    head has both."""
    ablation = preferred_ablation(effects)
    if effects is None or ablation is None:
        return None
    rows = effects[effects["ablation"] == ablation].dropna(subset=["delta"])
    keys = ["metric", "layer", "head"]
    wide = rows.pivot_table(index=keys, columns="estimator", values="delta", aggfunc="mean")
    estimator = estimator_of(rows) if len(rows) else ESTIMATORS[0]
    if not {"exact", estimator} <= set(wide.columns):
        return None
    pairs = (
        wide.dropna(subset=["exact", estimator])
        .reset_index()
        .rename(columns={estimator: "estimate"})
    )
    if pairs.empty:
        return None
    if "selected" in rows.columns:
        why = rows[rows["estimator"] == "exact"].drop_duplicates(keys).set_index(keys)["selected"]
        return pairs[[*keys, "estimate", "exact"]].join(why, on=keys)
    return pairs[[*keys, "estimate", "exact"]]


def rank_agreement(pairs: pd.DataFrame) -> float:
    """Spearman correlation of estimate and exact effect (NaN under 3 heads or a constant column)."""
    if len(pairs) < 3:
        return float("nan")
    return float(pairs["estimate"].rank().corr(pairs["exact"].rank()))


# Sources whose name is a path on the machine that made the run (interp.model.load).
PATH_SOURCES = ("gguf", "hf-dir")


def _is_path(name: str, source: object) -> bool:
    return (
        source in PATH_SOURCES
        or name.startswith(("/", "./", "../", "~"))
        or name.lower().endswith(".gguf")
    )


def model_name(manifest: dict[str, Any]) -> str:
    """The model a run was made with, for titles: its name as the manifest records it (a
    packaged, Hub or Python-given name; never the run's folder), or, for a model loaded from a
    file or folder, that file's stem or the folder's name (the full path is
    :func:`model_path`)."""
    facts = manifest.get("model") or {}
    name = str(facts.get("name") or "")
    if not name:
        return "an unnamed model"
    if not _is_path(name, facts.get("source")):
        return name
    path = PurePosixPath(name.replace("\\", "/").rstrip("/"))
    return (path.stem if path.suffix.lower() == ".gguf" else path.name) or name


def model_path(manifest: dict[str, Any]) -> str | None:
    """The full path of a model loaded from a file or folder (the one a rerun loads), else None."""
    facts = manifest.get("model") or {}
    name = str(facts.get("name") or "")
    if not name or not _is_path(name, facts.get("source")):
        return None
    return str((facts.get("spec") or {}).get("name") or name)


def head_shape(manifest: dict[str, Any], *frames: pd.DataFrame | None) -> tuple[int, int]:
    """(n_layers, n_heads): from the manifest's model facts, else from the largest indices seen."""
    facts = manifest.get("model") or {}
    n_layers, n_heads = facts.get("n_layers"), facts.get("n_heads")
    if isinstance(n_layers, int) and isinstance(n_heads, int) and n_layers > 0 and n_heads > 0:
        return n_layers, n_heads
    present = [
        f for f in frames if f is not None and not f.empty and {"layer", "head"} <= set(f.columns)
    ]
    if not present:
        return 0, 0
    return (
        max(int(f["layer"].max()) for f in present) + 1,
        max(int(f["head"].max()) for f in present) + 1,
    )


def role_order(roles: pd.Series) -> list[str]:
    """Roles present, in catalogue order; names outside the catalogue go last, sorted."""
    present = set(roles.dropna().astype(str))
    return [r for r in ROLES if r in present] + sorted(present - set(ROLES))


def role_counts(roles: pd.DataFrame) -> pd.DataFrame:
    """role, heads, share: how many heads carry each primary role, in catalogue order."""
    counts = roles["role"].value_counts()
    order = role_order(roles["role"])
    frame = pd.DataFrame({"role": order, "heads": [int(counts[r]) for r in order]})
    frame["share"] = frame["heads"] / max(len(roles), 1)
    return frame


def unmeasured_heads(effects: pd.DataFrame | None, n_layers: int, n_heads: int) -> list[str] | None:
    """The heads the effects table has no exact row for (``L{layer}H{head}``): their effects are
    estimates only. None without an effects table or a known head shape."""
    if effects is None or effects.empty or not n_layers or not n_heads:
        return None
    return never_exact(effects, n_layers, n_heads)


def estimate_misses(effects: pd.DataFrame | None) -> list[str]:
    """Estimate rows whose interval excludes the same head's exact effect (``vs_exact`` outside),
    as ``L{layer}H{head} metric (estimator)``: an estimate's interval covers sampling only."""
    if effects is None or "vs_exact" not in effects.columns:
        return []
    rows = effects[effects["vs_exact"] == "outside"]
    return [
        f"L{int(r.layer)}H{int(r.head)} {r.metric} ({r.estimator}, {r.ablation})"
        for r in rows.itertuples()
    ]


def precision_counts(
    effects: pd.DataFrame | None, rel: float = REL_PRECISION
) -> list[dict[str, Any]]:
    """Per (ablation, metric) of the exact rows: how many effects met the precision rule and how
    many the rounds, the time budget or the end of an eval set left open (the effects table's
    ``precision``); where the rounds or the budget left an effect the rule holds to its
    precision too wide, ``more_positions``: the most times the positions it rests on that one of
    them needs (interp.ablate.settle.positions_needed, ``rel`` the run's precision)."""
    if effects is None or "precision" not in effects.columns:
        return []
    exact = effects[(effects["estimator"] == "exact") & effects["precision"].notna()]
    counts = exact.groupby(["ablation", "metric"])["precision"].value_counts().unstack(fill_value=0)
    needed = positions_needed(exact, rel).where(exact["precision"].isin(["rounds", "budget"]))
    most = needed.groupby([exact["ablation"], exact["metric"]]).max()
    out = []
    for (kind, metric), row in counts.iterrows():
        entry = {"ablation": kind, "metric": metric, **{k: int(v) for k, v in row.items()}}
        if pd.notna(most.get((kind, metric))):
            entry["more_positions"] = float(most[(kind, metric)])
        out.append(entry)
    return out


def open_ranks(effects: pd.DataFrame | None) -> list[dict[str, Any]]:
    """Per (ablation, metric) whose exact intervals leave open which heads are its ``RANK``
    largest effects (interp.ablate.settle.rank_open): ``inside``, the heads among those largest
    whose place is open, and ``outside``, the heads beyond them whose interval reaches in, each
    as ``L{layer}H{head}``, largest |effect| first. Metrics whose few largest are apart are left
    out."""
    if effects is None or effects.empty:
        return []
    exact = effects[effects["estimator"] == "exact"]
    rows = exact[rank_open(exact)].assign(inside=among_largest(exact))
    out = []
    for (kind, metric), part in rows.groupby(["ablation", "metric"], sort=False):
        part = part.loc[part["delta"].abs().sort_values(ascending=False, kind="stable").index]
        names = [f"L{int(r.layer)}H{int(r.head)}" for r in part.itertuples()]
        inside = part["inside"].tolist()
        out.append(
            {
                "ablation": kind,
                "metric": metric,
                "inside": [n for n, i in zip(names, inside) if i],
                "outside": [n for n, i in zip(names, inside) if not i],
            }
        )
    return out


def metric_order(metrics: pd.Series) -> list[str]:
    """Metrics present, in ``METRIC_PREFERENCE`` order; others after them, sorted."""
    present = set(metrics.dropna().astype(str))
    return [m for m in METRIC_PREFERENCE if m in present] + sorted(present - set(METRIC_PREFERENCE))


def effect_column(metric: str) -> str:
    """The heads table's column of one metric's effect."""
    return f"Δ {metric}"


def head_table(roles: pd.DataFrame | None, effects: pd.DataFrame | None) -> pd.DataFrame | None:
    """One row per head: its roles, and its exact effect on every metric (``Δ METRIC``, one
    column each, of the ablation :func:`choose_effect` picks) when the run has exact effects.
    A head of one role can matter for one metric only (a previous-token head for repeated text),
    so no single metric stands for all."""
    base_cols = [
        "layer", "head", "role", "confidence", "second_role", "components", "stability",
        "sink_mass",
    ]  # fmt: skip
    table = (
        roles[[c for c in base_cols if c in roles.columns]].copy() if roles is not None else None
    )
    choice = choose_effect(effects, exact_only=True)
    if choice is not None and effects is not None:
        rows = effects[
            (effects["ablation"] == choice.ablation) & (effects["estimator"] == choice.estimator)
        ]
        wide = rows.pivot_table(
            index=["layer", "head"], columns="metric", values="delta", aggfunc="mean"
        ).reindex(columns=metric_order(rows["metric"]))
        wide = wide.rename(columns=effect_column).rename_axis(columns=None).reset_index()
        table = wide if table is None else table.merge(wide, on=["layer", "head"], how="left")
    if table is None or table.empty:
        return None
    return table.sort_values(["layer", "head"]).reset_index(drop=True)


def run_precision(manifest: dict) -> float:
    """The relative precision the run's exact rounds asked for (``--precision``)."""
    ablate = (manifest.get("stages") or {}).get("ablate") or {}
    config = ablate.get("resolved_config") or ablate.get("config") or {}
    value = config.get("precision")
    return float(value) if isinstance(value, int | float) else REL_PRECISION


def report_summary(run: RunTables) -> dict[str, Any]:
    """Everything the report's summary section shows, as plain data (what the PDF prints too)."""
    manifest = run.manifest
    n_layers, n_heads = head_shape(manifest, run.roles, run.features, run.effects)
    summary: dict[str, Any] = {
        "run": run.path.name,
        "model_name": model_name(manifest),
        "model_path": model_path(manifest),
        "model": {**manifest["model"], "name": model_name(manifest)}
        if manifest.get("model")
        else {},
        "shape": (n_layers, n_heads),
        "corpora": dict(manifest.get("corpora") or {}),
        "not_run": not_run(manifest),
        "provenance": dict(manifest.get("provenance") or {}),
        "stages": dict(manifest.get("stages") or {}),
        "role_counts": None,
        "share_unexplained": None,
        "prunable": None,
        "role_pruning": None,
        "effect": None,
        "exact_effect": None,
        "never_exact": unmeasured_heads(run.effects, n_layers, n_heads),
        "estimate_misses": estimate_misses(run.effects),
        "precision": precision_counts(run.effects, run_precision(manifest)),
        "precision_asked": run_precision(manifest),
        "open_ranks": open_ranks(run.effects),
        "measurement_notes": measurement_notes(manifest, run.roles),
        "estimator_reads": estimator_reads(manifest),
    }
    if run.roles is not None and not run.roles.empty:
        counts = role_counts(run.roles)
        summary["role_counts"] = counts.to_dict("records")
        summary["share_unexplained"] = float((run.roles["role"] == UNEXPLAINED).mean())
    ablate = (manifest.get("stages") or {}).get("ablate") or {}
    prunable = prunable_table(run.pruning, run.effects, ablate.get("removable"))
    if prunable is not None:
        summary["prunable"] = prunable.to_dict("records")
    by_role = role_pruning_table(run.pruning, run.effects)
    if by_role is not None:
        summary["role_pruning"] = by_role.to_dict("records")
    shown, exact = choose_effect(run.effects), choose_effect(run.effects, exact_only=True)
    summary["effect"] = shown.label if shown else None
    summary["exact_effect"] = exact.label if exact else None
    summary["exact_ablation"] = exact.ablation if exact else None
    return summary


def not_run(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The registered stages that write tables and have not run on this run: stage, tables."""
    ran = manifest.get("stages") or {}
    return [
        {"stage": st.name, "tables": list(st.tables)}
        for st in STAGES
        if st.tables and st.name not in ran
    ]


def measurement_notes(manifest: dict[str, Any], roles: pd.DataFrame | None) -> list[str]:
    """What the run did not measure: each probe suite the collect stage skipped, and why (the
    manifest's ``stages.collect.skipped_suites``); the classifier inputs left unmeasured and how
    many heads they leave ``unmeasured`` (the roles table's ``unmeasured``)."""
    skipped = ((manifest.get("stages") or {}).get("collect") or {}).get("skipped_suites") or {}
    notes = [
        f"Probe suite {suite} was skipped: {why}. The features it feeds were not measured."
        for suite, why in skipped.items()
    ]
    if roles is not None and "unmeasured" in roles.columns and roles["unmeasured"].notna().any():
        missing = roles["unmeasured"].dropna().value_counts().index[0]
        n = int((roles["role"] == UNMEASURED).sum())
        notes.append(
            f"Not measured, so imputed as no preference: {missing.replace(' ', ', ')}. {n} of {len(roles)} heads "
            f"whose role these could decide are marked {UNMEASURED} (no role, no confidence); a head whose role "
            f"rests on a measured feature keeps it (the roles table's unmeasured column names what was not)."
        )
    return notes


def estimator_reads(manifest: dict[str, Any]) -> str | None:
    """One line saying what the estimates rest on, where the estimator read more than the exact
    sweep's corpus holds on some metric (``--top-k``, ``--quick``: the manifest's
    ``stages.ablate.estimator_corpus``); None elsewhere (a full sweep's estimator reads the first
    of the sequences its rounds read)."""
    ablate = (manifest.get("stages") or {}).get("ablate") or {}
    wide, sweep = ablate.get("estimator_corpus") or {}, ablate.get("corpus") or {}
    more = [
        name
        for name, facts in wide.items()
        if facts["n_scored"] > (sweep.get(name) or {}).get("n_scored", 0)
    ]
    if not more:
        return None
    parts = ", ".join(
        f"{name} {facts['n_scored']} ({(sweep.get(name) or {}).get('n_scored', 0)})"
        for name, facts in wide.items()
    )
    return (
        f"The estimates that chose the exactly-ablated heads read more sequences than the exact sweep: scored "
        f"positions on each metric's sequences, the exact sweep's in brackets: {parts}."
    )

"""The report sections the built-in stages declare (:class:`~interp.pipeline.contract.ReportSection`),
the report's own closing ones (every head, the provenance) among them.

Each is a function ``(run, figures) -> Section | None`` of a run's tables alone: it draws its
figures into the folder ``figures`` and returns its section of the content model
(:mod:`interp.report.content`), or None when the run has nothing for it (the stage that writes its
tables has not run). The report lays them out in the order the stages declare
(:func:`interp.report.document.section_order`). Pure pandas and matplotlib: no torch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from interp.classify import clusters as K
from interp.pipeline.results import RunTables
from interp.report import content as C
from interp.report import effect_plots as E
from interp.report import feature_plots, plots
from interp.report import formatting as F
from interp.report import summary as S
from interp.report.exemplar_plots import exemplars_of, plot_exemplars
from interp.report.figures import SavedFigure
from interp.report.syntax_section import classifier_corpora, syntax_section
from interp.report.task_attention import task_attention_section
from interp.roles import UNEXPLAINED


def blocks(*saved: SavedFigure | list[SavedFigure] | None) -> list[C.FigureBlock]:
    """The figures drawn, as blocks of the page (a plot that had nothing to draw gave None)."""
    flat: list[SavedFigure] = []
    for item in saved:
        flat.extend(item if isinstance(item, list) else [item] if item is not None else [])
    return [C.figure(f) for f in flat]


def _shape(run: RunTables) -> tuple[int, int]:
    return S.head_shape(run.manifest, run.roles, run.features, run.effects)


def roles(run: RunTables, figures: Path) -> C.Section | None:
    """The role map, the role counts per layer and the sink mass per layer (classify)."""
    shape = _shape(run)
    return C.section(
        "roles",
        "Roles",
        *blocks(
            plots.plot_role_map(run.roles, figures, shape),
            plots.plot_role_counts(run.roles, figures, shape),
            plots.plot_sink_by_layer(run.roles, figures, shape),
        ),
    )


def features(run: RunTables, figures: Path) -> C.Section | None:
    """Every feature's value per head, as heatmaps (collect)."""
    causal = (run.manifest.get("model") or {}).get("causal")
    drawn = feature_plots.plot_feature_heatmaps(run.features, figures, _shape(run), causal)
    return C.section("features", "Features", *blocks(drawn))


def syntax(run: RunTables, figures: Path) -> C.Section | None:
    """Per relation, the best head against the rules that need no syntax, and the relation maps
    (collect)."""
    table = run.tables.get("syntax")
    corpora = classifier_corpora(table, run.manifest.get("stages"))
    maps = feature_plots.plot_relation_heatmaps(run.features, figures, _shape(run), corpora)
    return syntax_section(table, run.features, run.manifest.get("stages"), blocks(maps))


def exemplars(run: RunTables, figures: Path) -> C.Section | None:
    """For each role, its strongest head's pattern on a stored probe (collect's exemplars)."""
    found, note = exemplars_of(run.path)
    drawn = blocks(plot_exemplars(found, run.roles, run.features, figures))
    return C.section(
        "exemplars",
        "Exemplar attention patterns",
        C.Text(note, "note") if note else None,
        C.Text(
            "For each role, the head that fits it best, on a stored probe of the suite its feature reads. "
            "Every head's pattern on these probes is in exemplars.npz (interp.collect.exemplars.read_exemplars)."
        )
        if drawn
        else None,
        C.group(*drawn, layout="grid"),
    )


def clusters(run: RunTables, figures: Path) -> C.Section | None:
    """The groups of unexplained heads, and whether they separate at all (classify)."""
    table = run.clusters
    if table is None or table.empty:
        return None
    unexplained = int((run.roles["role"] == UNEXPLAINED).sum()) if run.roles is not None else 0
    return C.section(
        "clusters",
        "Unexplained-head clusters",
        C.Text(
            "Heads no archetype explains, grouped by their attention profiles; each group is described by the "
            "features that set it apart from the other unexplained heads. silhouette: how much nearer the group's "
            "heads are to one another than to the next group (1: far apart, 0 or less: no gap). Every head's "
            "group is in the clusters table."
        ),
        C.Text(K.verdict(table, unexplained or None), "p" if K.separates(table) else "note"),
        C.table(
            K.overview(table),
            "cluster-table",
            filter="Filter clusters:",
            wrap_columns=("description", "members"),
        ),
    )


def effects(run: RunTables, figures: Path) -> C.Section | None:
    """Each head's effect per metric, against its role and its role score, and the estimators'
    audit (ablate)."""
    return C.section(
        "effects",
        "Causal effects",
        *blocks(
            E.plot_effect_maps(run.effects, figures, _shape(run)),
            E.plot_effect_vs_role(run.effects, run.roles, figures),
            E.plot_estimator_audit(run.effects, run.roles, figures),
            E.plot_score_vs_effect(run.roles, run.effects, figures),
        ),
    )


def pruning(run: RunTables, figures: Path) -> C.Section | None:
    """The pruning curves (ablate)."""
    return C.section(
        "pruning", "Pruning", *blocks(E.plot_pruning(run.pruning, figures, run.effects))
    )


def task_attention(run: RunTables, figures: Path) -> C.Section | None:
    """Which heads attend from one of a task's named positions to another (ablate)."""
    return task_attention_section(run.tables.get("task_attention"))


def heads(run: RunTables, figures: Path) -> C.Section | None:
    """One row per head: its roles and its exact effect on every metric (the report's own)."""
    table = S.head_table(run.roles, run.effects)
    if table is None:
        return None
    exact = S.choose_effect(run.effects, exact_only=True)
    effect = (
        f"; Δ METRIC: the head's exact effect on each metric ({exact.ablation} ablation; positive = "
        "the model gets worse without the head; blank: not ablated exactly, its estimate is in the explorer)"
        if exact
        else ""
    )
    return C.section(
        "heads",
        "Heads",
        C.Text(f"One row per head{effect}. Click a header to sort."),
        C.table(table, "head-table", filter="Filter heads:"),
    )


def provenance(run: RunTables, figures: Path) -> C.Section | None:
    """Where the run comes from: model, versions, seed, each stage's time and config (the
    report's own)."""
    prov = dict(run.manifest.get("provenance") or {})
    keys = ("created", "seed", "git_hash", "machine", "python")
    path = S.model_path(run.manifest)
    pairs: list[tuple[str, object]] = [("model", path)] if path else []  # the title shows its stem
    pairs += [(k, F.fmt(prov.get(k)) or "unknown") for k in keys if k in prov]
    pairs += [
        (k, v)
        for k, v in prov.items()
        if k not in keys and k != "versions" and not isinstance(v, (dict, list))
    ]
    versions = [(k, F.fmt(v) or "not installed") for k, v in (prov.get("versions") or {}).items()]
    stages = dict(run.manifest.get("stages") or {})
    stage_rows = pd.DataFrame(
        [
            {
                "stage": name,
                "seconds": (info or {}).get("seconds"),
                "finished": (info or {}).get("finished"),
            }
            for name, info in stages.items()
        ]
    )
    configs = [
        C.Code(f"{name} config", json.dumps((info or {}).get("config"), indent=1, default=str))
        for name, info in stages.items()
    ]
    return C.section(
        "provenance",
        "Provenance",
        C.key_values(pairs) if pairs else C.Text("The manifest records no provenance.", "muted"),
        C.titled("Package versions", C.key_values(versions)) if versions else None,
        C.titled("Stages", C.table(stage_rows, "stages"), *configs) if stages else None,
    )

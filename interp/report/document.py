"""What the report says, section by section: a run's tables and figures -> a content model.

:func:`report_document` builds the report of one run, :func:`compare_document` the comparison
of two; both are rendered by the same HTML and PDF renderers (``html.py``, ``pdf.py``). Every
sentence that states a number reads it from :mod:`interp.report.summary`, as the figures do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeGuard

import pandas as pd

from interp.ablate.catalogue import BEHAVIOUR_METRICS
from interp.pipeline.contract import ReportSection, Stage
from interp.pipeline.results import RunTables
from interp.report import content as C
from interp.report import formatting as F
from interp.report import pruning_summary as P
from interp.report import summary as S
from interp.report.drawing import draw_sections
from interp.report.notes import summary_notes

SUMMARY = "summary"  # the report's own first section: the stages' sections follow it

MODEL_FACTS = (
    "name",
    "source",
    "causal",
    "n_layers",
    "n_heads",
    "n_kv_heads",
    "d_head",
    "n_ctx",
    "bos_policy",
    "dtype",
    "device",
)


def _cards(summary: dict[str, Any]) -> C.Cards:
    n_layers, n_heads = summary["shape"]
    cards = [C.Card(f"{n_layers} × {n_heads}", "layers × heads")]
    if summary["role_counts"]:
        named = sum(r["heads"] for r in summary["role_counts"] if r["role"] != "unexplained")
        cards.append(C.Card(str(named), "heads with a named role"))
        cards.append(C.Card(F.percent(summary["share_unexplained"]), "share unexplained"))
    top = P.headline(summary["prunable"])
    if top is not None:
        kept = _kept_label(top["metric"])
        cards.append(C.Card(f"{F.percent(top['within_1%'])} / {F.percent(top['within_5%'])}", kept))
    for row in summary["prunable"] or []:
        if row is top:
            continue
        better = " (improves as heads go: see below)" if P.improved_row(row) else ""
        cards.append(
            C.Card(
                f"{F.percent(row['within_1%'])} / {F.percent(row['within_5%'])}",
                f"prunable within 1% / 5% of {row['metric']}{better}",
            )
        )
    return C.Cards(tuple(cards))


def _kept_label(metric: str) -> str:
    """The headline card's caption: how much can be removed while the behaviour is kept."""
    if metric.startswith("kl_"):
        where = "your corpus" if metric == "kl_corpus" else "prose"
        return (
            f"of heads removable keeping the behaviour: KL from the intact model within 0.01 / 0.05 "
            f"nats per token ({metric}, {where})"
        )
    return f"prunable within 1% / 5% of {metric}"


def _prunable_table(prunable: pd.DataFrame) -> C.Table:
    """metric, then per tolerance the prunable share with its interval in one cell."""
    keys = [f"within_{t:.0%}" for t in P.TOLERANCES]
    frame = prunable[["metric", *(f"{k}{end}" for k in keys for end in ("", "_low", "_high"))]]
    frame = frame.rename(columns=lambda c: c.replace("within_", "within "))
    return C.table(
        frame,
        "prunable",
        percent_columns=tuple(c for c in frame.columns if c != "metric"),
        intervals={
            k.replace("_", " "): (f"{k.replace('_', ' ')}_low", f"{k.replace('_', ' ')}_high")
            for k in keys
        },
    )


def role_pruning_wide(by_role: pd.DataFrame) -> pd.DataFrame:
    """One row per role (catalogue order): role, heads, and per metric how much worse it gets
    without the role's heads (columns METRIC, METRIC low, METRIC high)."""
    metrics = list(dict.fromkeys(by_role["metric"]))
    wide = by_role.set_index(["role", "heads", "metric"])[
        ["worse", "worse_low", "worse_high"]
    ].unstack("metric")
    out = pd.DataFrame(index=wide.index)
    for m in metrics:
        out[m], out[f"{m} low"], out[f"{m} high"] = (
            wide[(v, m)] for v in ("worse", "worse_low", "worse_high")
        )
    out = out.reset_index()
    order = {r: i for i, r in enumerate(S.role_order(out["role"]))}
    return out.sort_values("role", key=lambda r: r.map(order), kind="stable").reset_index(drop=True)


def _role_pruning_table(by_role: pd.DataFrame) -> C.Table:
    """The role-pruning rows, one column per metric: a percentage of the intact value, or, for a
    metric that compares with the intact model (a KL divergence), its absolute change."""
    wide = role_pruning_wide(by_role)
    metrics = [c for c in wide.columns[2:] if not c.endswith((" low", " high"))]
    relative = [m for m in metrics if m not in BEHAVIOUR_METRICS]
    return C.table(
        wide,
        "role-pruning",
        percent_columns=tuple(c for m in relative for c in (m, f"{m} low", f"{m} high")),
        intervals={m: (f"{m} low", f"{m} high") for m in metrics},
    )


def _summary_section(summary: dict[str, Any]) -> C.Section | None:
    """Cards and notes, then the summary tables, two to a row where the page has room: each fits
    its column (intervals share their value's cell), so none scrolls sideways at laptop width;
    the per-role table, one column per metric, gets a row of its own."""
    counts = pd.DataFrame(summary["role_counts"]) if summary["role_counts"] else None
    prunable = pd.DataFrame(summary["prunable"]) if summary["prunable"] else None
    by_role = pd.DataFrame(summary["role_pruning"]) if summary.get("role_pruning") else None
    corpora = [
        {
            "suite": suite,
            "sequences": (info or {}).get("n_sequences"),
            "tokens": (info or {}).get("n_tokens"),
            "hash": (info or {}).get("hash"),
        }
        for suite, info in summary["corpora"].items()
    ]
    model = summary["model"]
    roles_and_pruning = C.group(
        C.titled(
            "Heads per primary role",
            C.table(counts, "role-counts", percent_columns=("share",))
            if counts is not None
            else None,
        ),
        C.titled(
            "How much can be pruned",
            C.Text(
                "Largest share of heads removed (least important first) while the metric stays within 1% "
                "or 5% of the intact model on either side (a KL divergence from it: within 0.01 or 0.05 nats per "
                "token), measured on held-out sequences, not the ones that ranked the heads; in parentheses: its "
                "95% interval over resampled sequences."
            )
            if prunable is not None
            else None,
            _prunable_table(prunable) if prunable is not None else None,
        ),
    )
    removing = C.titled(
        "Removing one role's heads",
        C.Text(
            "Every head of one primary role ablated at once, on the held-out sequences: how much worse each metric "
            "gets, relative to the intact model (negative: better), with its 95% interval in parentheses (the "
            "same sequences resampled with and without the heads, so the interval is of the change, not of the "
            "metric's spread between sequences); a metric "
            "that compares with the intact model, which is 0 there (a KL divergence, the embedding's cosine "
            "distance), as its absolute change (KL: nats per token)."
        )
        if by_role is not None
        else None,
        _role_pruning_table(by_role) if by_role is not None else None,
    )
    facts = C.group(
        C.titled(
            "Model",
            C.key_values([(k, model[k]) for k in MODEL_FACTS if k in model]) if model else None,
        ),
        C.titled("Probe corpora", C.table(pd.DataFrame(corpora), "corpora") if corpora else None),
    )
    return C.section(
        SUMMARY,
        "Summary",
        _cards(summary),
        *summary_notes(summary),
        roles_and_pruning,
        removing,
        facts,
    )


def section_order(stages: list[Stage]) -> list[ReportSection]:
    """The stages' report sections in page order, after the summary. A section follows the one
    its ``after`` names, else its stage's previous section; a stage's first section without
    ``after`` goes at the end, in registry order. Sections that follow the same one come in
    registry order, each with its own followers before the next."""
    declared = [s for st in stages for s in st.sections]
    ids = {s.id for s in declared} | {SUMMARY}
    follows: dict[str | None, list[ReportSection]] = {}  # None: the end
    for st in stages:
        previous = None
        for s in st.sections:
            follows.setdefault(s.after if s.after in ids else previous, []).append(s)
            previous = s.id
    ordered: list[ReportSection] = []

    def visit(parent: str | None) -> None:
        for s in follows.get(parent, []):
            if s not in ordered:
                ordered.append(s)
                visit(s.id)

    visit(SUMMARY)
    visit(None)
    return ordered + [s for s in declared if s not in ordered]  # a loop of afters: at the end


def stage_sections(
    run: RunTables, figures: Path, stages: list[Stage], processes: int = 1
) -> list[C.Section]:
    """Every stage's sections that have something to show for this run, in page order; each
    draws its figures into ``figures``, up to ``processes`` at once (:mod:`interp.report.drawing`)."""
    builders = [s.builder() for s in section_order(stages)]
    return [s for s in draw_sections(builders, run, figures, processes) if s is not None]


def report_document(
    run: RunTables, summary: dict[str, Any], sections: list[C.Section]
) -> C.Document:
    """The report of one run: its summary, then the stages' ``sections``."""
    name = summary["model_name"]
    created = summary["provenance"].get("created")
    lead = (
        f"Run {summary['run']}"
        + (f", created {created}" if created else "")
        + ". What each head does (its role) "
        "and how much the model needs it (its ablation effect).",
    )
    every = [_summary_section(summary), *sections]
    return C.Document(
        f"Attention heads of {name}",
        f"{name} · attention heads · {summary['run']}",
        lead,
        tuple(s for s in every if s is not None),
    )


# --- two runs side by side ---------------------------------------------------------------------


def _present(frame: pd.DataFrame | None) -> TypeGuard[pd.DataFrame]:
    return frame is not None and not frame.empty


def _spaced(frame: pd.DataFrame) -> pd.DataFrame:
    """Column names that wrap in a header: score_moved_most -> score moved most, role_a -> role A."""

    def name(column: str) -> str:
        stem, _, side = column.rpartition("_")
        return (
            f"{stem.replace('_', ' ')} {side.upper()}"
            if side in ("a", "b") and stem
            else column.replace("_", " ")
        )

    return frame.rename(columns=lambda c: name(c) if " " not in c else c)


def compare_document(
    label_a: str,
    label_b: str,
    maps: list[C.FigureBlock],
    notes: list[str],
    diff: pd.DataFrame | None,
    n_heads: int,
    scores: pd.DataFrame | None = None,
    effects: pd.DataFrame | None = None,
    effect_label: str | None = None,
) -> C.Document:
    """Two runs' role maps, the heads whose primary role differs (``diff``), and what changed for
    every matching head: ``scores`` and ``effects`` (:mod:`interp.report.compare`)."""
    counted = (
        f"Heads whose primary role differs (mixed in both: whose blend does): {len(diff)} of {n_heads}."
        if diff is not None
        else None
    )
    sections = [
        C.section(
            "maps",
            "Role maps",
            *[C.Text(n, "note") for n in notes],
            C.Text(counted) if counted else None,
            C.group(*maps, layout="cols"),
        ),
        C.section(
            "differences",
            "Heads whose primary role differs",
            C.table(diff, "diff-table", role_columns=("role_a", "role_b"), filter="Filter heads:")
            if _present(diff)
            else None,
        ),
        C.section(
            "changes",
            "Matching heads: role scores and features",
            C.Text(
                "Every head in both runs: its role and confidence in each, the role score (the classifier's "
                "probability of a role) that moved most and the feature whose lift (value - baseline) moved "
                "most, each with its change B - A; heads whose role changed first, then the largest moves."
            )
            if _present(scores)
            else None,
            C.table(
                _spaced(scores),
                "changes-table",
                role_columns=("role A", "role B"),
                filter="Filter heads:",
            )
            if _present(scores)
            else None,
        ),
        C.section(
            "effect-changes",
            "Matching heads: effects",
            C.Text(
                f"Every head's effect on each metric in run A and its change B - A ({effect_label}, the slice "
                "run A's report shows, read from both runs; positive = the model gets worse without the head; "
                "blank: not measured that way in that run); role: run A's; the heads whose effect changed "
                "most, against the metric's largest effect, first. Run B's effects: "
                "interp.report.compare.effect_differences."
            )
            if _present(effects)
            else None,
            C.table(
                _spaced(
                    effects[[c for c in effects.columns if c != "role_b" and not c.endswith(" B")]]
                ),
                "effect-changes-table",
                role_columns=("role A",),
                filter="Filter heads:",
            )
            if _present(effects)
            else None,
        ),
    ]
    return C.Document(
        "Role maps compared",
        f"Role maps: {label_a} vs {label_b}",
        (f"A: {label_a}", f"B: {label_b}"),
        tuple(s for s in sections if s is not None),
    )

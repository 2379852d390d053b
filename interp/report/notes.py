"""The notes of the report's summary: what a reader must know before reading its numbers, each
a sentence or a few built from the summary data (:func:`interp.report.summary.report_summary`)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from interp.ablate.config import REL_PRECISION
from interp.ablate.settle import RANK
from interp.report import content as C
from interp.report import pruning_summary as P


def summary_notes(summary: dict[str, Any]) -> list[C.Text]:
    """The summary's notes, in order: stages not run, improvements along the pruning curves,
    heads never ablated exactly, what the run could not measure, the estimator's corpus, the
    exact effects left short of the precision asked for, the open top ranks and the estimates
    whose interval misses the exact effect."""
    notes = [
        C.Text(
            f"This run has no {' or '.join(missing['tables'])} table yet (the {missing['stage']} stage "
            "has not run), so its sections are left out.",
            "note",
        )
        for missing in summary["not_run"]
    ]
    notes += [C.Text(text, "note") for text in P.improvement_notes(summary["prunable"])]
    if summary.get("never_exact"):
        notes.append(C.Text(_exact_note(summary["never_exact"], summary["shape"]), "note"))
    notes += [C.Text(text, "note") for text in summary.get("measurement_notes") or []]
    if summary.get("estimator_reads"):
        notes.append(C.Text(summary["estimator_reads"], "note"))
    if (text := precision_note(summary)) is not None:
        notes.append(C.Text(text, "note"))
    if summary.get("open_ranks"):
        notes.append(C.Text(open_ranks_note(summary["open_ranks"]), "note"))
    misses = summary.get("estimate_misses") or []
    if misses:
        per_metric = pd.Series([m.split(" ")[1] for m in misses]).value_counts()
        counts = ", ".join(f"{metric} {n}" for metric, n in per_metric.items())
        notes.append(
            C.Text(
                f"{len(misses)} estimate(s) have an interval that excludes the same head's exact effect "
                f"({counts}): an estimate's interval covers the sampling of sequences only, not the "
                f"estimator's own error; the effects table's vs_exact says which (outside), e.g. "
                f"{'; '.join(misses[:6])}{' …' if len(misses) > 6 else ''}.",
                "note",
            )
        )
    return notes


def precision_note(summary: dict[str, Any]) -> str | None:
    """How many exact effects per metric the rounds left short of the precision rule (at the
    relative precision the run asked for, ``precision_asked``), what stopped them and what would
    give more (:func:`precision_advice`); None where every effect met it."""
    open_ = [
        r
        for r in summary.get("precision") or []
        if r.get("rounds", 0) + r.get("budget", 0) + r.get("corpus", 0)
    ]
    if not open_:
        return None
    parts = [
        f"{r['metric']} ({r['ablation']}): {r.get('met', 0)} met, {r.get('budget', 0)} stopped by the time "
        f"budget, {r.get('rounds', 0)} by the last round"
        + (f", {r['corpus']} by the end of its sequences" if r.get("corpus") else "")
        for r in open_
    ]
    return (
        "Exact effects that did not reach the precision asked for (the interval decides the head "
        "against the 1% tolerance and, for a head that matters, is within "
        f"{100 * summary.get('precision_asked', REL_PRECISION):g}% of its effect; the "
        "effects table's precision column): " + "; ".join(parts) + ". " + precision_advice(open_)
    )


def open_ranks_note(rows: list[dict]) -> str:
    """Which heads' intervals overlap across the place of a metric's ``RANK``-th largest effect
    (summary ``open_ranks``: those among the largest, and those beyond, of which the
    ``NEAREST`` largest are named), and what a reader may and may not conclude from their order."""
    parts = "; ".join(f"{r['metric']} ({r['ablation']}): {_open_rank_part(r)}" for r in rows)
    return (
        f"Which heads are the {RANK} largest effects is not settled where their intervals overlap "
        f"across the {RANK}th place: {parts}. The rounds read these heads on first after the "
        "effects the precision rule wants; another run, on other sequences, may order them "
        "otherwise. More sequences (--precise, --max-rounds, or your own --eval-corpus) can part them."
    )


NEAREST = 3  # heads named beyond a metric's largest whose interval reaches in: a budget-bound run has dozens


def _open_rank_part(row: dict) -> str:
    """One metric's part of :func:`open_ranks_note`: ``A and B of the 5 largest overlap C``,
    or, past ``NEAREST`` heads beyond them, ``overlap 58 heads beyond them (the nearest: C, D, E)``."""
    inside, outside = row["inside"], row["outside"]
    heads = inside[0] if len(inside) == 1 else f"{', '.join(inside[:-1])} and {inside[-1]}"
    verb = "overlaps" if len(inside) == 1 else "overlap"
    if len(outside) <= NEAREST:
        beyond = ", ".join(outside)
    else:
        beyond = f"{len(outside)} heads beyond them (the nearest: {', '.join(outside[:NEAREST])})"
    return f"{heads} of the {RANK} largest {verb} {beyond}"


def precision_advice(rows: list[dict]) -> str:
    """What would give the open effects more precision, from what stopped them: a time budget
    (which a --precise run does not have), the last round, or the end of an eval set's sequences
    (where more rounds cannot help); and, where more rounds can help, how many times its
    positions the effect furthest from the rule needs (``more_positions``)."""
    advice = []
    if any(r.get("budget", 0) for r in rows):
        advice.append(
            "raise --time-budget, or ask for --precise (rounds until every effect is met); the "
            "rounds went first to the effects contending for the 20 largest of their metric, "
            "those nearest the rule first, so those stopped by the budget include the heads "
            "that waited for them"
        )
    if any(r.get("rounds", 0) for r in rows):
        advice.append("raise --max-rounds")
    if any(r.get("corpus", 0) for r in rows):
        advice.append(
            "an effect stopped by the end of its sequences needs a larger evaluation set, not "
            "more rounds (your own text: --eval-corpus FILE)"
        )
    text = "; ".join(advice)
    text = text[:1].upper() + text[1:] + "."
    needs = [r for r in rows if r.get("more_positions")]
    if needs:
        text += (
            " At the rate an interval narrows (as one over the square root of the positions), "
            "the open effect furthest from the rule, per metric, needs about "
            + ", ".join(f"{r['more_positions']:.1f}x ({r['metric']})" for r in needs)
            + " the positions it rests on; where that is more than its eval set holds (the built-in "
            "prose has so many lines), only a larger evaluation set gives it."
        )
    return text


def _exact_note(never: list[str], shape: tuple[int, int]) -> str:
    """Which heads' effects are estimates only, naming the shorter list: the heads never ablated
    exactly, or, when those are most of them, the heads that were."""
    n_layers, n_heads = shape
    total = n_layers * n_heads
    if len(never) <= total / 2:
        return (
            f"{len(never)} of {total} heads were never ablated exactly; their effects are estimates only: "
            f"{' '.join(never)}."
        )
    missing = set(never)
    exact = [
        f"L{l}H{h}" for l in range(n_layers) for h in range(n_heads) if f"L{l}H{h}" not in missing
    ]
    return (
        f"{len(never)} of {total} heads were never ablated exactly; their effects are estimates only. "
        f"The {len(exact)} measured exactly: {' '.join(exact) if exact else 'none'}."
    )

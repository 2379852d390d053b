"""A sequential exact sweep: spend tokens where a head's effect is not yet settled.

The evaluation corpus is cut into ``rounds`` of the same make-up (each eval set's sequences in
index order: round ``r`` holds the ``r``-th slice of every eval set). Round 0 is ablated for every
chosen head; after each round every (head, metric) effect is recomputed with its bootstrap
interval over the sequences it has seen (:func:`interp.ablate.stats.effects_from_sums`), and
only the heads whose effect is still open on some metric of an eval set get that eval set's next
round. An effect is *settled* (:func:`settled`) when its 95% interval decides it against the
pruning tolerance (wholly above, wholly below, or wholly within +-tolerance; see
``vs_tolerance``) and, for a head that matters (above) or ranks among the ``TOP`` (20) largest
|effects| of its metric, when the interval is also tight: half-width at most
``max(P * |delta|, ABS_PRECISION)``, ``P`` = ``REL_PRECISION`` (10%) or ``--precision``. Heads that are clearly
irrelevant stop after one round; heads near the tolerance or important but imprecise go on,
up to the last round, or until the stage's time budget for the sweep is spent (no round starts
after it; round 0 always runs in full). Each row's ``n_tokens`` says how many tokens its effect
rests on, and ``precision`` whether it met the rule (``met``) or what stopped it first
(``rounds``, ``budget``).

This is a racing design, not a fixed-size test: the intervals of heads that stop early are
slightly optimistic (stopping when the interval looks settled favours intervals that happen to
be narrow), the usual price of racing; the undecided share that remains is reported.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import pandas as pd

from interp.ablate.config import ABS_PRECISION, REL_PRECISION
from interp.ablate.evaluation import EvalCorpus, make_batches
from interp.ablate.metrics import eval_set_metrics

TOP = 20  # the largest effects of each metric are held to the same rule, whatever their decision

Head = tuple[int, int]


def rounds(
    corpus: EvalCorpus,
    n_rounds: int,
    max_tokens: int,
    pad_id: int,
    whole: frozenset[str] = frozenset(),
) -> list[EvalCorpus]:
    """``corpus`` cut into ``n_rounds`` corpora of the same make-up (every eval set's index order
    sliced evenly; sequence indices kept, so the rounds share one SumStore). The eval sets in
    ``whole`` (the user's own sequences: an evaluation corpus, a task, which are not made
    ``n_rounds`` times as large as the built-in ones are) stay whole in round 0."""
    if n_rounds <= 1:
        return [corpus]
    per = {f: n + 1 if f in whole else math.ceil(n / n_rounds) for f, n in corpus.sizes.items()}
    out = []
    for r in range(n_rounds):
        items = [it for it in corpus.items if it.index // per[it.eval_set] == r]
        if items:
            out.append(EvalCorpus(items, make_batches(items, max_tokens, pad_id), corpus.sizes))
    return out


def eval_set_part(corpus: EvalCorpus, eval_set: str) -> EvalCorpus:
    """The batches of one eval set (a batch holds one eval set)."""
    return EvalCorpus(
        [it for it in corpus.items if it.eval_set == eval_set],
        [b for b in corpus.batches if b.eval_set == eval_set],
        corpus.sizes,
    )


def settled(effects: pd.DataFrame, rel: float = REL_PRECISION) -> pd.Series:
    """Per effects row: is the effect settled (see module docstring)? ``rel``: the relative
    precision asked of a head that matters or ranks among the ``TOP`` largest of its metric."""
    half = (effects["ci_high"] - effects["ci_low"]) / 2
    precise = half <= np.maximum(rel * effects["delta"].abs(), ABS_PRECISION)
    decided = effects["vs_tolerance"] != "undecided"
    size = effects["delta"].abs()
    rank = size.groupby([effects["ablation"], effects["metric"]]).rank(
        ascending=False, method="first"
    )
    needs = (effects["vs_tolerance"] == "above") | (rank <= TOP)
    return decided & (~needs | precise)


def open_heads(effects: pd.DataFrame, eval_set: str, rel: float = REL_PRECISION) -> set[Head]:
    """Heads with an unsettled effect on some metric of ``eval_set`` (any ablation kind)."""
    rows = effects[effects["metric"].isin(eval_set_metrics(eval_set))]
    rows = rows[~settled(rows, rel)]
    return {(int(layer), int(head)) for layer, head in zip(rows["layer"], rows["head"])}


MET, ROUNDS, BUDGET = "met", "rounds", "budget"  # the effects table's ``precision``


def precision(effects: pd.DataFrame, stopped_by: str, rel: float = REL_PRECISION) -> pd.DataFrame:
    """Exact rows with ``precision``: ``met`` where the effect is settled, else why the rounds
    stopped before it was (``rounds``: the last round ran; ``budget``: the time budget ran out)."""
    return effects.assign(precision=np.where(settled(effects, rel), MET, stopped_by))


def sequential_sweep(
    parts: list[EvalCorpus],
    heads: list[Head],
    sweep: Callable[[EvalCorpus, list[Head]], None],
    effects: Callable[[], pd.DataFrame],
    deadline: float | None = None,
    rel: float = REL_PRECISION,
) -> tuple[list[dict[str, int]], str]:
    """Run ``sweep(corpus, heads)`` round by round on the heads still open per eval set, starting no
    round after ``deadline`` (``time.perf_counter()`` seconds; round 0 always runs). Returns, per
    round, the number of heads each eval set's sweep ran (what the manifest records), and what
    stopped the rounds for the heads still open: ``rounds`` or ``budget``."""
    log: list[dict[str, int]] = []
    todo = {eval_set: list(heads) for eval_set in parts[0].sizes}
    for r, part in enumerate(parts):
        if r and deadline is not None and time.perf_counter() > deadline:
            return log, BUDGET
        ran = {}
        for eval_set in part.sizes:
            chosen = sorted(todo.get(eval_set, []))
            if chosen and any(b.eval_set == eval_set for b in part.batches):
                sweep(eval_set_part(part, eval_set), chosen)
                ran[eval_set] = len(chosen)
        log.append(ran)
        if r + 1 < len(parts):
            table = effects()
            todo = {
                eval_set: sorted(open_heads(table, eval_set, rel) & set(heads))
                for eval_set in parts[0].sizes
            }
            if not any(todo.values()):
                break
    return log, ROUNDS

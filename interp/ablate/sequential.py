"""A sequential exact sweep: spend tokens where a head's effect is not yet settled.

The evaluation corpus is cut into ``rounds`` of the same make-up (each eval set's sequences in
index order: round ``r`` holds the ``r``-th slice of every eval set). Round 0 is ablated for every
chosen head; after each round every (head, metric) effect is recomputed with its bootstrap
interval over the sequences it has seen (:func:`interp.ablate.stats.effects_from_sums`), and
only the heads whose effect is still open on some metric of an eval set get that eval set's next
round; while an effect that contends for a place among the ``TOP`` (20) largest of its metric
is open (:func:`interp.ablate.settle.contending`), only those heads do, so that a time budget
goes first to the effects a reader looks at and the others wait. An effect is *settled* (:func:`settled`) when its 95% interval decides it against the
pruning tolerance (wholly above, wholly below, or wholly within +-tolerance; see
``vs_tolerance``) and, for a head that matters (above) or ranks among the ``TOP`` (20) largest
|effects| of its metric, when the interval is also tight: half-width at most
``max(P * |delta|, ABS_PRECISION)``, ``P`` = ``REL_PRECISION`` (10%) or ``--precision``. Heads that are clearly
irrelevant stop after one round; heads near the tolerance or important but imprecise go on,
up to the last round, or until the stage's time budget for the sweep is spent (no round starts
after it; round 0 always runs in full). Each row's ``n_tokens`` says how many tokens its effect
rests on, and ``precision`` whether it met the rule (``met``) or what stopped it first
(``rounds``, ``budget``, or ``corpus``: its eval set had no further sequence, as the bounded prose
lines or the user's own sequences). ``--precise`` runs the rounds with no time budget, up to
``PRECISE_ROUNDS``, until no effect is open. Every round ends with one line on stderr: the heads
still open, how many the next round runs and the scored positions read so far per eval set, and
the seconds since round 0.

This is a racing design, not a fixed-size test: the intervals of heads that stop early are
slightly optimistic (stopping when the interval looks settled favours intervals that happen to
be narrow), the usual price of racing; the undecided share that remains is reported.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from interp.ablate.config import REL_PRECISION
from interp.ablate.evaluation import EvalCorpus, EvalItem, make_batches
from interp.ablate.metrics import eval_set_metrics
from interp.ablate.settle import contending, settled
from interp.ablate.stats import sequence_tokens

Head = tuple[int, int]


@dataclass
class Rounds:
    """Where a sequential sweep stands after a round: what the next one needs besides the sums
    (:mod:`interp.ablate.round_state` keeps both in the run directory)."""

    next_round: int
    log: list[dict[str, int]]  # per round, the heads each eval set's sweep ran
    read: dict[str, int]  # eval set -> scored positions its sweeps read so far


def rounds(
    corpus: EvalCorpus,
    n_rounds: int,
    max_tokens: int,
    pad_id: int,
    whole: frozenset[str] = frozenset(),
    asked: Mapping[str, int] | None = None,
) -> list[EvalCorpus]:
    """``corpus`` cut into ``n_rounds`` corpora of the same make-up (every eval set's index order
    sliced evenly: sequence i of n in round i * n_rounds // n; sequence indices kept, so the
    rounds share one SumStore). The eval sets in ``whole`` (the user's own sequences: an
    evaluation corpus, a task, which are not made ``n_rounds`` times as large as the built-in
    ones are) stay whole in round 0. ``asked``: the sequences the rounds asked of a bounded eval
    set; one that holds fewer (prose has so many lines) keeps the slices of its size and runs
    out before the last round. A generated set, made for the rounds, fills every round even
    where it lost a few sequences the model could not score. Rounds left with no sequence are
    dropped."""
    if n_rounds <= 1:
        return [corpus]
    asked = asked or {}
    span = {f: max(n, asked.get(f, 0), 1) for f, n in corpus.sizes.items()}

    def round_of(item: EvalItem) -> int:
        if item.eval_set in whole:
            return 0
        return item.index * n_rounds // span[item.eval_set]

    out = []
    for r in range(n_rounds):
        items = [it for it in corpus.items if round_of(it) == r]
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


def open_heads(
    effects: pd.DataFrame, eval_set: str, rel: float = REL_PRECISION, first: bool = False
) -> set[Head]:
    """Heads with an unsettled effect on some metric of ``eval_set`` (any ablation kind); with
    ``first``, only those whose unsettled effect contends for a place among the largest
    (:func:`interp.ablate.settle.contending`)."""
    rows = effects[effects["metric"].isin(eval_set_metrics(eval_set))]
    rows = rows[~settled(rows, rel) & (contending(rows) if first else True)]
    return {(int(layer), int(head)) for layer, head in zip(rows["layer"], rows["head"])}


MET, ROUNDS, BUDGET, CORPUS = (
    "met",
    "rounds",
    "budget",
    "corpus",
)  # the effects table's ``precision``


def precision(
    effects: pd.DataFrame,
    stopped_by: str,
    rel: float = REL_PRECISION,
    spent: frozenset[str] = frozenset(),
) -> pd.DataFrame:
    """Exact rows with ``precision``: ``met`` where the effect is settled, else why the rounds
    stopped before it was (``corpus``: its eval set, one of ``spent``, had no further sequence;
    ``rounds``: the last round ran; ``budget``: the time budget ran out)."""
    out_of = [m for eval_set in spent for m in eval_set_metrics(eval_set)]
    why = np.where(effects["metric"].isin(out_of), CORPUS, stopped_by)
    return effects.assign(precision=np.where(settled(effects, rel), MET, why))


def last_rounds(parts: list[EvalCorpus]) -> dict[str, int]:
    """eval set -> the last round of ``parts`` that holds a sequence of it (an eval set with no
    sequence in any round is left out)."""
    return {b.eval_set: r for r, part in enumerate(parts) for b in part.batches}


def spent_eval_sets(parts: list[EvalCorpus], ran: int) -> frozenset[str]:
    """The eval sets whose sequences ran out in the first ``ran`` rounds of ``parts`` while later
    rounds had sequences of others: an open effect of theirs could not get more."""
    last = last_rounds(parts)
    return frozenset(f for f, r in last.items() if r < ran and r < len(parts) - 1)


def sequential_sweep(
    parts: list[EvalCorpus],
    heads: list[Head],
    sweep: Callable[[EvalCorpus, list[Head]], None],
    effects: Callable[[], pd.DataFrame],
    deadline: float | None = None,
    rel: float = REL_PRECISION,
    begun: Rounds | None = None,
    after_round: Callable[[Rounds], None] | None = None,
) -> tuple[list[dict[str, int]], str]:
    """Run ``sweep(corpus, heads)`` round by round on the heads still open per eval set, starting no
    round after ``deadline`` (``time.perf_counter()`` seconds; the first round always runs), with a
    line on stderr after each round (:func:`round_line`), after ``after_round`` has been handed
    where the sweep stands. ``begun``: a stopped sweep's rounds, whose sums ``effects`` already
    reads; the sweep continues with its next round. Returns, per round, the number of heads each
    eval set's sweep ran (what the manifest records), and what stopped the rounds for the heads
    still open: ``rounds`` or ``budget``."""
    log: list[dict[str, int]] = list(begun.log) if begun else []
    read = dict(begun.read) if begun else dict.fromkeys(parts[0].sizes, 0)
    first = begun.next_round if begun else 0
    todo = {eval_set: list(heads) for eval_set in parts[0].sizes}
    last = last_rounds(parts)
    if first:
        todo = next_heads(effects(), heads, _left(parts[0], last, first), rel)
    start = time.perf_counter()
    for r, part in enumerate(parts):
        if r < first:
            continue
        if not any(todo.values()):
            break
        if r > first and deadline is not None and time.perf_counter() > deadline:
            return log, BUDGET
        ran = {}
        scored = _eval_set_positions(part)
        for eval_set in part.sizes:
            chosen = sorted(todo.get(eval_set, []))
            if chosen and any(b.eval_set == eval_set for b in part.batches):
                sweep(eval_set_part(part, eval_set), chosen)
                ran[eval_set] = len(chosen)
                read[eval_set] += scored[eval_set]
        log.append(ran)
        table = effects()
        todo = next_heads(table, heads, _left(parts[0], last, r + 1), rel)
        if after_round is not None:
            after_round(Rounds(r + 1, log, read))
        still = {f: len(open_heads(table, f, rel) & set(heads)) for f in read}
        line = round_line(r, len(parts), todo, still, read, time.perf_counter() - start)
        print(line, file=sys.stderr)
    return log, ROUNDS


def _left(first: EvalCorpus, last: dict[str, int], r: int) -> list[str]:
    """The eval sets (in ``first`` round's order) with sequences in round ``r`` or later, from
    each one's ``last`` round (:func:`last_rounds`)."""
    return [f for f in first.sizes if last.get(f, -1) >= r]


def next_heads(
    table: pd.DataFrame, heads: list[Head], eval_sets: list[str], rel: float
) -> dict[str, list[Head]]:
    """eval set -> the chosen heads that its next round runs: while any effect that contends for
    a place among the largest of its metric is open, only the heads with such an effect (on any
    eval set: the budget goes first to the effects a reader looks at); then every head with an
    effect still open. ``eval_sets``: those with sequences left; the others get no round."""
    for first in (True, False):
        todo = {f: sorted(open_heads(table, f, rel, first) & set(heads)) for f in eval_sets}
        if any(todo.values()):
            return todo
    return todo


def round_line(
    r: int,
    n_rounds: int,
    todo: dict[str, list[Head]],
    still: dict[str, int],
    read: dict[str, int],
    seconds: float,
) -> str:
    """The progress line after round ``r`` (counted from 0) of ``n_rounds``: per eval set, the
    heads still open, how many of them the next round runs (none where the eval set has no
    sequence left), and the scored positions its sweeps have read so far."""
    each = ", ".join(
        f"{f} {still[f]} open, {len(todo[f]) if f in todo else 'no sequences left'}"
        f"{' next' if f in todo else ''} ({read[f]} positions)"
        for f in still
    )
    return f"ablate: round {r + 1} of {n_rounds} after {seconds:.0f} s: {each}"


def _eval_set_positions(part: EvalCorpus) -> dict[str, int]:
    """eval set -> scored positions of its sequences in ``part`` (of its first metric)."""
    scored = sequence_tokens(part)  # zero for the sequences of other rounds
    return {f: int(scored[eval_set_metrics(f)[0]].sum()) for f in part.sizes}

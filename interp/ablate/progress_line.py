"""The line each round of the exact sweep prints on stderr (interp.ablate.sequential): per eval
set, the heads still open, how many of them the next round runs or what stops them, and the most
scored positions one head has read so far.
"""

from __future__ import annotations

from collections.abc import Mapping

Head = tuple[int, int]  # (layer, head)


NO_SEQUENCES, CAPPED = "no sequences left", "undecided ones stop at the cap"
SPENT = "time budget spent"


def stopped(
    open_: set[Head], can: list[Head], unread: list[Head], spent: bool = False
) -> str | None:
    """What stops an eval set's ``open_`` heads, where none of them reads on (None where one
    does): the time budget (``spent``: no head fits the seconds left) where some could read on,
    no slice left, or, where some have slices left (``unread``) but none may read them
    (``can``), the decide cap."""
    if open_ & set(can):
        return SPENT if spent else None
    return CAPPED if open_ & set(unread) else NO_SEQUENCES


def round_line(
    r: int,
    todo: dict[str, list[Head]],
    still: dict[str, set[Head]],
    left: dict[str, str | None],
    read: dict[str, int],
    seconds: float,
) -> str:
    """The progress line after round ``r`` (counted from 0): per eval set, the heads still open
    (``still``), how many of them the next round runs (else what stops them, ``left``: ``no
    sequences left``, or ``undecided ones stop at the cap`` where the rest are undecided past the
    decide slices), and the most scored positions one head's sweeps have read so far."""
    each = ", ".join(
        f"{f} {len(open_)} open, "
        f"{f'{len(todo.get(f, []))} next' if left[f] is None or not open_ else left[f]}"
        f" ({read[f]} positions)"
        for f, open_ in still.items()
    )
    return f"ablate: round {r + 1} after {seconds:.0f} s: {each}"


def most_read(
    eval_sets: Mapping[str, int],
    slices: dict[str, list[int]],
    scored: list[dict[str, int]],
    cursors: dict[str, dict[Head, int]],
) -> dict[str, int]:
    """eval set -> the most scored positions one head has read of it: those of the slices before
    the furthest cursor (``scored``: per round, eval set -> its scored positions)."""
    out = {}
    for f in eval_sets:
        furthest = max(cursors.get(f, {}).values(), default=0)
        out[f] = sum(scored[r][f] for r in slices.get(f, [])[:furthest])
    return out

"""The time budget of the exact rounds (interp.ablate.sequential): what a round will cost, at the
rate the rounds so far ran, and which of its heads fit the seconds left.

Checking the deadline only before a round starts lets a large round run far past it: on SmolLM2's
default run a round that reads a new slice for a hundred open heads takes over a minute, and the
rounds ended 46 s after their 300 s on a 2-core EPYC. So a round that would not end by the
deadline runs only the heads that fit, nearest the precision rule first
(:func:`interp.ablate.settle.positions_needed`), and the rounds end there.

The cost model: a sweep of ``heads`` on one slice of an eval set costs ``units(heads)`` units
(one clean pass, and each head's pass from its layer on; :func:`layer_units`), at that eval set's
seconds per unit over its sweeps so far; a round also pays what its bookkeeping took last time
(the effects table, the saved state). An eval set with no sweep timed yet (a resumed sweep's
first round) cannot be predicted and runs whole.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pandas as pd

from interp.ablate.metrics import eval_set_metrics
from interp.ablate.settle import positions_needed

Head = tuple[int, int]  # (layer, head)


def layer_units(n_layers: int) -> Callable[[list[Head]], float]:
    """Units of one sweep call on a model of ``n_layers`` layers: the clean pass runs every layer,
    an ablated head's pass the layers from its own on (interp.ablate.forward: layer reuse)."""

    def units(heads: list[Head]) -> float:
        return n_layers + sum(n_layers - layer for layer, _ in heads)

    return units


def head_units(heads: list[Head]) -> float:
    """Units where the layers are unknown: the clean pass and each head count one."""
    return 1.0 + len(heads)


@dataclass
class RoundCost:
    """Seconds per unit per eval set, measured on the sweeps run so far (:meth:`timed`), and the
    seconds a round spends besides its sweeps (:meth:`round_took`)."""

    units: Callable[[list[Head]], float] = head_units
    # eval set -> (seconds, units) of each sweep timed, in order
    calls: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    overhead: float = 0.0  # the last round's seconds besides its sweeps
    _swept: float = 0.0  # seconds of sweeps in the round under way

    def timed(self, eval_set: str, sweep: Callable[[], None], heads: list[Head]) -> None:
        """Run ``sweep`` (one eval set's heads on one slice) and record what it cost."""
        start = time.perf_counter()
        sweep()
        took = time.perf_counter() - start
        self._swept += took
        self.calls.setdefault(eval_set, []).append((took, self.units(heads)))

    def round_took(self, seconds: float) -> None:
        """A round ended after ``seconds`` in all: what it spent besides its sweeps is the next
        round's expected bookkeeping."""
        self.overhead = max(0.0, seconds - self._swept)
        self._swept = 0.0

    def rate(self, eval_set: str) -> float | None:
        """Seconds per unit on ``eval_set``: over all its sweeps, or over those after its first
        where that is slower (None before any was timed). The first sweep runs every head at
        once, stacked as deep as a pass holds, and is the cheapest per unit; a later round runs
        a few heads per layer, and predicting it at the first one's rate made SmolLM2's last
        round end 12 s after its budget. Too slow a rate costs little: a round that ends early
        leaves its seconds to the next."""
        calls = self.calls.get(eval_set, [])
        return max((_per_unit(part) for part in (calls, calls[1:]) if part), default=None)

    def fit(
        self,
        todo: Mapping[str, list[Head]],
        cursors: Mapping[str, Mapping[Head, int]],
        order: Mapping[str, Mapping[Head, float]],
        seconds: float,
    ) -> dict[str, list[Head]]:
        """The heads of ``todo`` (eval set -> heads) that a round can run in ``seconds``: all of
        them where the round's predicted cost fits, else the most urgent first (``order``: eval
        set -> head -> rank key, lowest first; :func:`urgency`) while they fit, skipping one that
        does not for a cheaper one behind it. Heads at the same slice share their clean pass.
        Where an eval set's rate is unknown its heads all run and nothing is trimmed."""
        rates = {f: self.rate(f) for f in todo if todo[f]}
        if any(r is None for r in rates.values()):
            return {f: list(heads) for f, heads in todo.items()}
        known = {f: r for f, r in rates.items() if r is not None}
        budget = seconds - self.overhead
        if self._cost(todo, cursors, known) <= budget:
            return {f: list(heads) for f, heads in todo.items()}
        ranked = sorted(
            (order.get(f, {}).get(h, math.inf), f, h) for f, heads in todo.items() for h in heads
        )
        chosen: dict[str, list[Head]] = {f: [] for f in todo}
        groups: dict[tuple[str, int], list[Head]] = {}
        spent = 0.0
        for _, f, h in ranked:
            group = groups.setdefault((f, cursors.get(f, {}).get(h, 0)), [])
            more = (self.units([*group, h]) - (self.units(group) if group else 0.0)) * known[f]
            if spent + more <= budget:
                group.append(h)
                chosen[f].append(h)
                spent += more
        return {f: sorted(heads) for f, heads in chosen.items()}

    def _cost(
        self,
        todo: Mapping[str, list[Head]],
        cursors: Mapping[str, Mapping[Head, int]],
        rates: Mapping[str, float],
    ) -> float:
        """Predicted seconds of ``todo``'s sweeps: one call per eval set and slice."""
        total = 0.0
        for f, heads in todo.items():
            groups: dict[int, list[Head]] = {}
            for h in heads:
                groups.setdefault(cursors.get(f, {}).get(h, 0), []).append(h)
            total += sum(self.units(group) for group in groups.values()) * rates.get(f, 0.0)
        return total


def _per_unit(calls: list[tuple[float, float]]) -> float:
    units = sum(u for _, u in calls)
    return sum(seconds for seconds, _ in calls) / units if units > 0 else 0.0


def urgency(
    table: pd.DataFrame, todo: Mapping[str, list[Head]], rel: float
) -> dict[str, dict[Head, float]]:
    """eval set -> head -> how many times its positions the head's nearest open effect on the eval
    set needs to meet the precision rule ``rel`` (:func:`interp.ablate.settle.positions_needed`;
    infinite where none has a projection, as an undecided effect): the order in which a trimmed
    round keeps its heads, shortest job first."""
    need = positions_needed(table, rel)
    out: dict[str, dict[Head, float]] = {}
    for f, heads in todo.items():
        rows = table["metric"].isin(eval_set_metrics(f))
        keys = zip(table.loc[rows, "layer"].astype(int), table.loc[rows, "head"].astype(int))
        least: dict[Head, float] = {}
        for key, value in zip(keys, need[rows]):
            if not pd.isna(value):
                least[key] = min(least.get(key, math.inf), float(value))
        out[f] = {h: least.get(h, math.inf) for h in heads}
    return out

"""The seam between a stage and where its work runs: units of work that return sums.

A stage that can split its work (collection by probe shard, the exact sweep by layers) describes
it as a :class:`Work` (how a worker readies its copy of the model once, and runs one unit on
it), cuts it into units, and hands them with the job they share to an :class:`Executor`, which
gives back each unit's result (partial sums) as it comes, in any order. Only the stage (the
coordinator) merges the results, in unit order, and only it writes the run directory: where a
unit ran never changes the tables.

Two executors:

- :class:`LocalExecutor`, the default: every unit in this process, on the stage's own model.
- :class:`interp.executors.ray_workers.RayExecutor` (``--executor ray``, the optional extra
  ``interp[ray]``): Ray actors, each loading the model once from the run's model spec.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from interp.model.load import LoadedModel


def _no_facts(unit: Any) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Work:
    """One stage's kind of unit. The functions are module-level (Ray ships them by reference).

    name: what the work is called in messages and the manifest ("collection", "exact sweep").
    prepare: ``prepare(model)``, what a worker keeps beside its model (once per worker).
    run: ``run(state, job, unit, done)``, one unit's result; ``done(n)`` reports progress.
    size: ``size(job, unit)``, the progress steps of a unit (reported at once where a unit runs
        elsewhere).
    describe: ``describe(unit)``, what the manifest says about a unit besides its time.
    """

    name: str
    prepare: Callable[[LoadedModel], Any]
    run: Callable[[Any, Any, Any, Callable[[int], None]], Any]
    size: Callable[[Any, Any], int]
    describe: Callable[[Any], dict[str, Any]] = _no_facts


@dataclass
class Outcome:
    """A unit's result: its number (the merge order), its sums, its time and where it ran."""

    index: int
    result: Any
    seconds: float
    worker: str = "local"
    attempts: int = 1


class Executor(Protocol):
    """Runs a stage's units somewhere and hands back their results."""

    name: str
    workers: int

    def map(
        self, work: Work, job: Any, units: Sequence[Any], done: Callable[[int], None]
    ) -> Iterator[Outcome]:
        """Every unit's outcome, in any order; each unit's result is taken from one run only."""

    def record(self) -> dict[str, Any]:
        """What the manifest records: the executor, its workers, each unit's time."""


def unit_record(work: Work, unit: Any, outcome: Outcome, call: int) -> dict[str, Any]:
    """One unit's line in the manifest (``call``: which of the stage's calls on the executor;
    the ablate stage makes one per round and metric's sequences of its sequential sweep)."""
    return {
        "call": call,
        "shard": outcome.index,
        **work.describe(unit),
        "seconds": round(outcome.seconds, 3),
        "worker": outcome.worker,
        "attempts": outcome.attempts,
    }


@dataclass
class LocalExecutor:
    """Every unit in this process, on the stage's model; ``states`` holds what a Work's
    ``prepare`` would make, where the stage has it already (keyed by the Work's name)."""

    model: Any
    states: dict[str, Any] = field(default_factory=dict)
    name: str = "local"
    workers: int = 1
    log: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0

    def map(
        self, work: Work, job: Any, units: Sequence[Any], done: Callable[[int], None]
    ) -> Iterator[Outcome]:
        if work.name not in self.states:
            self.states[work.name] = work.prepare(self.model)
        state = self.states[work.name]
        call, self.calls = self.calls, self.calls + 1
        for index, unit in enumerate(units):
            start = time.perf_counter()
            outcome = Outcome(index, work.run(state, job, unit, done), time.perf_counter() - start)
            self.log.append(unit_record(work, unit, outcome, call))
            yield outcome

    def record(self) -> dict[str, Any]:
        return {"executor": self.name, "workers": 1, "shards": self.log}

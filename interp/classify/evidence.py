"""The evidence besides attention that the classify stage reads, when the run has it.

- ``weights`` and ``composition`` (the weights stage): what each head writes and whom it
  composes with (interp.classify.writes);
- ``effects`` and ``task_attention`` (the ablate stage): what each head does on a task that
  names positions (interp.classify.tasks).

Each is optional: without weights the roles are where heads look (as the attention classifier
and the sink rule say); without effects there are no task roles. :func:`with_evidence` turns
the attention classifier's roles table into the final one (interp.classify.combine).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from interp.classify.combine import combine
from interp.classify.estimator import HeadRoleClassifier
from interp.classify.tasks import task_roles
from interp.classify.writes import write_labels

TABLES = ("weights", "composition", "effects", "task_attention")


@dataclass
class Evidence:
    """The tables of other stages the roles read (None: the run has none)."""

    weights: pd.DataFrame | None = None
    composition: pd.DataFrame | None = None
    effects: pd.DataFrame | None = None
    task_attention: pd.DataFrame | None = None

    @classmethod
    def read(cls, run_dir: Path) -> Evidence:
        """Whatever of :data:`TABLES` the run directory holds."""
        from interp.pipeline import rundir

        return cls(**{name: rundir.read_table(run_dir, name) for name in TABLES})


def with_evidence(
    roles: pd.DataFrame, evidence: Evidence | None, writer: HeadRoleClassifier | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the roles table with write and task roles combined in, the task roles found: one row per
    task and head, interp.classify.tasks.COLUMNS). ``writer``: the write classifier (needed
    when there is a weights table)."""
    evidence = evidence or Evidence()
    writes = None
    if evidence.weights is not None and not evidence.weights.empty:
        if writer is None:
            raise ValueError("a weights table needs the write classifier to read it")
        writes = write_labels(writer, evidence.weights)
    written = writes["writes"] if writes is not None else pd.Series(dtype=object)
    tasks = task_roles(evidence.task_attention, evidence.effects, written, evidence.composition)
    out = combine(roles, writes, tasks)
    found = tasks.set_index(["layer", "head", "task"]) if len(tasks) else None
    out["task_key"] = _task_column(out, found, "key")
    out["task_partner"] = _task_column(out, found, "partner")
    return out, tasks


def _task_column(roles: pd.DataFrame, found: pd.DataFrame | None, column: str) -> np.ndarray:
    """Per head, ``column`` of the task role row behind its ``task`` (NaN where none)."""
    if found is None:
        return np.full(len(roles), np.nan, dtype=object)
    keys = zip(roles["layer"], roles["head"], roles["task"])
    return np.array(
        [found[column].get(k, np.nan) if isinstance(k[2], str) else np.nan for k in keys],
        dtype=object,
    )

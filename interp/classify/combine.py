"""One primary role and a second one from where a head looks, what it writes and what it does on a task.

A head is both where it looks (its attention: the attention classifier and the sink rule,
column ``looks``) and what it writes (its OV circuit and output size: interp.classify.writes,
column ``writes``); on a task that names positions it may also hold a task role
(interp.classify.tasks, column ``task_role``). The primary role is the most specific statement
the evidence supports, in this order, and ``evidence`` names what decided it:

1. ``inactive`` (evidence ``output``): a head that writes almost nothing does nothing, wherever
   it looks; its second role is where it looks.
2. A task role (``task``): what the head does on the user's task is the most specific thing
   known about it; the second role is where it looks when that is an archetype, else what it
   writes.
3. Where it looks, when that is an archetype other than ``broad`` (``attention``): a
   previous-token head that copies is a previous-token head, and ``copying`` is its second role
   (what it writes, when the weights name something, outranks the classifier's second
   attention role; the sink shows in ``sink_mass`` anyway). ``first_token`` stays primary
   whatever the weights say: such a head writes its sink's value, whatever its circuit would
   do with the rest.
4. What it writes (``weights``), when where it looks is ``broad``, ``mixed`` or ``unexplained``
   (or was not measured): a head whose attention matches no single archetype but whose OV circuit
   copies is a copying head, with ``broad`` or ``mixed`` (or the classifier's second role) as its
   second role.
5. Otherwise where it looks: ``broad`` or ``mixed`` (``attention``), or ``unexplained`` /
   ``unmeasured`` when no evidence suffices (``evidence`` NaN).

``confidence`` is the deciding evidence's: the attention classifier's probability, the write
classifier's, 1 for a rule (the sink rule, ``inactive``, an inhibitor), and for a mover or
negative mover the write classifier's probability of what it writes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from interp.classify.mixture import MIXED
from interp.roles import UNEXPLAINED, UNMEASURED

WEAK_LOOKS = ("broad", MIXED, UNEXPLAINED, UNMEASURED)  # what a write role outranks
NAMED_WEAK = ("broad", MIXED)  # weak, yet a role: kept as the second role
NO_SECOND = (UNEXPLAINED, UNMEASURED)
SINK_ROLE = "first_token"


def _named(value: object) -> bool:
    return isinstance(value, str) and value not in NO_SECOND


def combine(
    roles: pd.DataFrame, writes: pd.DataFrame | None, tasks: pd.DataFrame | None
) -> pd.DataFrame:
    """The roles table with ``looks``, ``writes``, ``task_role``, ``task`` and ``evidence``, and
    ``role``, ``confidence``, ``second_role`` decided as the module docstring says.

    ``roles``: the attention classifier's table (layer, head, role, confidence, second_role, ...);
    ``writes``: :func:`interp.classify.writes.write_labels` (index (layer, head)), None when the
    run has no weights table; ``tasks``: :func:`interp.classify.tasks.task_roles`, or None.
    """
    out = roles.copy()
    keys = pd.MultiIndex.from_arrays([out["layer"].astype(int), out["head"].astype(int)])
    looks = out["role"].to_numpy(dtype=object)
    looks_conf = out["confidence"].to_numpy(dtype=float)
    second = out["second_role"].to_numpy(dtype=object)
    w = writes.reindex(keys) if writes is not None else pd.DataFrame(index=keys)
    wrote = (
        w["writes"].to_numpy(dtype=object) if "writes" in w else np.full(len(out), np.nan, object)
    )
    w_conf = (
        w["writes_confidence"].to_numpy(dtype=float) if "writes" in w else np.full(len(out), np.nan)
    )
    task = _one_per_head(tasks, keys)

    role: list[Any] = []
    conf: list[Any] = []
    second_out: list[Any] = []
    evidence: list[Any] = []
    for i in range(len(out)):
        look, write, t = looks[i], wrote[i], task[i]
        decided: tuple[Any, ...]
        if write == "inactive":
            decided = ("inactive", 1.0, look if _named(look) else np.nan, "output")
        elif t is not None:
            confidence = 1.0 if t["task_role"] == "inhibitor" else w_conf[i]
            also = (
                look
                if _named(look) and look not in WEAK_LOOKS
                else write
                if _named(write)
                else look
            )
            decided = (t["task_role"], confidence, also if _named(also) else np.nan, "task")
        elif look in WEAK_LOOKS and _named(write):
            also = look if look in NAMED_WEAK else second[i]
            decided = (write, w_conf[i], also, "weights")
        else:
            also = write if _named(write) else second[i]
            said = "attention" if look not in NO_SECOND else np.nan
            decided = (look, looks_conf[i], also, said)
        for cells, value in zip((role, conf, second_out, evidence), decided):
            cells.append(value)
    out["looks"] = looks
    out["writes"] = wrote
    out["task_role"] = [t["task_role"] if t is not None else np.nan for t in task]
    out["task"] = [t["task"] if t is not None else np.nan for t in task]
    out["role"], out["confidence"] = role, conf
    out["second_role"] = pd.Series(second_out, dtype=object).to_numpy()
    out["evidence"] = evidence
    for column in w.columns:
        if column not in ("writes",) and column not in out:
            out[column] = w[column].to_numpy()
    for column in ("writes_confidence", "output_size", "writes_unmeasured"):
        if column not in out:  # no weights table: the columns are there, NaN
            out[column] = np.nan
    return out


def _one_per_head(tasks: pd.DataFrame | None, keys: pd.MultiIndex) -> list[dict | None]:
    """Per head, its task-role row (the task where its effect is largest), or None."""
    if tasks is None or tasks.empty:
        return [None] * len(keys)
    ranked = tasks.assign(size=tasks["effect"].abs()).sort_values("size", ascending=False)
    best = ranked.drop_duplicates(["layer", "head"]).set_index(["layer", "head"])
    found = {k: row.to_dict() for k, row in best.iterrows()}
    return [found.get((int(l), int(h))) for l, h in keys]

"""Task roles: what a head does on a task that names positions (interp.Task's named_positions).

A task's effects say which heads it needs; its ``task_attention`` table says where each head
looks between the named positions; the weights say what a head writes and whom it composes
with. Together they name three roles (Wang et al. 2022's indirect-object circuit is the model
case: name movers, negative name movers, S-inhibition heads):

- **mover**: attends from the scored position (the named position the task's metric is read
  at, ``task_attention.scored``) to a named token, writes copies (its write role is
  ``copying``), and the task needs it (removing it makes the metric worse: the exact effect's
  interval lies above 0);
- **negative mover**: attends the same way and writes *against* what it attends to (write role
  ``copy_suppression``), with an exact effect whose interval excludes 0 (either sign: writing
  against the right answer hurts the task, against a wrong one helps it);
- **inhibitor**: attends from the scored position to a named token, is in an earlier layer
  than a mover or negative mover of the task and composes into its queries, and the task's
  exact effect excludes 0. A head that is a mover is not also an inhibitor. "Composes into its
  queries": its Q-composition with the mover is above the random-pair null's 97.5% quantile
  *and* among the ``INHIBITOR_RANK`` earlier heads the mover's queries read most (the
  composition table's ``rank``). The null alone is not enough: the weights of a trained model
  are not random, and on SmolLM2-135M 64% of all Q-composition pairs pass it.

"Attends to a named token": the head's mean attention from the scored position to that key
lifts at least ``ATTENDS_MIN`` over what a head attending uniformly gives it
(``(a - b) / (1 - b)``, ``b`` the table's ``baseline``), and its bootstrap interval lies above
``b``. Of several such keys the one with the most attention is the one named. The thresholds
are set on planted circuits (interp.synthetic.circuit) of development seeds and measured on
held-out ones (benchmarks/classifier_validation.py).

Effects: the exact rows of the task's metric (an estimate has no interval that covers its own
error), for the stage's first ablation kind present in the order mean, zero, resample.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

ATTENDS_MIN = 0.2
INHIBITOR_RANK = 10
KINDS = ("mean", "zero", "resample")
COLUMNS = (
    "task",
    "layer",
    "head",
    "task_role",
    "key",
    "attention",
    "effect",
    "effect_low",
    "effect_high",
    "partner",
)


def looked_at(task_attention: pd.DataFrame, attends_min: float = ATTENDS_MIN) -> pd.DataFrame:
    """Per (task, layer, head): the named key each head attends to from the task's scored
    position (the most-attended key that passes the rule of the module docstring), with its
    attention; heads that attend to none are left out."""
    needed = {"scored", "baseline"} - set(task_attention.columns)
    if needed:  # a table written before the stage recorded them
        return pd.DataFrame(columns=["task", "layer", "head", "key", "attention"])
    rows = task_attention[task_attention["scored"] == 1]
    b = rows["baseline"]
    lift = (rows["attention"] - b) / (1.0 - b)
    rows = rows[(lift >= attends_min) & (rows["ci_low"] > b)]
    best = rows.sort_values("attention", ascending=False, kind="stable")
    best = best.drop_duplicates(["task", "layer", "head"])
    return best[["task", "layer", "head", "key", "attention"]].reset_index(drop=True)


def exact_effects(effects: pd.DataFrame, tasks: list[str]) -> pd.DataFrame:
    """Per (metric, layer, head) of the tasks: delta and its interval from the exact rows of the
    first ablation kind present (mean, zero, resample)."""
    exact = effects[(effects["estimator"] == "exact") & effects["metric"].isin(tasks)]
    present = [k for k in KINDS if k in set(exact["ablation"])]
    if not present:
        return pd.DataFrame(columns=["metric", "layer", "head", "delta", "ci_low", "ci_high"])
    exact = exact[exact["ablation"] == present[0]]
    return exact[["metric", "layer", "head", "delta", "ci_low", "ci_high"]]


def task_roles(
    task_attention: pd.DataFrame | None,
    effects: pd.DataFrame | None,
    writes: pd.Series,
    composition: pd.DataFrame | None,
    attends_min: float = ATTENDS_MIN,
) -> pd.DataFrame:
    """One row per (task, head) that holds a task role (columns :data:`COLUMNS`; ``partner``:
    for an inhibitor, the mover whose queries it composes into most, ``L<layer>H<head>``).

    ``writes``: each head's write role (index (layer, head), NaN where none), from
    :func:`interp.classify.writes.write_labels`.
    """
    if task_attention is None or effects is None or task_attention.empty or effects.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    seen = looked_at(task_attention, attends_min)
    if seen.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    measured = exact_effects(effects, sorted(set(seen["task"])))
    seen = seen.merge(
        measured.rename(
            columns={
                "metric": "task",
                "delta": "effect",
                "ci_low": "effect_low",
                "ci_high": "effect_high",
            }
        ),
        on=["task", "layer", "head"],
    )
    written = writes.reindex(pd.MultiIndex.from_frame(seen[["layer", "head"]])).to_numpy()
    helps = seen["effect_low"].to_numpy() > 0
    matters = helps | (seen["effect_high"].to_numpy() < 0)
    role = np.full(len(seen), np.nan, dtype=object)
    role[(written == "copying") & helps] = "mover"
    role[(written == "copy_suppression") & matters] = "negative_mover"
    seen["task_role"] = role
    seen["partner"] = np.nan
    movers = seen[seen["task_role"].notna()]
    inhibitors = _inhibitors(seen[seen["task_role"].isna() & matters], movers, composition)
    out = pd.concat([movers, inhibitors], ignore_index=True)
    return out[list(COLUMNS)].sort_values(["task", "layer", "head"]).reset_index(drop=True)


def _inhibitors(
    candidates: pd.DataFrame, movers: pd.DataFrame, composition: pd.DataFrame | None
) -> pd.DataFrame:
    """The candidates (heads that attend to a named token and matter to the task) whose output
    composes into a mover's queries above the null; partner: the mover it composes into most."""
    if composition is None or composition.empty or candidates.empty or movers.empty:
        return candidates.iloc[:0]
    q = composition[
        (composition["kind"] == "q") & (composition["value"] > composition["null_high"])
    ]
    found = []
    for task, group in candidates.groupby("task", sort=False):
        readers = movers[movers["task"] == task][["layer", "head"]]
        into = q.merge(readers, on=["layer", "head"])
        for row in group.itertuples(index=False):
            mine = into[(into["writer_layer"] == row.layer) & (into["writer_head"] == row.head)]
            if mine.empty:
                continue
            top = mine.loc[mine["value"].idxmax()]
            found.append(
                {
                    **row._asdict(),
                    "task_role": "inhibitor",
                    "partner": f"L{top['layer']}H{top['head']}",
                }
            )
    return pd.DataFrame(found, columns=candidates.columns) if found else candidates.iloc[:0]

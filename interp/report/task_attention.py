"""The report's section on a task's named positions: which heads attend most from one to another.

Reads the ``task_attention`` table (written by the ablate stage for tasks with
``named_positions``, :mod:`interp.ablate.task_attention`) and keeps, for every task and every
(query -> key) pair, the :data:`TOP` heads with the largest mean attention; the whole table is
in the run directory. A run without the table gets no section.
"""

from __future__ import annotations

import pandas as pd

from interp.report import content as C

TOP = 3  # heads shown per (task, query -> key)


def top_heads(table: pd.DataFrame, top: int = TOP) -> pd.DataFrame:
    """Per (task, query, key), in the table's order, the ``top`` heads by attention (ties: the
    lower layer, then head, first), as report columns."""
    order = table.assign(_pair=table.groupby(["task", "query", "key"], sort=False).ngroup())
    order = order.sort_values(
        ["_pair", "attention", "layer", "head"], ascending=[True, False, True, True], kind="stable"
    )
    best = order.groupby("_pair", sort=False).head(top)
    return pd.DataFrame(
        {
            "task": best["task"],
            "query → key": best["query"] + " → " + best["key"],
            "head": "L" + best["layer"].astype(str) + "H" + best["head"].astype(str),
            "attention": best["attention"],
            "ci_low": best["ci_low"],
            "ci_high": best["ci_high"],
            "n": best["n"],
        }
    ).reset_index(drop=True)


def task_attention_section(table: pd.DataFrame | None) -> C.Section | None:
    """The section, or None when the run has no ``task_attention`` rows."""
    if table is None or table.empty:
        return None
    return C.section(
        "task-attention",
        "Attention between named positions",
        C.Text(
            f"For each task that names positions in its sequences, and each pair of them (query → key): the "
            f"{TOP} heads with the largest mean attention weight from the query position to the key position over "
            f"the task's sequences, with its 95% bootstrap interval over sequences; n: the sequences in which the "
            f"key is not after the query. Every head is in the task_attention table."
        ),
        C.table(
            top_heads(table),
            "task-attention-table",
            intervals={"attention": ("ci_low", "ci_high")},
            filter="Filter pairs:",
        ),
    )

"""The schema of every table the toolkit writes, declared once: the columns (name, declared type,
whether optional or a pattern, what they mean) are data in ``interp/pipeline/tables.tsv``, one line each.

Each table is tidy (one observation per row) and written as parquet and csv. `interp tables`
prints this schema; the documentation's column reference (docs/reference/tables.md) is generated from the same text
(``python tools/docs.py``, block ``generated:columns``). Missing
values are NaN, never a sentinel.

Column types are enforced both ways: :meth:`Table.validate` casts a frame to the declared
dtypes before it is written and after it is read, and refuses one that cannot be (a missing
column, text in a number column, a missing value in an integer column), so a table on disk
always means what this file says.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib.resources import files

import numpy as np
import pandas as pd

# Declared type -> the pandas dtype a column holds. Text columns allow missing values (NaN);
# integer columns do not (a missing count is a bug, not data).
DTYPES = {"int": "int64", "float": "float64", "str": "object"}


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str
    doc: str
    # Since features version 3: a run written before has no such column, and is still read
    # (the report draws what it can); when present it is cast like any other.
    optional: bool = False


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]
    # Columns whose name follows a pattern (one per role, ...): documented, not enforced.
    pattern_columns: tuple[Column, ...] = ()

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def validate(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The frame with declared columns first, cast to their declared dtypes.

        Raises ValueError naming the table and column when a declared column is missing, its
        values cannot take the declared type, or a float column holds an infinity.
        """
        missing = [c.name for c in self.columns if c.name not in frame.columns and not c.optional]
        if missing:
            raise ValueError(f"table {self.name!r} lacks columns {missing}")
        present = [c for c in self.columns if c.name in frame.columns]
        extra = [c for c in frame.columns if c not in self.names]
        frame = frame[[c.name for c in present] + extra].copy()
        for col in present:
            frame[col.name] = _cast(frame[col.name], col, self.name)
        return frame

    def finite(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The frame with infinite values of its float columns replaced by NaN (for writers:
        a table on disk holds no infinities, and :meth:`validate` refuses one that does)."""
        floats = [c.name for c in self.columns if c.dtype == "float" and c.name in frame.columns]
        if not floats:
            return frame
        frame = frame.copy()
        frame[floats] = frame[floats].replace([np.inf, -np.inf], np.nan)
        return frame


def _cast(values: pd.Series, col: Column, table: str) -> pd.Series:
    target = DTYPES[col.dtype]
    try:
        if col.dtype == "str":
            return values.astype(object).map(
                lambda v: np.nan if pd.isna(v) else v if isinstance(v, str) else str(v)
            )
        if col.dtype == "int" and values.isna().any():
            raise ValueError("missing values")
        out = pd.to_numeric(values, errors="raise").astype(target)
        if col.dtype == "float" and np.isinf(out.to_numpy()).any():
            raise ValueError("infinite values (a table holds NaN where there is no finite value)")
        if col.dtype == "int" and not np.array_equal(
            out.to_numpy(), pd.to_numeric(values).to_numpy()
        ):
            raise ValueError("non-integer values")
        return out
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"table {table!r}: column {col.name!r} must be {col.dtype} ({exc})"
        ) from None


def _read_columns() -> dict[str, list[tuple[str, Column]]]:
    """table -> [(kind, Column)] from ``tables.tsv`` (kind: required, optional or pattern)."""
    text = files("interp.pipeline").joinpath("tables.tsv").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    out: dict[str, list[tuple[str, Column]]] = {}
    for r in csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE):
        column = Column(r["column"], r["dtype"], r["doc"], optional=r["kind"] == "optional")
        out.setdefault(r["table"], []).append((r["kind"], column))
    return out


def _table(name: str, doc: str) -> Table:
    columns = _COLUMNS[name]
    return Table(
        name,
        doc,
        tuple(c for kind, c in columns if kind != "pattern"),
        tuple(c for kind, c in columns if kind == "pattern"),
    )


_COLUMNS = _read_columns()
FEATURES = _table(
    "features",
    (
        "One row per (layer, head, feature): how much attention the head puts where the feature "
        "looks."
    ),
)
SINKS = _table(
    "sinks",
    (
        "One row per (layer, head, probe suite): how much of its attention the head parks on the first "
        "position in that suite (written by collect)."
    ),
)
ROLES_TABLE = _table(
    "roles",
    (
        "One row per head: its primary role, how sure, a second role, its sink mass, and how "
        "stable under resampled probes."
    ),
)
EFFECTS = _table(
    "effects",
    ("One row per (layer, head, ablation, metric): what removing the head does to the metric."),
)
PRUNING = _table(
    "pruning",
    (
        "One row per step of cumulative head removal, each metric's least important heads first "
        "(ordered by that metric's effects, measured on a held-out evaluation corpus), and one per "
        "role whose heads are removed together."
    ),
)

SYNTAX = _table(
    "syntax",
    (
        "One row per (corpus, relation, direction, rank): the best heads of each treebank at linking a word "
        "to its gold dependency partner, beside the fixed rules that need no syntax (written by collect)."
    ),
)

TASK_ATTENTION = _table(
    "task_attention",
    (
        "One row per (task, layer, head, query, key), for tasks that name positions (interp.Task's "
        "named_positions): how much the head attends from one named position to another on the "
        "task's own sequences (written by ablate)."
    ),
)

WEIGHTS = _table(
    "weights",
    (
        "One row per (layer, head, score): what the head's weights say it writes (its OV circuit "
        "through the embedding and unembedding) and how much it writes, beside a null (written by "
        "weights)."
    ),
)
COMPOSITION = _table(
    "composition",
    (
        "One row per (kind, reading head, earlier writing head): how much of what the reader's "
        "queries, keys or values read the writer's output could supply (written by weights)."
    ),
)

TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        FEATURES,
        SYNTAX,
        SINKS,
        ROLES_TABLE,
        EFFECTS,
        PRUNING,
        TASK_ATTENTION,
        WEIGHTS,
        COMPOSITION,
    )
}


def describe() -> str:
    """Plain-text reference of every table and column (printed by `interp tables`)."""
    lines: list[str] = []
    for table in TABLES.values():
        lines.append(f"{table.name}: {table.doc}")
        for col in table.columns + table.pattern_columns:
            lines.append(f"  {col.name:<18} {col.dtype:<6} {col.doc}")
        lines.append("")
    return "\n".join(lines)

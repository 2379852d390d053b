"""The schema of every table the toolkit writes, declared once: each table (what one row is) and its
columns (name, declared type, whether optional or a pattern, what they mean) are data in
``interp/pipeline/tables.tsv``, one line each. A stage names the tables it writes
(:mod:`interp.pipeline.contract`); a stage outside interp declares its own with :func:`declare`.

Each table is tidy (one observation per row) and written as parquet and csv. `interp tables`
prints this schema; the README's column reference is generated from the same text
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


def read_schema(text: str) -> dict[str, Table]:
    """The tables of a schema in the form of ``tables.tsv`` (tab-separated: table, column, dtype,
    kind, doc; ``#`` lines are comments): a ``table`` line gives a table's description, each other
    line one of its columns (kind: required, optional or pattern)."""
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    docs: dict[str, str] = {}
    columns: dict[str, list[tuple[str, Column]]] = {}
    for r in csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE):
        if r["kind"] == "table":
            docs[r["table"]] = r["doc"]
            continue
        column = Column(r["column"], r["dtype"], r["doc"], optional=r["kind"] == "optional")
        columns.setdefault(r["table"], []).append((r["kind"], column))
    return {
        name: Table(
            name,
            doc,
            tuple(c for kind, c in columns.get(name, ()) if kind != "pattern"),
            tuple(c for kind, c in columns.get(name, ()) if kind == "pattern"),
        )
        for name, doc in docs.items()
    }


def declare(tables: tuple[Table, ...]) -> None:
    """Add the tables of a stage outside interp to the schema (the stage's ``schema``, registered
    with it). A name declared already with other columns is refused."""
    for table in tables:
        if TABLES.get(table.name, table) != table:
            raise ValueError(
                f"a table named {table.name!r} is declared already, with other columns"
            )
    TABLES.update({table.name: table for table in tables})


def undeclare(tables: tuple[Table, ...]) -> None:
    """Drop the tables :func:`declare` added (the stage is unregistered)."""
    for table in tables:
        TABLES.pop(table.name, None)


# Every table the toolkit's stages write, in the schema's order.
TABLES: dict[str, Table] = read_schema(
    files("interp.pipeline").joinpath("tables.tsv").read_text(encoding="utf-8")
)
FEATURES = TABLES["features"]
SYNTAX = TABLES["syntax"]
SINKS = TABLES["sinks"]
ROLES_TABLE = TABLES["roles"]
EFFECTS = TABLES["effects"]
PRUNING = TABLES["pruning"]
TASK_ATTENTION = TABLES["task_attention"]


def describe() -> str:
    """Plain-text reference of every table and column (printed by `interp tables`)."""
    lines: list[str] = []
    for table in TABLES.values():
        lines.append(f"{table.name}: {table.doc}")
        for col in table.columns + table.pattern_columns:
            lines.append(f"  {col.name:<18} {col.dtype:<6} {col.doc}")
        lines.append("")
    return "\n".join(lines)

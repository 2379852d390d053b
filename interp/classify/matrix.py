"""Features table -> the per-head feature matrix the classifier reads, and the sink shares beside it.

One row per head, indexed by (layer, head). The classifier's columns (``COLUMNS``) describe the
head's *non-sink* attention (interp.collect.features), one per role except ``first_token``:

- ``previous_token``, ``current_token``, ``next_token``, ``delimiter``, ``duplicate_token``,
  ``induction``, ``local``: the baseline-normalised *lift* ``(value - baseline) / (1 - baseline)``.
  0 is what a head with no preference scores (its non-sink mass spread uniformly over the
  non-sink keys), 1 is all non-sink mass on the targets, negative is avoidance. Lifts mean the
  same on short and long sequences, and however much the head sinks.
- ``positional``: the best lift over the features ``position:<k>`` / ``position:end-<j>`` with
  at least ``MIN_QUERIES`` eligible queries.
- ``syntactic``: the best lift over the fixed-rule baseline across the syntactic features
  ``syntactic:<relation>:<direction>`` (Clark et al. 2019: a head counts only where it beats
  "always attend to the word d positions away"; we also make it beat "always attend to word w"
  and "attend to the nearest word spelled f", see :func:`interp.collect.syntax.fixed_rule_counts`),
  each lift first shrunk by two binomial standard errors of that baseline,
  ``(value - b - 2 sqrt(b (1-b) / n)) / (1 - b)``, so that a relation whose offset already
  explains 92% of arcs cannot win on sampling noise. Features with fewer than ``MIN_ARCS`` arcs
  or a baseline of 1 are skipped; the best lift is floored at -1. (Clark's argmax over words
  means nothing for a head whose attention is nearly all on the sink: such a head is
  ``first_token`` by the sink rule whatever this column says, see interp.classify.primary.)
- ``broad``: the normalised entropy over the content keys itself (1 = uniform), not a lift: its
  baseline is 1 by construction.

Beside them, :func:`sink_shares` gives, per head, the mass on the first position over the
queries each column was measured on (``sink:<column>``; for positional and syntactic, the best
feature's queries) and over every content query (``sink_mass``, the ``first_token`` feature):
what the sink rule reads.

Missing values (NaN). A feature without eligible positions (``next_token`` in a causal model,
``induction`` without repeated-token probes, every syntactic feature without syntax probes), or
a head with no mass off the sink there, says nothing about the head, so it is imputed as "no
preference": lift 0 (``syntactic`` and ``positional`` 0 too). A missing ``broad`` (no text
probes at all) is imputed as ``BROAD_MISSING`` = 0.5, halfway between a one-hot head and a
uniform one, so that missing text neither makes a head look broad nor sharp. A missing sink share
falls back to the head's ``sink_mass``, and that to 0.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from interp.roles import FEATURE_GROUP_PREFIX, LOOKS, ROLES

SINK_ROLE = "first_token"
# one column per role that describes non-sink attention, in catalogue order
COLUMNS: tuple[str, ...] = tuple(r for r in LOOKS if r != SINK_ROLE)
GROUP_COLUMNS = FEATURE_GROUP_PREFIX
LIFT_COLUMNS: tuple[str, ...] = tuple(c for c in COLUMNS if c not in GROUP_COLUMNS and c != "broad")
SINK_MASS = "sink_mass"
SINK_COLUMNS: tuple[str, ...] = tuple(f"sink:{c}" for c in COLUMNS) + (SINK_MASS,)
MIN_ARCS = 20
MIN_QUERIES = 20
BROAD_MISSING = 0.5


def columns_from_arrays(
    values: np.ndarray,
    names: list[str] | tuple[str, ...],
    baselines: np.ndarray,
    counts: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """values float [..., feature] (features in ``names`` order) -> (matrix float [..., column],
    source long [..., column]: the feature index each column was read from, -1 where imputed).

    ``baselines`` float [..., feature] or [feature] (the features table's ``baseline``);
    ``counts`` float [feature] (its ``n``), None meaning every feature has enough positions.
    """
    values = np.asarray(values, dtype=float)
    baselines = np.broadcast_to(np.asarray(baselines, dtype=float), values.shape)
    counts = np.full(len(names), np.inf) if counts is None else np.asarray(counts, dtype=float)
    index = {name: i for i, name in enumerate(names)}
    out = np.zeros(values.shape[:-1] + (len(COLUMNS),))
    source = np.full(out.shape, -1, dtype=int)
    with np.errstate(invalid="ignore", divide="ignore"):
        for j, col in enumerate(COLUMNS):
            feature = ROLES[col].feature
            if col in GROUP_COLUMNS:
                out[..., j], source[..., j] = _best(values, names, baselines, counts, col)
            elif feature not in index:
                out[..., j] = BROAD_MISSING if col == "broad" else 0.0
            elif col == "broad":
                i = index[feature]
                out[..., j] = np.where(np.isfinite(values[..., i]), values[..., i], BROAD_MISSING)
                source[..., j] = np.where(np.isfinite(values[..., i]), i, -1)
            else:
                i = index[feature]
                lift = (values[..., i] - baselines[..., i]) / (1.0 - baselines[..., i])
                out[..., j] = np.where(np.isfinite(lift), lift, 0.0)
                source[..., j] = np.where(np.isfinite(lift), i, -1)
    return out, source


def matrix_from_arrays(
    values: np.ndarray,
    names: list[str] | tuple[str, ...],
    baselines: np.ndarray,
    counts: np.ndarray | None = None,
) -> np.ndarray:
    """The matrix of :func:`columns_from_arrays` alone: float [..., column]."""
    return columns_from_arrays(values, names, baselines, counts)[0]


def _best(
    values: np.ndarray, names, baselines: np.ndarray, counts: np.ndarray, col: str
) -> tuple[np.ndarray, np.ndarray]:
    """Best lift over a feature group (see the module docstring) and which feature gave it."""
    prefix = GROUP_COLUMNS[col]
    syntactic = col == "syntactic"
    least = MIN_ARCS if syntactic else MIN_QUERIES
    slots = [i for i, name in enumerate(names) if name.startswith(prefix) and counts[i] >= least]
    shape = values.shape[:-1]
    if not slots:
        return np.zeros(shape), np.full(shape, -1)
    v, b, n = values[..., slots], baselines[..., slots], counts[slots]
    floor = 2.0 * np.sqrt(b * (1.0 - b) / n) if syntactic else 0.0
    lift = (v - b - floor) / (1.0 - b)
    lift = np.where(np.isfinite(lift) & (b < 1.0), lift, -np.inf)
    arg = lift.argmax(-1)
    best = np.take_along_axis(lift, arg[..., None], -1)[..., 0]
    found = np.isfinite(best)
    lowest = -1.0 if syntactic else -np.inf
    return np.where(found, np.maximum(best, lowest), 0.0), np.where(
        found, np.asarray(slots)[arg], -1
    )


def sinks_from_arrays(sinks: np.ndarray, source: np.ndarray, head_sink: np.ndarray) -> np.ndarray:
    """Sink shares float [..., column + 1] (``SINK_COLUMNS``): ``sinks`` float [..., feature] (the
    table's ``sink_mass``), ``source`` from :func:`columns_from_arrays`, ``head_sink`` float [...]."""
    head = np.where(np.isfinite(head_sink), head_sink, 0.0)
    picked = np.take_along_axis(sinks, np.maximum(source, 0), -1)
    picked = np.where((source >= 0) & np.isfinite(picked), picked, head[..., None])
    return np.concatenate([picked, head[..., None]], -1)


def head_matrix(features: pd.DataFrame) -> pd.DataFrame:
    """The per-head feature matrix (see the module docstring), indexed by (layer, head), columns COLUMNS.

    ``features`` is a features table (interp.pipeline.tables.FEATURES): layer, head, feature, value,
    baseline, n. Unknown features are ignored; absent ones are imputed like NaN.
    """
    return head_frames(features)[0]


def sink_shares(features: pd.DataFrame) -> pd.DataFrame:
    """Per head, the sink share behind each column and overall: columns SINK_COLUMNS."""
    return head_frames(features)[1]


def head_frames(features: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(head_matrix, sink_shares) of a features table, in one pass."""
    missing = {"layer", "head", "feature", "value", "baseline", "n"} - set(features.columns)
    if missing:
        raise ValueError(f"features table lacks columns {sorted(missing)}")
    if features.empty:
        raise ValueError("features table is empty")
    arrays = table_arrays(features)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        matrix, source = columns_from_arrays(
            arrays.values, arrays.names, arrays.baselines, arrays.counts
        )
        head_sink = (
            arrays.sinks[:, arrays.names.index(SINK_ROLE)]
            if SINK_ROLE in arrays.names
            else np.full(len(matrix), np.nan)
        )
        sinks = sinks_from_arrays(arrays.sinks, source, head_sink)
    return (
        pd.DataFrame(matrix, index=arrays.index, columns=list(COLUMNS)),
        pd.DataFrame(sinks, index=arrays.index, columns=list(SINK_COLUMNS)),
    )


@dataclass
class TableArrays:
    """A features table as arrays, one row per head and one column per feature."""

    values: np.ndarray  # float [head, feature]
    names: list[str]
    baselines: np.ndarray  # float [head, feature]
    sinks: np.ndarray  # float [head, feature]
    counts: np.ndarray  # float [feature]
    index: pd.MultiIndex  # (layer, head)


def table_arrays(features: pd.DataFrame) -> TableArrays:
    """The features table pivoted to one row per head (index (layer, head)) and one column per feature.

    The sink column is optional (tables without it read as NaN: the sink rule then sees no sink).
    """
    names = [str(n) for n in pd.unique(features["feature"])]
    keyed = features.set_index(["layer", "head", "feature"])

    def wide(column: str) -> pd.DataFrame:
        if column not in keyed.columns:
            return pd.DataFrame(np.nan, index=wide("value").index, columns=names)
        return keyed[column].unstack("feature").reindex(columns=names)

    values = wide("value")
    counts = features.groupby("feature", sort=False)["n"].first().reindex(names)
    index = pd.MultiIndex.from_tuples(
        [(int(l), int(h)) for l, h in values.index], names=["layer", "head"]
    )
    return TableArrays(
        values.to_numpy(dtype=float),
        names,
        wide("baseline").to_numpy(dtype=float),
        wide(SINK_MASS).to_numpy(dtype=float),
        counts.to_numpy(dtype=float),
        index,
    )

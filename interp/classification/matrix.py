"""Features table -> the per-head feature matrix the classifier reads.

One row per head, indexed by (layer, head); one column per named role, named after the role:

- ``previous_token``, ``current_token``, ``next_token``, ``first_token``, ``delimiter``,
  ``duplicate_token``, ``induction``, ``local``: the baseline-normalised *lift*
  ``(value - baseline) / (1 - baseline)``. 0 is what a head with no preference scores (uniform
  attention over the keys it may see), 1 is all mass on the targets, negative is avoidance. Lifts
  mean the same on short and long sequences, which raw masses do not.
- ``syntactic``: the best lift over the fixed-rule baseline across the syntactic features
  ``syntactic:<relation>:<direction>`` (Clark et al. 2019: a head counts only where it beats
  "always attend to the word d positions away"; we also make it beat "always attend to word w"
  and "attend to the nearest word spelled f", see :func:`interp.features.fixed_rule_counts`), each lift first shrunk by two binomial standard
  errors of that baseline, ``(value - b - 2 sqrt(b (1-b) / n)) / (1 - b)``, so that a relation
  whose offset already explains 92% of arcs cannot win on sampling noise. Features with fewer
  than ``MIN_ARCS`` arcs or a baseline of 1 are skipped; the best lift is floored at -1.
  Clark's score is an argmax over the words a head attends to, which means nothing when nearly
  all of its attention sits on the first token: the argmax then falls on whatever crumbs are
  left (a pure BOS sink "predicts" the first word, the gold partner of every fronted
  preposition). So the lift is scaled by ``min(1, (1 - first_token value) / SINK_MARGIN)``:
  unchanged while at least 10% of the mass is off the sink, 0 for a pure sink.
- ``broad``: the normalised attention entropy itself (1 = uniform), not a lift: its baseline is
  1 by construction.

Missing values (NaN). A feature without eligible positions (``next_token`` in a causal model,
``induction`` without repeated-token probes, every syntactic feature without syntax probes) says
nothing about the head, so it is imputed as "no preference": lift 0 (``syntactic`` 0 too). A
missing ``broad`` (no text probes at all) is imputed as ``BROAD_MISSING`` = 0.5, halfway between
a one-hot head and a uniform one, so that missing text neither makes a head look broad nor sharp.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from interp.roles import NAMED_ROLES, ROLES

COLUMNS: tuple[str, ...] = NAMED_ROLES  # one column per named role, in catalogue order
LIFT_COLUMNS: tuple[str, ...] = tuple(c for c in COLUMNS if c not in ("syntactic", "broad"))
MIN_ARCS = 20
BROAD_MISSING = 0.5
SINK_MARGIN = 0.1
SYNTACTIC_PREFIX = "syntactic:"


def matrix_from_arrays(values: np.ndarray, names: list[str] | tuple[str, ...], baselines: np.ndarray,
                       counts: np.ndarray | None = None) -> np.ndarray:
    """values float [..., feature] (features in ``names`` order) -> matrix float [..., column].

    ``baselines`` and ``counts`` are float [feature] (the features table's ``baseline`` and ``n``);
    ``counts`` None means every syntactic feature has enough arcs.
    """
    values = np.asarray(values, dtype=float)
    baselines = np.asarray(baselines, dtype=float)
    counts = np.full(len(names), np.inf) if counts is None else np.asarray(counts, dtype=float)
    index = {name: i for i, name in enumerate(names)}
    out = np.zeros(values.shape[:-1] + (len(COLUMNS),))
    with np.errstate(invalid="ignore", divide="ignore"):
        for j, col in enumerate(COLUMNS):
            feature = ROLES[col].feature
            if col == "syntactic":
                out[..., j] = _syntactic(values, names, baselines, counts)
                if "first_token" in index:
                    off_sink = (1.0 - values[..., index["first_token"]]) / SINK_MARGIN
                    out[..., j] *= np.where(np.isfinite(off_sink), np.clip(off_sink, 0.0, 1.0), 1.0)
            elif feature not in index:
                out[..., j] = BROAD_MISSING if col == "broad" else 0.0
            elif col == "broad":
                v = values[..., index[feature]]
                out[..., j] = np.where(np.isfinite(v), v, BROAD_MISSING)
            else:
                i = index[feature]
                lift = (values[..., i] - baselines[i]) / (1.0 - baselines[i])
                out[..., j] = np.where(np.isfinite(lift), lift, 0.0)
    return out


def _syntactic(values: np.ndarray, names, baselines: np.ndarray, counts: np.ndarray) -> np.ndarray:
    slots = [i for i, name in enumerate(names) if name.startswith(SYNTACTIC_PREFIX)
             and counts[i] >= MIN_ARCS and np.isfinite(baselines[i]) and baselines[i] < 1.0]
    if not slots:
        return np.zeros(values.shape[:-1])
    b, n = baselines[slots], counts[slots]
    floor = 2.0 * np.sqrt(b * (1.0 - b) / n)
    lift = (values[..., slots] - b - floor) / (1.0 - b)
    lift = np.where(np.isfinite(lift), lift, -np.inf)
    best = lift.max(-1)
    return np.where(np.isfinite(best), np.maximum(best, -1.0), 0.0)


def head_matrix(features: pd.DataFrame) -> pd.DataFrame:
    """The per-head feature matrix (see the module docstring), indexed by (layer, head), columns COLUMNS.

    ``features`` is a features table (interp.tables.FEATURES): layer, head, feature, value,
    baseline, n. Unknown features are ignored; absent ones are imputed like NaN.
    """
    missing = {"layer", "head", "feature", "value", "baseline", "n"} - set(features.columns)
    if missing:
        raise ValueError(f"features table lacks columns {sorted(missing)}")
    if features.empty:
        raise ValueError("features table is empty")
    values, names, baselines, counts, index = table_arrays(features)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        matrix = matrix_from_arrays(values, names, baselines, counts)
    return pd.DataFrame(matrix, index=index, columns=list(COLUMNS))


def table_arrays(features: pd.DataFrame) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray, pd.MultiIndex]:
    """values [head, feature], feature names, baselines [feature], counts [feature], (layer, head) index."""
    names = [str(n) for n in pd.unique(features["feature"])]
    wide = features.set_index(["layer", "head", "feature"])["value"].unstack("feature").reindex(columns=names)
    per_feature = features.groupby("feature", sort=False)[["baseline", "n"]].first().reindex(names)
    index = pd.MultiIndex.from_tuples([(int(l), int(h)) for l, h in wide.index], names=["layer", "head"])
    return (wide.to_numpy(dtype=float), names, per_feature["baseline"].to_numpy(dtype=float),
            per_feature["n"].to_numpy(dtype=float), index)

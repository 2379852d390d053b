"""How stable a head's label is under resampled probes.

The collect stage keeps Poisson-bootstrap replicates of every feature value (each probe
sequence reweighted by Poisson(1) in each replicate; ``FeatureAccumulator.replicates()``, saved
as ``feature_replicates.npz`` in the run directory). Each replicate is turned into a feature
matrix exactly like the real values (same baselines, same imputation) and re-labelled, the sink
rule reading the full data's sink shares (the sink mass of a head rests on every content query
and moves far less under resampling than the role features); a head's stability is the share
of replicates that give it the same primary role as the full data. A head near a decision
boundary, or one whose features rest on few positions, scores low.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from interp.classify.estimator import HeadRoleClassifier
from interp.classify.matrix import COLUMNS, SINK_COLUMNS, matrix_from_arrays
from interp.classify.primary import primary_roles


def replicate_labels(
    clf: HeadRoleClassifier,
    replicates: np.ndarray,
    names: list[str],
    baselines: np.ndarray,
    counts: np.ndarray | None = None,
    sinks: np.ndarray | None = None,
) -> np.ndarray:
    """Primary role of every head on every replicate: str [replicate, layer, head].

    ``replicates`` float [replicate, layer, feature, head] with features in ``names`` order;
    ``baselines`` float [layer, head, feature] (or [feature]) and ``counts`` float [feature] in the
    same order; ``sinks`` float [layer, head, sink column] (matrix.SINK_COLUMNS), None: no sink rule.
    """
    replicates = np.asarray(replicates, dtype=float)
    if replicates.ndim != 4 or replicates.shape[2] != len(names):
        raise ValueError(
            f"replicates must be [replicate, layer, feature, head] with {len(names)} features, "
            f"got shape {replicates.shape}"
        )
    values = replicates.transpose(0, 1, 3, 2)  # [replicate, layer, head, feature]
    with np.errstate(invalid="ignore", divide="ignore"):
        matrix = matrix_from_arrays(values, names, baselines, counts)
    flat = pd.DataFrame(matrix.reshape(-1, len(COLUMNS)), columns=list(COLUMNS))
    if sinks is None:
        return np.asarray(clf.predict(flat)).reshape(values.shape[:3])

    tiled = np.broadcast_to(sinks[None], values.shape[:3] + (sinks.shape[-1],)).reshape(
        -1, sinks.shape[-1]
    )
    return primary_roles(clf, flat, pd.DataFrame(tiled, columns=list(SINK_COLUMNS))).reshape(
        values.shape[:3]
    )


def stability(
    clf: HeadRoleClassifier,
    replicates: np.ndarray | None,
    names: list[str] | None,
    baselines: np.ndarray,
    counts: np.ndarray | None,
    primary: pd.Series,
    sinks: np.ndarray | None = None,
) -> pd.Series:
    """Share of replicates giving each head its primary role (NaN for every head when
    ``replicates`` is None). ``primary`` is the label per head, indexed by (layer, head)."""
    if replicates is None:
        return pd.Series(np.nan, index=primary.index, name="stability")
    if names is None:
        raise ValueError("replicates need their feature names (names=...)")
    labels = replicate_labels(clf, replicates, list(names), baselines, counts, sinks)
    n_layers, n_heads = labels.shape[1:]
    out = pd.Series(np.nan, index=primary.index, name="stability")
    for (layer, head), role in primary.items():
        if layer < n_layers and head < n_heads:
            out[(layer, head)] = float((labels[:, layer, head] == role).mean())
    return out


def grid(rows: np.ndarray, index: pd.MultiIndex, n_layers: int, n_heads: int) -> np.ndarray:
    """Per-head rows float [head, ...] indexed by (layer, head) -> float [layer, head, ...] (NaN where absent)."""
    out = np.full((n_layers, n_heads) + rows.shape[1:], np.nan)
    for i, (layer, head) in enumerate(index):
        if layer < n_layers and head < n_heads:
            out[layer, head] = rows[i]
    return out

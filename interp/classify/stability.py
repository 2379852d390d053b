"""How stable a head's label is under resampled probes.

The collect stage keeps Poisson-bootstrap replicates of every feature value (each probe
sequence reweighted by Poisson(1) in each replicate; ``FeatureAccumulator.replicates()``, saved
as ``feature_replicates.npz`` in the run directory). Each replicate is turned into a feature
matrix exactly like the real values (same baselines, same imputation) and re-labelled, the sink
rule reading the full data's sink shares (the sink mass of a head rests on every content query
and moves far less under resampling than the role features); a head's stability is the share
of replicates that give it the same primary role as the full data. Given the mixture detectors,
a replicate reads blends as the full data does (interp.classify.mixture): a ``mixed`` head keeps
its role on a replicate only where the same roles hold (shares aside), and an ``unexplained`` head
that reads as a blend there has not kept its own; so it is with the frequent-token rule
(interp.classify.frequent). A head near a decision boundary, or one whose
features rest on few positions, scores low.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from interp.classify import frequent
from interp.classify.estimator import HeadRoleClassifier
from interp.classify.matrix import COLUMNS, SINK_COLUMNS, matrix_from_arrays, table_arrays
from interp.classify.mixture import (
    FEATURES,
    MIXED,
    Detectors,
    blend_key,
    component_roles,
    mixture_eligible,
    relabel_blends,
)
from interp.classify.primary import primary_roles
from interp.roles import UNMEASURED


def replicate_labels(
    clf: HeadRoleClassifier,
    replicates: np.ndarray,
    names: list[str],
    baselines: np.ndarray,
    counts: np.ndarray | None = None,
    sinks: np.ndarray | None = None,
    detectors: Detectors | None = None,
    eligible: np.ndarray | None = None,
) -> np.ndarray:
    """Primary role of every head on every replicate: str [replicate, layer, head].

    ``replicates`` float [replicate, layer, feature, head] with features in ``names`` order;
    ``baselines`` float [layer, head, feature] (or [feature]) and ``counts`` float [feature] in the
    same order; ``sinks`` float [layer, head, sink column] (matrix.SINK_COLUMNS), None: no sink rule;
    ``detectors``: the mixture detectors, which relabel the ``unexplained`` heads that are blends
    (:func:`interp.classify.mixture.blend_key`) among those ``eligible`` (bool [layer, head];
    None: all); None: no blends are read.
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
        labels = np.asarray(clf.predict(flat)).astype(str)
    else:
        tiled = np.broadcast_to(sinks[None], values.shape[:3] + (sinks.shape[-1],)).reshape(
            -1, sinks.shape[-1]
        )
        labels = primary_roles(clf, flat, pd.DataFrame(tiled, columns=list(SINK_COLUMNS)))
    if detectors is not None:
        heads = values.shape[1:3]
        allowed = np.ones(heads, dtype=bool) if eligible is None else np.asarray(eligible, bool)
        tiled_ok = np.broadcast_to(allowed[None], values.shape[:3]).reshape(-1)
        labels = relabel_blends(labels, flat[list(FEATURES)].to_numpy(), tiled_ok, detectors)
        labels = frequent.relabel(labels, frequent.lifts(values, names, baselines).reshape(-1))
    return np.asarray(labels).astype(str).reshape(values.shape[:3])


def stability(
    clf: HeadRoleClassifier,
    replicates: np.ndarray | None,
    names: list[str] | None,
    baselines: np.ndarray,
    counts: np.ndarray | None,
    primary: pd.Series,
    sinks: np.ndarray | None = None,
    detectors: Detectors | None = None,
    eligible: np.ndarray | None = None,
) -> pd.Series:
    """Share of replicates giving each head its primary role (NaN for every head when
    ``replicates`` is None). ``primary`` is the label per head, indexed by (layer, head); with
    ``detectors`` (and ``eligible``, see :func:`replicate_labels`), a mixed head's label is its
    :func:`~interp.classify.mixture.blend_key`."""
    if replicates is None:
        return pd.Series(np.nan, index=primary.index, name="stability")
    if names is None:
        raise ValueError("replicates need their feature names (names=...)")
    labels = replicate_labels(
        clf, replicates, list(names), baselines, counts, sinks, detectors, eligible
    )
    n_layers, n_heads = labels.shape[1:]
    out = pd.Series(np.nan, index=primary.index, name="stability")
    for (layer, head), role in primary.items():
        if layer < n_layers and head < n_heads:
            out[(layer, head)] = float((labels[:, layer, head] == role).mean())
    return out


def head_stability(
    clf: HeadRoleClassifier,
    features: pd.DataFrame,
    replicates: np.ndarray,
    names: list[str],
    sinks: pd.DataFrame,
    roles: pd.DataFrame,
    detectors: Detectors,
) -> np.ndarray:
    """Stability of every head's role of where it looks on the replicates (features in ``names``
    order): a mixed head's is that of its blend (see the module docstring); an ``unmeasured``
    head has none. ``roles``: the roles table before the other evidence is read."""
    if replicates.ndim != 4:
        raise ValueError(
            f"replicates must be [replicate, layer, feature, head], got shape {replicates.shape}"
        )
    arrays = table_arrays(features)
    where = {name: i for i, name in enumerate(arrays.names)}
    take = np.array([where.get(n, -1) for n in names], dtype=int)

    def reorder(
        a: np.ndarray,
    ) -> np.ndarray:  # [..., table feature] -> [..., names feature], NaN where absent
        return np.where(take >= 0, a[..., np.maximum(take, 0)], np.nan)

    n_layers, n_heads = replicates.shape[1], replicates.shape[3]
    base = grid(reorder(arrays.baselines), arrays.index, n_layers, n_heads)
    sink_grid = grid(sinks.to_numpy(dtype=float), sinks.index, n_layers, n_heads)
    keys = pd.MultiIndex.from_arrays([roles["layer"].astype(int), roles["head"].astype(int)])
    looks = [
        blend_key(component_roles(parts)) if role == MIXED else role
        for role, parts in zip(roles["role"], roles["components"])
    ]
    eligible = grid(mixture_eligible(roles).astype(float), keys, n_layers, n_heads) == 1
    out = stability(
        clf,
        replicates,
        names,
        base,
        reorder(arrays.counts),
        pd.Series(looks, index=keys),
        sink_grid,
        detectors,
        eligible,
    ).to_numpy()
    return np.where(roles["role"].to_numpy() == UNMEASURED, np.nan, out)


def grid(rows: np.ndarray, index: pd.MultiIndex, n_layers: int, n_heads: int) -> np.ndarray:
    """Per-head rows float [head, ...] indexed by (layer, head) -> float [layer, head, ...] (NaN where absent)."""
    out = np.full((n_layers, n_heads) + rows.shape[1:], np.nan)
    for i, (layer, head) in enumerate(index):
        if layer < n_layers and head < n_heads:
            out[layer, head] = rows[i]
    return out

"""Heads nobody named: recurring groups among the ``unexplained`` heads.

Each head's attention profile is its row of the feature matrix restricted to ``PROFILE``
(its sink mass, the lifts of delimiter, previous/current/next token, local, positional,
duplicate_token, induction, and the normalised entropy), standardised over *all* heads of the model, so a unit
is "one standard deviation of this model's heads" (at least ``MIN_SCALE``, so that a feature on
which all heads agree to within noise cannot dominate). The unexplained heads are grouped by
agglomerative clustering (Ward linkage); the number of groups is the one with the best
silhouette (k = 2 .. min(12, n - 1)), or, with ``distance`` given or fewer than four heads,
every merge below that Euclidean distance (average linkage). Groups of at least ``min_size``
heads are reported: a behaviour that recurs is worth a name, a singleton may be noise.

Each group is described by the (at most three) profile features on which its members differ most
from every other head of the model, by at least half a standard deviation, e.g. "more
sink_mass (mass 0.71 vs 0.32), less broad (entropy 0.21 vs 0.64)".
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.cluster import AgglomerativeClustering
from sklearn.metrics import silhouette_score

from interp.roles import UNEXPLAINED

PROFILE = ("sink_mass", "delimiter", "previous_token", "current_token", "next_token", "local", "positional", "broad",
           "duplicate_token", "induction")
DEFAULT_DISTANCE = 2.0
MIN_DIFFERENCE = 0.5  # standard deviations: smaller differences are not worth a word
MIN_SCALE = 0.05  # floor on a feature's spread: differences of a few hundredths in lift are noise
CLUSTER_COLUMNS = ["cluster", "layer", "head", "description"]


def _labels(z: np.ndarray, distance: float | None) -> np.ndarray:
    n = len(z)
    if distance is not None or n < 4:
        model = AgglomerativeClustering(n_clusters=None, distance_threshold=distance or DEFAULT_DISTANCE,
                                        linkage="average")
        return model.fit_predict(z)
    best, best_score = np.zeros(n, dtype=int), -np.inf
    for k in range(2, min(12, n - 1) + 1):
        labels = AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(z)
        score = silhouette_score(z, labels)
        if score > best_score:
            best, best_score = labels, score
    return best


def describe(members: np.ndarray, z: pd.DataFrame, raw: pd.DataFrame, top: int = 3) -> str:
    """The ``top`` profile features separating ``members`` (bool [head]) from all other heads."""
    diff = z[members].mean() - z[~members].mean()
    order = [f for f in diff.abs().sort_values(ascending=False).index[:top] if abs(diff[f]) >= MIN_DIFFERENCE]
    if not order:
        return "no profile feature sets them apart from the other heads"
    parts = []
    for f in order:
        what = {"broad": "entropy", "sink_mass": "mass"}.get(f, "lift")
        parts.append(f"{'more' if diff[f] > 0 else 'less'} {f} ({what} {raw.loc[members, f].mean():.2f} "
                     f"vs {raw.loc[~members, f].mean():.2f})")
    return ", ".join(parts)


def cluster_unexplained(matrix: pd.DataFrame, roles: pd.Series, distance: float | None = None,
                        min_size: int = 2) -> pd.DataFrame:
    """Recurring groups of unexplained heads: columns cluster, layer, head, description.

    ``matrix`` is the head matrix joined with the sink mass (index (layer, head)); ``roles`` the
    primary role per head.
    Clusters are numbered 0, 1, ... by decreasing size.
    """
    raw = matrix[list(PROFILE)]
    z = (raw - raw.mean()) / np.maximum(raw.std(ddof=0), MIN_SCALE)
    unexplained = (roles.reindex(matrix.index) == UNEXPLAINED).to_numpy()
    if unexplained.sum() < max(2, min_size):
        return pd.DataFrame(columns=CLUSTER_COLUMNS)
    labels = _labels(z[unexplained].to_numpy(), distance)
    heads = matrix.index[unexplained]
    sizes = pd.Series(labels).value_counts()
    keep = sizes[sizes >= min_size]
    rows = []
    for number, label in enumerate(sorted(keep.index, key=lambda l: (-keep[l], l))):
        member_heads = heads[labels == label]
        members = matrix.index.isin(member_heads)
        text = describe(members, z, raw)
        rows += [{"cluster": number, "layer": int(l), "head": int(h), "description": text} for l, h in member_heads]
    return pd.DataFrame(rows, columns=CLUSTER_COLUMNS)

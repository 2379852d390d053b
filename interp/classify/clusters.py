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
from the other unexplained heads (from every other head of the model when the group holds them
all), by at least half a standard deviation, e.g. "more sink_mass (mass 0.71 vs 0.32), less
broad (entropy 0.21 vs 0.64)": what tells the groups apart, not what they share.

Groups found this way need not be real: the silhouette picks the best number of groups even when
no number is good, and often cuts one large group from a few outliers. So each head carries its
``silhouette`` (sklearn's: how much nearer it is to its own group than to the next, -1 .. 1), and
:func:`verdict` says plainly whether the groups separate, on Kaufman and Rousseeuw's scale for the
mean silhouette: under :data:`NO_STRUCTURE` (0.25) the unexplained heads vary along a continuum
that the groups only cut; under :data:`SEPARATES` (0.5) the structure is weak and may be an
artefact of the clustering. One group holding most of them (:data:`DOMINANT`) means that on these
features most unexplained heads look alike.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.cluster import AgglomerativeClustering
from sklearn.metrics import silhouette_samples, silhouette_score

from interp.roles import UNEXPLAINED

PROFILE = (
    "sink_mass",
    "delimiter",
    "previous_token",
    "current_token",
    "next_token",
    "local",
    "positional",
    "broad",
    "duplicate_token",
    "induction",
)
DEFAULT_DISTANCE = 2.0
MIN_DIFFERENCE = 0.5  # standard deviations: smaller differences are not worth a word
MIN_SCALE = 0.05  # floor on a feature's spread: differences of a few hundredths in lift are noise
NO_STRUCTURE = 0.25  # mean silhouette below which the groups are not told apart
SEPARATES = 0.5  # ... and from which on they are (in between: a weak structure)
DOMINANT = 0.75  # one group holding this share of the grouped heads is "most of them"
CLUSTER_COLUMNS = ["cluster", "layer", "head", "description", "silhouette"]


def _labels(z: np.ndarray, distance: float | None) -> np.ndarray:
    n = len(z)
    if distance is not None or n < 4:
        model = AgglomerativeClustering(
            n_clusters=None, distance_threshold=distance or DEFAULT_DISTANCE, linkage="average"
        )
        return model.fit_predict(z)
    best, best_score = np.zeros(n, dtype=int), -np.inf
    for k in range(2, min(12, n - 1) + 1):
        labels = AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(z)
        score = silhouette_score(z, labels)
        if score > best_score:
            best, best_score = labels, score
    return best


def describe(
    members: np.ndarray,
    z: pd.DataFrame,
    raw: pd.DataFrame,
    top: int = 3,
    others: np.ndarray | None = None,
) -> str:
    """The ``top`` profile features separating ``members`` (bool [head]) from ``others`` (bool
    [head]; default: every other head)."""
    others = ~members if others is None else others & ~members
    diff = z[members].mean() - z[others].mean()
    order = [
        f
        for f in diff.abs().sort_values(ascending=False).index[:top]
        if abs(diff[f]) >= MIN_DIFFERENCE
    ]
    if not order:
        return "no profile feature sets them apart from the other heads"
    parts = []
    for f in order:
        what = {"broad": "entropy", "sink_mass": "mass"}.get(f, "lift")
        parts.append(
            f"{'more' if diff[f] > 0 else 'less'} {f} ({what} {_two(raw.loc[members, f].mean())} "
            f"vs {_two(raw.loc[others, f].mean())})"
        )
    return ", ".join(parts)


def _two(value: float) -> str:
    text = f"{value:.2f}"
    return "0.00" if text == "-0.00" else text


def _silhouettes(z: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each head's silhouette; NaN when there are not two groups and a head outside them."""
    if not 2 <= len(np.unique(labels)) <= len(labels) - 1:
        return np.full(len(labels), np.nan)
    return silhouette_samples(z, labels)


def cluster_unexplained(
    matrix: pd.DataFrame, roles: pd.Series, distance: float | None = None, min_size: int = 2
) -> pd.DataFrame:
    """Recurring groups of unexplained heads: columns cluster, layer, head, description, silhouette.

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
    silhouette = _silhouettes(z[unexplained].to_numpy(), labels)
    heads = matrix.index[unexplained]
    sizes = pd.Series(labels).value_counts()
    keep = sizes[sizes >= min_size]
    rows = []
    for number, label in enumerate(sorted(keep.index, key=lambda l: (-keep[l], l))):
        mine = labels == label
        members = matrix.index.isin(heads[mine])
        text = describe(members, z, raw, others=unexplained if mine.sum() < len(labels) else None)
        rows += [
            {
                "cluster": number,
                "layer": int(l),
                "head": int(h),
                "description": text,
                "silhouette": float(s),
            }
            for (l, h), s in zip(heads[mine], silhouette[mine])
        ]
    return pd.DataFrame(rows, columns=CLUSTER_COLUMNS)


def overview(clusters: pd.DataFrame, max_members: int = 12) -> pd.DataFrame:
    """One row per group: cluster, heads, layers (the span), silhouette (the members' mean),
    description, members (the first ``max_members`` heads, L{layer}H{head})."""
    rows = []
    for number, group in clusters.groupby("cluster", sort=True):
        names = [f"L{l}H{h}" for l, h in zip(group["layer"], group["head"])]
        more = f" … and {len(names) - max_members} more" if len(names) > max_members else ""
        low, high = int(group["layer"].min()), int(group["layer"].max())
        rows.append(
            {
                "cluster": int(number),
                "heads": len(group),
                "layers": f"L{low}" if low == high else f"L{low}–L{high}",
                "silhouette": float(group["silhouette"].mean()),
                "description": str(group["description"].iloc[0]),
                "members": " ".join(names[:max_members]) + more,
            }
        )
    return pd.DataFrame(
        rows, columns=["cluster", "heads", "layers", "silhouette", "description", "members"]
    )


def separates(clusters: pd.DataFrame) -> bool | None:
    """Whether the groups separate: their heads' mean silhouette reaches :data:`SEPARATES`; None
    when it is not known (a single group has no silhouette)."""
    if clusters["silhouette"].isna().all():
        return None
    return bool(clusters["silhouette"].mean() >= SEPARATES)


def verdict(clusters: pd.DataFrame, n_unexplained: int | None = None) -> str:
    """Whether the groups tell the unexplained heads apart, in plain words (see the module docstring)."""
    grouped = len(clusters)
    of = f" of the {n_unexplained} unexplained heads" if n_unexplained else ""
    sizes = clusters["cluster"].value_counts()
    apart = separates(clusters)
    if apart is None:
        score = "With a single group, the heads cannot be told apart on these features."
    else:
        mean = float(clusters["silhouette"].mean())
        if apart:
            score = f"The groups separate (mean silhouette {mean:.2f}; 1: far apart, 0: on the border between two groups)."
        elif mean >= NO_STRUCTURE:
            score = (
                f"The groups separate only weakly (mean silhouette {mean:.2f}, under {SEPARATES}): a structure this "
                "weak may be an artefact of the clustering, so read each description as a tendency."
            )
        else:
            score = (
                f"The groups do not separate (mean silhouette {mean:.2f}, under {NO_STRUCTURE}): the unexplained "
                "heads vary along a continuum that these groups only cut, so read each description as a tendency, "
                "not a kind of head."
            )
    lead = f"{grouped} heads{of} fall into {len(sizes)} group{'s' if len(sizes) != 1 else ''}. "
    if len(sizes) and sizes.iloc[0] >= DOMINANT * grouped and len(sizes) > 1:
        lead += f"One group holds {sizes.iloc[0]} of them: on these features most unexplained heads look alike. "
    return lead + score

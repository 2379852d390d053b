"""The primary role: what a head does with its non-sink attention, unless it has too little of it.

The classifier (:mod:`.estimator`) reads only the head's non-sink attention (interp.collect.features
renormalises every feature over the keys other than the first position) and names it: one of the
roles, ``broad`` or ``unexplained``. That name becomes the primary role whenever the head's
attention off the sink is substantial *where that role is measured*: at least ``NONSINK_MIN`` of
its mass on the queries of the role's own feature (a duplicate-token head parks on BOS wherever
the current token has no earlier copy, so its overall sink mass says little; on the queries that
have a copy it is what matters). For ``unexplained`` the head's overall sink mass is used.
Otherwise the head does little besides sinking: its primary role is ``first_token``, and what
its crumbs look like is reported as the second role when the classifier is sure of it.

Why ``NONSINK_MIN`` = 0.05 (measured by analyses/sinks.py, analyses/RESULTS.md "Attention
sinks"): sink ablation -- a head's output replaced by its value at the first position, all of
its attention moved onto the sink -- removes exactly what the head does besides sinking. On
SmolLM2-135M (default probes and evaluation corpus) the one head with less than 0.05 of its
attention off the sink, L18H8 (0.000), changes no metric (|delta| <= 0.001); every head between
0.05 and 0.1 (3 heads, from 0.083) and 13 of the 14 between 0.1 and 0.15 change at least one
metric beyond its bootstrap interval (repeated-token loss, +0.02 to +0.33 nats), about as much as
removing them. So a few percent of attention off the sink is already a job; below 0.05 nothing
was measurable. (MiniLM-L6 has no head below 0.15.)

Scores. ``score_<role>`` is the probability that the primary role is <role>: the classifier's
calibrated probabilities where the non-sink attention is substantial (``score_first_token`` 0),
``score_first_token`` = 1 where it is not (the rule is a definition; how sure the share is shows
in the stability). A head whose sink takes at least ``SECOND_SINK`` of its attention gets
``first_token`` as its second role when the classifier finds no other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from interp.classify.estimator import NO_SECOND, HeadRoleClassifier
from interp.classify.matrix import COLUMNS, SINK_MASS, SINK_ROLE
from interp.roles import SCORED_ROLES

NONSINK_MIN = 0.05
SECOND_SINK = 0.5
SURE = 0.5  # a sink head's crumbs are named as its second role from this probability on


@dataclass
class Labels:
    """Per head: the primary role, its confidence, every role's score, a second role."""

    primary: np.ndarray  # str [head]
    confidence: np.ndarray  # float [head]
    scores: np.ndarray  # float [head, role], roles in SCORED_ROLES order
    second: np.ndarray  # object [head]: a role or NaN


def nonsink_share(labels: np.ndarray, sinks: pd.DataFrame) -> np.ndarray:
    """1 - the sink mass on the queries where each head's (non-sink) label is measured."""
    columns = list(sinks.columns)
    which = np.array(
        [columns.index(f"sink:{label}" if label in COLUMNS else SINK_MASS) for label in labels]
    )
    return 1.0 - sinks.to_numpy(dtype=float)[np.arange(len(labels)), which]


def sunk(labels: np.ndarray, sinks: pd.DataFrame, nonsink_min: float = NONSINK_MIN) -> np.ndarray:
    """bool [head]: the head has too little attention off the sink for its label to be its role."""
    return nonsink_share(labels, sinks) < nonsink_min


def primary_roles(
    clf: HeadRoleClassifier,
    matrix: pd.DataFrame,
    sinks: pd.DataFrame,
    nonsink_min: float = NONSINK_MIN,
) -> np.ndarray:
    """The primary role of each head (str [head]): rows of ``matrix`` (COLUMNS) and ``sinks`` align."""
    labels = np.asarray(clf.predict(matrix[list(COLUMNS)])).astype(object)
    labels[sunk(labels, sinks, nonsink_min)] = SINK_ROLE
    return labels.astype(str)


def label_heads(
    clf: HeadRoleClassifier,
    matrix: pd.DataFrame,
    sinks: pd.DataFrame,
    nonsink_min: float = NONSINK_MIN,
) -> Labels:
    """Primary role, confidence, scores and second role of every head (see the module docstring)."""
    X = matrix[list(COLUMNS)]
    proba = clf.predict_proba(X)
    classes = clf.classes_.astype(str)
    named = classes[proba.argmax(1)]
    down = sunk(named, sinks, nonsink_min)
    scores = np.zeros((len(X), len(SCORED_ROLES)))
    role_index = {r: j for j, r in enumerate(SCORED_ROLES)}
    for k, c in enumerate(classes):
        scores[~down, role_index[c]] = proba[~down, k]
    scores[down, role_index[SINK_ROLE]] = 1.0
    primary = np.where(down, SINK_ROLE, named)
    second = np.asarray(clf.second_roles(X, named), dtype=object)
    sink_heavy = sinks[SINK_MASS].to_numpy() >= SECOND_SINK
    second[~down & pd.isna(second) & sink_heavy] = SINK_ROLE
    crumbs_named = ~np.isin(named, NO_SECOND) & (proba.max(1) >= SURE)
    second[down] = np.where(crumbs_named[down], named[down].astype(object), np.nan)
    return Labels(primary.astype(str), scores.max(1), scores, second)

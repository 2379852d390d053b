"""Frequent-token heads: an ``unexplained`` head that piles its attention on the commonest tokens.

Many heads of trained models attend, wherever they are, to a handful of very common token types:
``the``, ``of``, ``.``, ``,``, a newline. The classifier cannot name them: its reference bank
labels attention to an arbitrary token class ``unexplained`` (interp.classify.reference.bank),
because a class of tokens is no archetype unless one knows which class. The class that recurs is
the commonest types of the text (interp.probes.frequent), and the ``frequent_token`` feature
measures a head's preference for them beside what uniform attention would give
(interp.collect.features).

When. A head is ``frequent_token`` when it is still ``unexplained`` once the classifier, the sink
rule and the blends have spoken (interp.classify.mixture), or ``broad``, and the lift of its
non-sink attention on the frequent types, ``(value - baseline) / (1 - baseline)``, is at least
``FREQUENT_MIN``: 0.2, the share at which the reference bank names a role over a diffuse
background and the blends count a role as part of a head (``CLEAR``). A head whose attention off
the sink goes uniformly over the keys scores 0 whatever the share of frequent keys; so ``broad``
is no objection: by the bank's own convention a role that holds 0.2 over a diffuse background is
that role, and a head that favours the commonest tokens that much does not spread its attention
evenly. Its confidence is 1, as for the other rules on a measurement (its stability, the share
of bootstrap replicates on which the rule holds too, says how sure the measurement is); its
second role is the classifier's, ``broad`` for a broad head.

Chance. A head prefers some key types to others even when nothing trained it to (its keys'
directions differ by token), and a preference for a few types can land on common ones. How often
a head reaches 0.2 that way is measured on SmolLM2-135M with its query and key weights redrawn
at random (the embeddings, values and the rest trained), beside the trained model, and on planted
heads whose truth is known (benchmarks/RESULTS.md, "Frequent-token heads").
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from interp.classify.mixture import CLEAR
from interp.roles import UNEXPLAINED

FREQUENT = "frequent_token"
FREQUENT_MIN = CLEAR
OPEN = (UNEXPLAINED, "broad")  # what the rule may rename


def lifts(values: np.ndarray, names: list[str], baselines: np.ndarray) -> np.ndarray:
    """The frequent_token lift, float [...] (NaN where not measured): ``values`` and
    ``baselines`` float [..., feature] (or [feature]) with features in ``names`` order."""
    if FREQUENT not in names:
        return np.full(np.shape(values)[:-1], np.nan)
    j = names.index(FREQUENT)
    value = np.asarray(values, dtype=float)[..., j]
    base = np.broadcast_to(np.asarray(baselines, dtype=float), np.shape(values))[..., j]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(base < 1.0, (value - base) / (1.0 - base), np.nan)


def relabel(labels: np.ndarray, lift: np.ndarray, minimum: float = FREQUENT_MIN) -> np.ndarray:
    """``labels`` (str [...]) with every ``unexplained`` or ``broad`` head whose ``lift`` (float
    [...]) is at least ``minimum`` named ``frequent_token``."""
    out = np.asarray(labels).astype(object)
    with np.errstate(invalid="ignore"):
        out[np.isin(out, OPEN) & (np.asarray(lift, dtype=float) >= minimum)] = FREQUENT
    return out


def head_lifts(features: pd.DataFrame) -> pd.Series:
    """Per head (index (layer, head)), the frequent_token lift of a features table; NaN where the
    feature was not measured (no text probes)."""
    mine = features[features["feature"] == FREQUENT]
    index = pd.MultiIndex.from_arrays(
        [mine["layer"].astype(int), mine["head"].astype(int)], names=["layer", "head"]
    )
    value, base = mine["value"].to_numpy(float), mine["baseline"].to_numpy(float)
    return pd.Series(lifts(value[:, None], [FREQUENT], base[:, None]), index=index)


def name_frequent(roles: pd.DataFrame, features: pd.DataFrame) -> pd.DataFrame:
    """The roles table with ``frequent_token`` where an ``unexplained`` or ``broad`` head's lift on
    the frequent types reaches ``FREQUENT_MIN`` (confidence 1; its second role stays, and a broad
    head's is ``broad``)."""
    out = roles.copy()
    keys = pd.MultiIndex.from_arrays([out["layer"].astype(int), out["head"].astype(int)])
    lift = head_lifts(features).reindex(keys).to_numpy()
    before = out["role"].to_numpy()
    named = (relabel(before, lift) == FREQUENT) & np.isin(before, OPEN)
    out.loc[named & (before == "broad"), "second_role"] = "broad"
    out.loc[named, "role"] = FREQUENT
    out.loc[named, "confidence"] = 1.0
    return out

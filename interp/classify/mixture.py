"""Mixed heads: an ``unexplained`` head whose non-sink attention is a blend of named archetypes.

The attention classifier names one archetype or none. A head that splits its attention among
several archetypes, none dominant (say a third on itself, a quarter on punctuation, a fifth on a
recent window, the rest spread out), is ``unexplained`` to it, although every part of it has a
name. This module names the parts.

How. One detector per role (every non-sink role but syntactic and broad) gives the probability
that the role holds at least ``CLEAR`` (0.2) of the head's non-sink attention: a logistic model
over the head's features and their pairwise products (a blend's lifts are not linear in its
shares: a duplicate-token head falls back elsewhere where there is no copy, entropy is not
linear at all), fitted on planted blends and on the reference bank, whose heads' shares are
known (interp.classify.reference.blends, interp.classify.reference.mixture_fit). A ridge model on
the same inputs estimates each role's share. Syntax is left out: its score is an argmax over
words, no share of anything.

When. A head is ``mixed`` when the classifier calls it ``unexplained`` (after the sink rule) and
at least two detectors say their role holds, with probability ``MIN_PROBABILITY`` (0.5: more
likely than not) or more. ``components`` lists those roles with their estimated shares, and the
head's confidence is the least sure of their probabilities. A head whose features no blend
explains (random, shuffled or off-catalogue attention: the bank's null heads are the detectors'
negatives) stays ``unexplained``. Held-out precision, recall, share error and calibration are in
``mixture.json`` and benchmarks/RESULTS.md ("Mixed heads").

As in the bank's pair rule, a copy head (duplicate_token, induction) that also attends to the
query itself is one copy head: the planted truth never holds current_token beside a copy role,
so the detectors learn to read such a head as the copy role alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files

import numpy as np
import pandas as pd

from interp.classify.matrix import COLUMNS, SINK_ROLE
from interp.roles import UNEXPLAINED

MIXED = "mixed"
BACKGROUND = "background"
# the roles a blend is made of: every non-sink role that is a share of attention
BLEND_ROLES: tuple[str, ...] = tuple(c for c in COLUMNS if c not in ("syntactic", "broad"))
COMPONENTS: tuple[str, ...] = BLEND_ROLES + (BACKGROUND,)
FEATURES: tuple[str, ...] = tuple(c for c in COLUMNS if c != "syntactic")
CLEAR = 0.2  # the share at which a role counts as part of a head
MIN_PROBABILITY = 0.5
MIXTURE_FILE = "mixture.json"


def expand(features: np.ndarray) -> np.ndarray:
    """float [head, feature] -> the features and their pairwise products (squares included)."""
    x = np.atleast_2d(np.asarray(features, dtype=float))
    i, j = np.triu_indices(x.shape[1])
    return np.hstack([x, x[:, i] * x[:, j]])


@dataclass(frozen=True)
class Detectors:
    """Per blend role: a logistic detector (does the role hold CLEAR?) and a share estimate, both
    linear in the standardised :func:`expand` of the FEATURES columns."""

    mean: np.ndarray  # float [input]
    scale: np.ndarray  # float [input]
    coef: np.ndarray  # float [role, input]
    intercept: np.ndarray  # float [role]
    share_coef: np.ndarray  # float [role, input]
    share_intercept: np.ndarray  # float [role]

    def inputs(self, features: np.ndarray) -> np.ndarray:
        return (expand(features) - self.mean) / self.scale

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """float [head, role]: P(the role holds at least CLEAR of the non-sink attention)."""
        z = self.inputs(features) @ self.coef.T + self.intercept
        return 1.0 / (1.0 + np.exp(-z))

    def shares(self, features: np.ndarray) -> np.ndarray:
        """float [head, role]: each role's estimated share, clipped to [0, 1]."""
        return np.clip(self.inputs(features) @ self.share_coef.T + self.share_intercept, 0, 1)

    def to_dict(self) -> dict:
        out = {"roles": list(BLEND_ROLES), "features": list(FEATURES)}
        for name in ("mean", "scale", "coef", "intercept", "share_coef", "share_intercept"):
            out[name] = np.round(getattr(self, name), 8).tolist()
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Detectors:
        if tuple(data["roles"]) != BLEND_ROLES or tuple(data["features"]) != FEATURES:
            raise ValueError("the mixture detectors were fitted on other roles or features")
        names = ("mean", "scale", "coef", "intercept", "share_coef", "share_intercept")
        return cls(*(np.asarray(data[name], dtype=float) for name in names))


@lru_cache(maxsize=1)
def default_detectors() -> Detectors:
    """The shipped detectors (``interp/classify/reference/mixture.json``)."""
    text = files("interp.classify.reference").joinpath(MIXTURE_FILE).read_text()
    return Detectors.from_dict(json.loads(text)["detectors"])


def blend_claims(
    features: np.ndarray, detectors: Detectors
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(is a blend bool [head], which roles hold bool [head, role], probabilities [head, role])
    for feature rows [head, FEATURES]."""
    probability = detectors.probabilities(features)
    holds = probability >= MIN_PROBABILITY
    return holds.sum(1) >= 2, holds, probability


def describe(holds: np.ndarray, shares: np.ndarray) -> str:
    """'delimiter 0.38 + local 0.21': the roles a head holds with their shares, largest first."""
    order = [j for j in np.argsort(-shares, kind="stable") if holds[j]]
    return " + ".join(f"{BLEND_ROLES[j]} {shares[j]:.2f}" for j in order)


def blend_key(roles: Iterable[str]) -> str:
    """``'mixed:delimiter+local'``: which roles a blend holds, in catalogue order, whatever their
    shares. Two readings of a head are the same blend when their keys are equal."""
    held = set(roles)
    return f"{MIXED}:" + "+".join(r for r in BLEND_ROLES if r in held)


def component_roles(components: str) -> list[str]:
    """The roles a ``components`` cell names (``'delimiter 0.41 + local 0.24'`` -> both)."""
    return [part.split()[0] for part in components.split(" + ")]


def relabel_blends(
    labels: np.ndarray, features: np.ndarray, eligible: np.ndarray, detectors: Detectors
) -> np.ndarray:
    """``labels`` (str [head]) with every ``eligible`` (bool [head]) ``unexplained`` head whose
    finite features [head, FEATURES] are a blend relabelled with its :func:`blend_key`: the
    reading :func:`name_mixtures` gives, on another draw of the features (stability)."""
    out = np.asarray(labels).astype(object)
    rows = np.asarray(features, dtype=float)
    finite = np.isfinite(rows).all(1)
    where = np.flatnonzero((out == UNEXPLAINED) & np.asarray(eligible, dtype=bool) & finite)
    if len(where):
        mixed, holds, _ = blend_claims(rows[where], detectors)
        roles = np.array(BLEND_ROLES)
        for i, held in zip(where[mixed], holds[mixed]):
            out[i] = blend_key(roles[held])
    return out.astype(str)


def mixture_eligible(roles: pd.DataFrame) -> np.ndarray:
    """bool [head]: every feature the detectors read was measured (the roles table's
    ``unmeasured`` names none of them): a role whose probes were skipped could be a component, and
    its imputed "no preference" is not what the detectors were fitted on."""
    if "unmeasured" not in roles.columns:
        return np.ones(len(roles), dtype=bool)
    missing = roles["unmeasured"].fillna("").astype(str).str.split()
    return np.array([not set(names) & set(FEATURES) for names in missing], dtype=bool)


def name_mixtures(roles: pd.DataFrame, matrix: pd.DataFrame, detectors: Detectors) -> pd.DataFrame:
    """The roles table with ``components`` (a mixed head's blend, else NaN), and ``role``
    ``mixed`` where an ``unexplained`` head whose features were all measured is a blend (its
    confidence the least sure of its components' probabilities, its second role only the
    sink's). ``matrix``: the head matrix (index (layer, head), COLUMNS), the rows of ``roles``
    in any order."""
    out = roles.copy()
    out["components"] = pd.Series(np.nan, index=out.index, dtype=object)
    candidates = np.flatnonzero((out["role"].to_numpy() == UNEXPLAINED) & mixture_eligible(out))
    if len(candidates) == 0:
        return out
    keys = pd.MultiIndex.from_arrays(
        [out["layer"].to_numpy()[candidates], out["head"].to_numpy()[candidates]]
    )
    rows = matrix.reindex(keys)[list(FEATURES)].to_numpy(dtype=float)
    finite = np.isfinite(rows).all(1)
    rows = np.where(finite[:, None], rows, 0.0)
    mixed, holds, probability = blend_claims(rows, detectors)
    mixed &= finite
    if not mixed.any():
        return out
    shares = detectors.shares(rows)
    at = out.index[candidates[mixed]]
    out.loc[at, "role"] = MIXED
    out.loc[at, "confidence"] = np.where(holds, probability, np.inf)[mixed].min(1)
    out.loc[at, "components"] = [describe(h, s) for h, s in zip(holds[mixed], shares[mixed])]
    # its components already say what the classifier's second role would; the sink still counts
    second = out.loc[at, "second_role"]
    out.loc[at, "second_role"] = second.where(second == SINK_ROLE, np.nan)
    return out

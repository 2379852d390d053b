"""What was not measured: the roles table's ``unmeasured`` column, and the role ``unmeasured``.

The classifier reads one column per role (interp.classify.matrix). A column whose features had no
eligible position in the run is imputed as "no preference" (lift 0, ``broad`` 0.5): its probe
suite was skipped (a tokenizer that cannot express English prose, a context too short for
repeated tokens: the manifest's ``stages.collect.skipped_suites`` says which and why) or not
asked for (``--suite``). An answer that rests on such a guess must not look decided, so:

- ``unmeasured`` names, for every head, the classifier's columns that were not measured,
  space-separated in catalogue order (NaN when every column was). A feature the model cannot
  have is not missing: ``next_token`` in a causal model (the run's manifest says whether the
  model is causal; without it, a model is taken as causal when ``current_token`` has positions
  and ``next_token`` none).
- A head gets the role ``unmeasured`` (confidence, scores, second role and stability NaN) when
  its label is one the missing columns undermine, ``unexplained`` (no archetype holds, but an
  unmeasured one might) or a role whose own column was not measured, *and* the missing columns
  could have decided it: some values of them between no preference (0) and a perfect head (1)
  make the classifier name another role. It is checked at the corners of that box, which is
  exact: the logits are linear (or, with ``interactions``, multilinear) in the columns, so a
  class that wins at every corner of a box wins everywhere in it.
- A head with a named role whose own column was measured keeps it: the role rests on what was
  measured, even if an unmeasured feature might have outscored it; ``unmeasured`` says what was
  not looked at, and the confidence is the classifier's with those columns at no preference.
- A head whose attention itself was NaN (``measured`` 0, interp.collect.measured) was measured
  nowhere: role ``unmeasured``, every column named.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from interp.classify.estimator import HeadRoleClassifier
from interp.classify.matrix import COLUMNS, GROUP_COLUMNS, MIN_ARCS, MIN_QUERIES
from interp.roles import ROLES, UNEXPLAINED, UNMEASURED

CORNER = (0.0, 1.0)  # a missing column ranges from no preference to a perfect head


def missing_columns(features: pd.DataFrame, causal: bool | None = None) -> tuple[str, ...]:
    """The classifier's columns whose features had no eligible position in the run (positional:
    no position with ``MIN_QUERIES`` queries; syntactic: no relation with ``MIN_ARCS`` arcs);
    ``causal``: whether the model is (None: told from the table, see the module docstring)."""
    counts = features.groupby("feature", sort=False)["n"].first()

    def measured(col: str) -> bool:
        if col in GROUP_COLUMNS:
            least = MIN_ARCS if col == "syntactic" else MIN_QUERIES
            return bool(
                (counts[counts.index.astype(str).str.startswith(GROUP_COLUMNS[col])] >= least).any()
            )
        return counts.get(ROLES[col].feature, 0) > 0

    if causal is None:
        causal = measured("current_token") and not measured("next_token")
    return tuple(c for c in COLUMNS if not measured(c) and not (c == "next_token" and causal))


def undecided(
    clf: HeadRoleClassifier, matrix: pd.DataFrame, primary: np.ndarray, missing: tuple[str, ...]
) -> np.ndarray:
    """bool [head]: the head's label is ``unexplained`` or a role whose own column is ``missing``,
    and some corner of the missing columns' box makes the classifier name another one."""
    primary = np.asarray(primary).astype(str)
    out = np.zeros(len(primary), dtype=bool)
    candidates = np.flatnonzero((primary == UNEXPLAINED) | np.isin(primary, missing))
    if not missing or not len(candidates):
        return out
    X = matrix[list(COLUMNS)].to_numpy(dtype=float)[candidates]
    where = [COLUMNS.index(c) for c in missing]
    first = None
    for corner in itertools.product(CORNER, repeat=len(missing)):
        filled = X.copy()
        filled[:, where] = corner
        labels = np.asarray(clf.predict(pd.DataFrame(filled, columns=list(COLUMNS)))).astype(str)
        first = labels if first is None else first
        out[candidates] |= labels != first
    return out


def mark(
    roles: pd.DataFrame,
    features: pd.DataFrame,
    matrix: pd.DataFrame,
    clf: HeadRoleClassifier,
    ok: np.ndarray,
    causal: bool | None = None,
) -> pd.DataFrame:
    """The roles table (rows in ``matrix``'s order) with ``measured`` (``ok``: the head's attention
    was measured, interp.collect.measured), ``unmeasured`` and the role ``unmeasured`` where it applies."""
    roles = roles.copy()
    missing = missing_columns(features, causal)
    roles["measured"] = ok.astype(int)
    named = [(" ".join(missing) if good else " ".join(COLUMNS)) or np.nan for good in ok]
    roles["unmeasured"] = pd.Series(named, index=roles.index, dtype=object)
    lost = ~ok | undecided(clf, matrix, roles["role"].to_numpy(), missing)
    if lost.any():
        roles.loc[lost, "role"] = UNMEASURED
        roles.loc[lost, "second_role"] = np.nan
        scores = [c for c in roles.columns if c.startswith("score_")]
        roles.loc[lost, ["confidence", "stability", *scores]] = np.nan
    return roles

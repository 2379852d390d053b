"""Which heads were measured: NaN attention is carried as NaN, and never read as a role.

A feature may be NaN for a good reason: no eligible position (``next_token`` in a causal model),
or a head with no attention off the first position on those queries (its share off the sink is
0/0). Neither makes the head's attention unknown, and the classifier reads such a NaN as "no
preference" (interp.classify.matrix). But a head whose attention itself is NaN or infinite (a
model that overflows in float16, weights built in Python with a NaN, a layer after one that
overflowed) has NaN everywhere, its mass on the first position included. That mass
(``first_token``) is defined on every content query, so it tells the two apart: a head whose
``first_token`` value is NaN although the feature had positions is *not measured*. Its features
stay NaN in the table; the classifier gives it no role (``unmeasured`` with NaN confidence and
scores, ``measured`` 0 in the roles table, interp.classify.unmeasured); a run where most heads
were not measured stops at collect with one line instead of writing a table of NaN
(:func:`check_measured`).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from interp.errors import InterpWarning, RunError

SINK_FEATURE = "first_token"
MOSTLY = 0.5  # more than this share of heads not measured: the run stops


def measured(features: pd.DataFrame) -> pd.Series:
    """bool per head, indexed by (layer, head): False where the head's attention was NaN or
    infinite (its ``first_token`` value is NaN on positions that exist). A table without a
    ``first_token`` row counts every head as measured (there is nothing to tell by)."""
    heads = pd.MultiIndex.from_frame(features[["layer", "head"]].drop_duplicates().astype(int))
    rows = features[features["feature"] == SINK_FEATURE]
    if rows.empty:
        return pd.Series(True, index=heads, name="measured")
    lost = rows["value"].isna().to_numpy() & (rows["n"].to_numpy() > 0)
    bad = pd.Series(
        lost, index=pd.MultiIndex.from_arrays([rows["layer"].astype(int), rows["head"].astype(int)])
    )
    bad = bad.groupby(level=[0, 1]).any().reindex(heads, fill_value=False)
    return (~bad).rename("measured").rename_axis(["layer", "head"])


def check_measured(features: pd.DataFrame) -> None:
    """RunError when most heads were not measured; a warning naming them when some were not."""
    ok = measured(features)
    lost = ok.index[~ok.to_numpy()]
    if len(lost) == 0:
        return
    first = min(layer for layer, _ in lost)
    if len(lost) > MOSTLY * len(ok):
        raise RunError(
            f"the model's attention is NaN or infinite in {len(lost)} of {len(ok)} heads (from layer "
            f"{first} on): nothing can be measured; check the weights, or load the model with --dtype "
            f"float32 if it overflows in half precision"
        )
    warnings.warn(
        f"the model's attention is NaN or infinite in {len(lost)} of {len(ok)} heads (from layer {first} "
        f"on): their features stay NaN and they get no role (roles column measured = 0)",
        InterpWarning,
        stacklevel=2,
    )


def measured_mask(features: pd.DataFrame, index: pd.MultiIndex) -> np.ndarray:
    """bool [head] of :func:`measured`, in the order of ``index`` ((layer, head) pairs)."""
    return measured(features).reindex(index, fill_value=True).to_numpy(dtype=bool)

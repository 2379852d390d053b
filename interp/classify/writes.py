"""What a head writes: the weights table -> one row per head of evidence, and its write role.

The weights stage (interp.weights) scores every head's OV circuit through the embedding and the
unembedding (``copying``, ``copy_rate``, ``suppression_rate``, ``successor``) and how much it
writes (``output_size``), each beside a null: heads with random weights of the same shape
reading the same tokens. A score means something only where it leaves that null, so each
column of the write matrix is the *excess over the null's 97.5% quantile*, as a share of the room
above it: ``(value - null_high) / (1 - null_high)`` (and, for copying's negative side,
``(null_low - value) / (1 + null_low)``). 0 or less is what a head with no preference can score
by chance; 1 is the score's ceiling (every token copied, every successor found). The columns,
named so that the estimator's role-named logic can read them:

- ``copying``: excess of the eigenvalue score toward +1 (the circuit maps tokens to themselves);
- ``copy_suppression``: excess toward -1 (it writes against them);
- ``copy_rate`` / ``suppression_rate``: excess of the share of tokens whose own logit is in
  the top / bottom k of their row;
- ``successor``: excess of the share of ordinal pairs whose next item wins its sequence.

A score the model cannot have (NaN: an encoder has no OV scores, a vocabulary without ordinals
no successor) says nothing about the head and is imputed as no excess (``-1``: at or below the
null); the head's ``writes_unmeasured`` names it.

``inactive`` rests on the output size alone: a head whose output, to the top of its bootstrap
interval, is at most ``INACTIVE_SHARE`` (1%) of what the model's median head writes (the weights
table's ``baseline`` for ``output_size``) writes nothing that matters (a zeroed ``o_proj`` slice
scores exactly 0). Relative to the model's own heads, not to a fixed share of the residual
stream: how large a head's output is beside the stream depends on the family's conventions
(BERT normalises its embeddings, Gemma scales them and normalises what attention writes), and
random-init heads of the families the tests build write from 0.25% (BERT) to 15% (Qwen3) of
their residual stream, SmolLM2-135M's heads from 0.9% to 37%: a fixed share would call whole
families inactive. Every such head writes more than 20% of its model's median head.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from interp.classify.estimator import HeadRoleClassifier

OV_SCORES = ("copying", "copy_rate", "suppression_rate", "successor")
WRITE_COLUMNS = ("copying", "copy_suppression", "copy_rate", "suppression_rate", "successor")
OUTPUT_SIZE = "output_size"
# what the write classifier names: the write roles read from the OV circuit, or none of them
WRITE_CLASSES = ("copying", "copy_suppression", "successor")
NO_WRITE_ROLE = "none"
# A head whose output is at most this share of the model's median head's output writes nothing
# that matters; see the module docstring.
INACTIVE_SHARE = 0.01
NO_EXCESS = -1.0


def _excess(value: pd.Series, edge: pd.Series, up: bool) -> pd.Series:
    """How far ``value`` passes ``edge`` (the null's quantile) toward +1 (up) or -1, as a share
    of the room left: 1 at the ceiling, <= 0 within the null; NaN where either is missing."""
    with np.errstate(invalid="ignore", divide="ignore"):
        if up:
            out = (value - edge) / (1.0 - edge)
        else:
            out = (edge - value) / (1.0 + edge)
    return out.clip(lower=-1.0, upper=1.0)


def write_frames(weights: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(write matrix ``[head, WRITE_COLUMNS]``, NaN where a score is missing; sizes ``[head]``
    with columns ``output_size``, ``output_high`` (its bootstrap top), ``output_typical`` (the
    model's median head) and ``writes_unmeasured`` (the scores the run lacks for the head,
    space-separated, NaN where none)), both indexed by (layer, head)."""
    missing = {"layer", "head", "score", "value", "baseline", "null_low", "null_high", "ci_high"}
    missing -= set(weights.columns)
    if missing:
        raise ValueError(f"weights table lacks columns {sorted(missing)}")
    keyed = weights.assign(layer=weights["layer"].astype(int), head=weights["head"].astype(int))
    keyed = keyed.set_index(["layer", "head", "score"])
    wide = {
        what: keyed[what].unstack("score")
        for what in ("value", "baseline", "null_low", "null_high", "ci_high")
    }
    heads = wide["value"].index
    scores = list(OV_SCORES) + [OUTPUT_SIZE]

    def column(score: str, what: str) -> pd.Series:
        frame = wide[what]
        return frame[score].astype(float) if score in frame else pd.Series(np.nan, index=heads)

    matrix = pd.DataFrame(index=heads)
    value = column("copying", "value")
    matrix["copying"] = _excess(value, column("copying", "null_high"), up=True)
    matrix["copy_suppression"] = _excess(value, column("copying", "null_low"), up=False)
    for score in ("copy_rate", "suppression_rate", "successor"):
        matrix[score] = _excess(column(score, "value"), column(score, "null_high"), up=True)
    lacking = pd.DataFrame({s: column(s, "value").isna() for s in scores})
    sizes = pd.DataFrame(
        {
            "output_size": column(OUTPUT_SIZE, "value"),
            "output_high": column(OUTPUT_SIZE, "ci_high"),
            "output_typical": column(OUTPUT_SIZE, "baseline"),
            "writes_unmeasured": [
                " ".join(np.array(scores)[row]) or np.nan for row in lacking.to_numpy()
            ],
        }
    )
    return matrix[list(WRITE_COLUMNS)], sizes


def inactive(sizes: pd.DataFrame, share: float = INACTIVE_SHARE) -> pd.Series:
    """bool [head]: the head writes at most ``share`` of what the model's median head writes, to
    the top of its bootstrap interval (without one: the value itself); False where not measured.
    ``sizes``: :func:`write_frames`' (output_size, output_high, output_typical: the median head's;
    NaN: the median of the sizes given)."""
    size = sizes["output_size"]
    top = sizes["output_high"].where(sizes["output_high"].notna(), size)
    typical = sizes["output_typical"].where(sizes["output_typical"].notna(), size.median())
    return (top <= share * typical) & size.notna()


def write_labels(clf: HeadRoleClassifier, weights: pd.DataFrame) -> pd.DataFrame:
    """Per head (index (layer, head)): ``writes`` (a write role, or NaN: none holds, or the OV
    circuit was not measured), ``writes_confidence``, ``score_<role>`` of the write classifier,
    ``output_size`` and ``writes_unmeasured``. A head is ``inactive`` by its output size,
    whatever its OV circuit says (it writes too little for that to matter)."""
    matrix, sizes = write_frames(weights)
    X = matrix.fillna(NO_EXCESS)[list(clf.feature_names_in_)]
    proba = clf.predict_proba(X)
    classes = clf.classes_.astype(str)
    named = classes[proba.argmax(1)]
    measured = matrix[["copying", "copy_rate", "suppression_rate"]].notna().all(axis=1).to_numpy()
    writes = np.full(len(named), np.nan, dtype=object)
    said = measured & (named != NO_WRITE_ROLE)
    writes[said] = named[said]
    confidence = np.where(measured, proba.max(1), np.nan)
    off = inactive(sizes).to_numpy()
    writes[off] = "inactive"
    confidence[off] = 1.0  # a rule on a measurement, as the sink rule is (its interval decides)
    out = pd.DataFrame({"writes": writes, "writes_confidence": confidence}, index=matrix.index)
    for k, c in enumerate(classes):
        if c != NO_WRITE_ROLE:
            out[f"score_{c}"] = np.where(measured, proba[:, k], np.nan)
    out["output_size"] = sizes["output_size"]
    out["writes_unmeasured"] = sizes["writes_unmeasured"]
    return out

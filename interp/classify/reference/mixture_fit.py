"""Fitting the mixture detectors and measuring them on heads they never saw.

``refit_mixture()`` writes ``interp/classify/reference/mixture.json``:

1. the detectors (interp.classify.mixture), fitted on the development heads: planted blends of
   seed ``DEV_SEED`` and the shipped reference bank (seed 0), every head with its true shares;
2. their figures on the development heads and on held-out heads: blends and a reference bank of
   seed ``HELD_OUT_SEED``, which played no part in the fit. Nothing is tuned on them: the
   detectors' settings (pairwise products, the default penalty, a probability of 0.5) are fixed.

What is measured, on the heads the shipped classifier calls ``unexplained`` (only those can
become ``mixed``):

- a claim is *right* when the head truly holds at least two roles at ``LOOSE`` of its non-sink
  attention and every role it is said to hold has at least ``LOOSE`` (a named role may sit a
  little under the detectors' ``CLEAR`` in truth, never be one the head lacks);
- *precision*: right claims / claims; *recall*: right claims among the heads that truly hold two
  roles at ``CLEAR`` or more, over those heads;
- *share error*: the mean absolute error of the named roles' estimated shares on right claims;
- *calibration error*: the expected calibration error (ten equal-width bins) of every detector's
  probability against whether its role truly holds ``CLEAR``, over all candidates and roles.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression, Ridge

from interp.classify.matrix import COLUMNS
from interp.classify.mixture import (
    BLEND_ROLES,
    CLEAR,
    FEATURES,
    MIXTURE_FILE,
    Detectors,
    blend_claims,
    expand,
)
from interp.classify.reference import REFERENCE_VERSION
from interp.classify.reference.blends import build_blends, true_shares
from interp.roles import UNEXPLAINED

DEV_SEED = 0
HELD_OUT_SEED = 1
BLENDS_PER_MASK = 1000
LOOSE = 0.1
BINS = 10


def fit_detectors(frames: list[pd.DataFrame]) -> Detectors:
    """Detectors fitted on heads with known shares (blends, banks)."""
    features = np.vstack([f[list(FEATURES)].to_numpy(dtype=float) for f in frames])
    truth = np.vstack([true_shares(f) for f in frames])[:, : len(BLEND_ROLES)]
    inputs = expand(features)
    mean, scale = inputs.mean(0), inputs.std(0)
    scale[scale == 0] = 1.0
    z = (inputs - mean) / scale
    coef, intercept = [], []
    for j in range(len(BLEND_ROLES)):
        model = LogisticRegression(max_iter=5000).fit(z, truth[:, j] >= CLEAR)
        coef.append(model.coef_[0])
        intercept.append(model.intercept_[0])
    shares = Ridge(alpha=1.0).fit(z, truth)
    return Detectors(
        mean, scale, np.array(coef), np.array(intercept), shares.coef_, shares.intercept_
    )


def calibration_error(probability: np.ndarray, outcome: np.ndarray, bins: int = BINS) -> float:
    """Expected calibration error: the mean |observed rate - mean probability| over equal-width
    probability bins, weighted by how many predictions each holds."""
    p, y = probability.ravel(), outcome.ravel().astype(float)
    which = np.minimum((p * bins).astype(int), bins - 1)
    total = 0.0
    for b in np.unique(which):
        inside = which == b
        total += inside.sum() * abs(y[inside].mean() - p[inside].mean())
    return float(total / len(p))


def measure(frame: pd.DataFrame, candidates: np.ndarray, detectors: Detectors) -> dict:
    """candidates, claims, right, precision, truly_mixed, recall, share_error, calibration_error
    (see the module docstring) on the rows of ``frame`` where ``candidates`` (bool) holds."""
    truth = true_shares(frame)[candidates][:, : len(BLEND_ROLES)]
    features = frame[list(FEATURES)].to_numpy(dtype=float)[candidates]
    claimed, holds, probability = blend_claims(features, detectors)
    right = claimed & ((truth >= LOOSE) | ~holds).all(1) & ((truth >= LOOSE).sum(1) >= 2)
    clear = (truth >= CLEAR).sum(1) >= 2
    errors = np.abs(detectors.shares(features) - truth)[right][holds[right]]
    return {
        "candidates": int(candidates.sum()),
        "claims": int(claimed.sum()),
        "right": int(right.sum()),
        "precision": float(right.sum() / claimed.sum()) if claimed.any() else float("nan"),
        "truly_mixed": int(clear.sum()),
        "recall": float((right & clear).sum() / clear.sum()) if clear.any() else float("nan"),
        "share_error": float(errors.mean()) if len(errors) else float("nan"),
        "calibration_error": calibration_error(probability, truth >= CLEAR),
    }


def unexplained(classifier, frame: pd.DataFrame) -> np.ndarray:
    """bool [head]: the classifier calls the head's non-sink attention unexplained."""
    return np.asarray(classifier.predict(frame[list(COLUMNS)])).astype(str) == UNEXPLAINED


def refit_mixture(directory: Path | None = None, blends_per_mask: int = BLENDS_PER_MASK) -> dict:
    """Fit and measure as the module docstring says; write ``mixture.json`` into ``directory``
    (default: the shipped reference directory) and return its content (about a minute)."""
    from interp.classify.reference.bank import build_bank
    from interp.classify.reference.fit import (
        BANK_PER_ROLE,
        default_classifier,
        load_bank,
        reference_dir,
    )

    clf = default_classifier()
    dev = {"blends": build_blends(DEV_SEED, blends_per_mask), "bank": load_bank()}
    held = {
        "blends": build_blends(HELD_OUT_SEED, blends_per_mask),
        "bank": build_bank(HELD_OUT_SEED, BANK_PER_ROLE),
    }
    detectors = fit_detectors(list(dev.values()))

    def figures(frames: dict[str, pd.DataFrame]) -> dict:
        return {n: measure(f, unexplained(clf, f), detectors) for n, f in frames.items()}

    content = {
        "version": REFERENCE_VERSION,
        "dev_seed": DEV_SEED,
        "held_out_seed": HELD_OUT_SEED,
        "blends_per_mask": blends_per_mask,
        "development": figures(dev),
        "held_out": figures(held),
        "detectors": detectors.to_dict(),
    }
    path = Path(directory or reference_dir()) / MIXTURE_FILE
    path.write_text(json.dumps(content, indent=1))
    return content

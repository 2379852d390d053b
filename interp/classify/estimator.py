"""``HeadRoleClassifier``: a calibrated multinomial logistic model over per-head features.

Why this model. Each role has one feature that measures it (a lift: 0 = no preference, 1 = all
mass on the targets), so "which role, if any" is close to "which lift dominates, and is it above
what a null head shows": a softmax over linear scores expresses exactly that, the class
``unexplained`` acting as a learned, feature-dependent threshold (its score competes with every
role's) rather than one hand-set cut-off. Optional pairwise products (``interactions``) let it
learn that, say, a high ``local`` lift means ``local`` only when ``previous_token`` is not
also high. Its parameters are a few arrays, so the fitted model ships as JSON, not a pickle.

Calibration. Logistic regression fitted with a penalty is usually over- or under-confident on
data like the bank's, whose classes overlap by design (mixtures near 50/50). ``fit`` therefore
fits one temperature T on out-of-fold logits (stratified ``cv``-fold, minimising log loss) and
divides all logits by T: the ranking and the labels are unchanged, the probabilities match
observed frequencies (temperature scaling, Guo et al. 2017). Samples that are versions of one
another (the bank holds every head twice, scored with and without syntax probes) must fall in
the same fold, or the held-out logits are those of heads the fold has already seen and T comes
out too small (over-confident): pass them as ``groups`` to ``fit``.

Second role. A head can do two things, e.g. a previous-token head that also sinks into BOS.
For the predicted class c, each other role r's own feature is compared with what heads of class
c show anyway: a previous-token head always has a high ``local`` lift, which is no second role.
"Anyway" is learned from the training data: for a class with its own feature column (a role
named like a column), the median ratio of feature r to the class's own feature among heads
that clearly show it (own lift >= 0.3), times the head's own lift; for a class without one
(``unexplained``, ``broad``), the class median of r. Both are floored at 0. The role with the
largest excess is the second role when the excess is at least ``second_min_lift``. This needs
columns named after roles (``head_matrix`` gives them); with unnamed columns no second role is
reported.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, softmax
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

NO_SECOND = ("broad", "unexplained")  # never reported as a second role: they are absences of one


def _expand(Z: np.ndarray, interactions: bool) -> np.ndarray:
    if not interactions or Z.shape[1] < 2:
        return Z
    i, j = np.triu_indices(Z.shape[1], k=1)
    return np.hstack([Z, Z[:, i] * Z[:, j]])


class HeadRoleClassifier(ClassifierMixin, BaseEstimator):
    """Labels heads with a role (or ``unexplained``) and a calibrated confidence.

    Parameters
    ----------
    C : inverse L2 penalty strength of the logistic regression.
    interactions : add pairwise products of the standardised features.
    calibrate : fit a temperature on out-of-fold logits (else T = 1).
    cv : folds for the temperature fit (reduced when a class is smaller).
    second_min_lift : how far a role's own feature must exceed what the primary class shows
        anyway to be reported as the second role.
    max_iter, random_state : passed to the solver / the fold split.
    """

    def __init__(
        self,
        C: float = 1.0,
        interactions: bool = False,
        calibrate: bool = True,
        cv: int = 5,
        second_min_lift: float = 0.2,
        max_iter: int = 2000,
        random_state: int | None = 0,
    ):
        self.C = C
        self.interactions = interactions
        self.calibrate = calibrate
        self.cv = cv
        self.second_min_lift = second_min_lift
        self.max_iter = max_iter
        self.random_state = random_state

    # --- fitting -------------------------------------------------------------------------

    def fit(self, X: Any, y: Any, groups: Any = None) -> "HeadRoleClassifier":
        """Fit on features X [sample, feature] and labels y; ``groups`` [sample] (optional): samples
        sharing a group are kept in one fold of the temperature fit (see the module docstring)."""
        X, y = validate_data(self, X, y, dtype=np.float64)
        if groups is not None and len(groups) != len(y):
            raise ValueError(f"groups has {len(groups)} entries for {len(y)} samples")
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(
                f"HeadRoleClassifier needs at least 2 classes, got 1 class ({self.classes_[0]!r})"
            )
        self.mean_ = X.mean(axis=0)
        scale = X.std(axis=0)
        self.scale_ = np.where(scale > 1e-12, scale, 1.0)
        Z = _expand((X - self.mean_) / self.scale_, self.interactions)
        self.temperature_ = self._fit_temperature(Z, codes, groups) if self.calibrate else 1.0
        self.weights_, self.bias_ = self._fit_linear(Z, codes)
        self._fit_implied(X, codes)
        return self

    def _fit_implied(self, X: np.ndarray, codes: np.ndarray) -> None:
        """own_column_ [class] (-1: none), implied_base_ and implied_slope_ [class, feature]:
        what a head of each class shows on every feature anyway (see the module docstring)."""
        names = [str(n) for n in getattr(self, "feature_names_in_", [])]
        k, n = len(self.classes_), X.shape[1]
        self.own_column_ = np.array(
            [names.index(str(c)) if str(c) in names else -1 for c in self.classes_]
        )
        self.implied_base_, self.implied_slope_ = np.zeros((k, n)), np.zeros((k, n))
        for c in range(k):
            rows, own = X[codes == c], self.own_column_[c]
            if own < 0:
                self.implied_base_[c] = np.maximum(np.median(rows, axis=0), 0.0)
                continue
            clear = rows[rows[:, own] >= 0.3]
            if len(clear):
                self.implied_slope_[c] = np.maximum(
                    np.median(clear / clear[:, own : own + 1], axis=0), 0.0
                )

    def _fit_linear(self, Z: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Weights [class, feature] and bias [class] of a softmax over linear scores."""
        lr = LogisticRegression(C=self.C, max_iter=self.max_iter).fit(Z, codes)
        self.n_iter_ = int(np.max(lr.n_iter_))  # solver iterations of the last fit (the full one)
        weights, bias = lr.coef_, lr.intercept_
        if weights.shape[0] == 1:  # binary: sigmoid(w.z + b) == softmax([0, w.z + b])
            weights, bias = np.vstack([np.zeros_like(weights), weights]), np.r_[0.0, bias]
        full_w = np.zeros((int(codes.max()) + 1, Z.shape[1]))
        full_b = np.full(int(codes.max()) + 1, -1e3)  # a class absent from a fold gets no mass
        present = np.unique(codes)
        full_w[present], full_b[present] = weights, bias
        return full_w, full_b

    def _fit_temperature(self, Z: np.ndarray, codes: np.ndarray, groups: Any = None) -> float:
        smallest = np.bincount(codes).min()
        folds = min(self.cv, smallest, len(np.unique(groups)) if groups is not None else smallest)
        if folds < 2:
            return 1.0
        logits = np.zeros((len(codes), int(codes.max()) + 1))
        if groups is None:
            split = StratifiedKFold(folds, shuffle=True, random_state=self.random_state).split(
                Z, codes
            )
        else:
            split = StratifiedGroupKFold(folds, shuffle=True, random_state=self.random_state).split(
                Z, codes, groups
            )
        for train, test in split:
            w, b = self._fit_linear(Z[train], codes[train])
            logits[test] = Z[test] @ w.T + b

        def nll(log_t: float) -> float:
            return float(
                -log_softmax(logits / np.exp(log_t), axis=1)[np.arange(len(codes)), codes].mean()
            )

        return float(np.exp(minimize_scalar(nll, bounds=(-3.0, 3.0), method="bounded").x))

    # --- prediction ------------------------------------------------------------------------

    def _logits(self, X: Any) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        Z = _expand((X - self.mean_) / self.scale_, self.interactions)
        return (Z @ self.weights_.T + self.bias_) / self.temperature_

    def decision_function(self, X: Any) -> np.ndarray:
        """Calibrated logits [sample, class]; for two classes, the log-odds of ``classes_[1]``."""
        check_is_fitted(self)
        logits = self._logits(X)
        return logits[:, 1] - logits[:, 0] if len(self.classes_) == 2 else logits

    def predict_proba(self, X: Any) -> np.ndarray:
        """Calibrated probabilities [sample, class], columns in ``classes_`` order."""
        return softmax(self._logits(X), axis=1)

    def predict(self, X: Any) -> np.ndarray:
        check_is_fitted(self)
        return self.classes_[np.argmax(self._logits(X), axis=1)]

    def second_roles(self, X: Any, primary: np.ndarray | None = None) -> np.ndarray:
        """The second role of each sample (object array, NaN where none holds); see the module doc."""
        logits = self._logits(X)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        primary_idx = (
            np.argmax(logits, axis=1)
            if primary is None
            else np.searchsorted(self.classes_, primary)
        )
        out = np.full(len(X), np.nan, dtype=object)
        names = [str(n) for n in getattr(self, "feature_names_in_", [])]
        candidates = [
            (k, names.index(str(c)))
            for k, c in enumerate(self.classes_)
            if str(c) in names and str(c) not in NO_SECOND
        ]
        if not candidates:
            return out
        cls, cols = np.array([k for k, _ in candidates]), np.array([j for _, j in candidates])
        own = self.own_column_[primary_idx]
        own_value = np.where(own >= 0, X[np.arange(len(X)), np.maximum(own, 0)], 0.0)
        implied = (
            self.implied_base_[primary_idx]
            + self.implied_slope_[primary_idx] * np.maximum(own_value, 0.0)[:, None]
        )
        excess = X[:, cols] - implied[:, cols]
        excess[cls[None, :] == primary_idx[:, None]] = -np.inf
        best = np.argmax(excess, axis=1)
        hold = excess[np.arange(len(X)), best] >= self.second_min_lift
        out[hold] = self.classes_[cls[best[hold]]]
        return out

    # --- serialisation (JSON-friendly, no pickle) -----------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        check_is_fitted(self)
        out: dict[str, Any] = {
            "params": self.get_params(),
            "classes": self.classes_.tolist(),
            "n_features_in": int(self.n_features_in_),
        }
        if hasattr(self, "feature_names_in_"):
            out["feature_names_in"] = [str(n) for n in self.feature_names_in_]
        for name in (
            "mean_",
            "scale_",
            "weights_",
            "bias_",
            "implied_base_",
            "implied_slope_",
            "own_column_",
        ):
            out[name.rstrip("_")] = getattr(self, name).tolist()
        out["temperature"] = float(self.temperature_)
        out["n_iter"] = int(self.n_iter_)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "HeadRoleClassifier":
        clf = cls(**data["params"])
        clf.classes_ = np.asarray(data["classes"])
        clf.n_features_in_ = int(data["n_features_in"])
        if "feature_names_in" in data:
            clf.feature_names_in_ = np.asarray(data["feature_names_in"], dtype=object)
        for name in ("mean", "scale", "weights", "bias", "implied_base", "implied_slope"):
            setattr(clf, name + "_", np.asarray(data[name], dtype=float))
        clf.own_column_ = np.asarray(data["own_column"], dtype=int)
        clf.temperature_ = float(data["temperature"])
        clf.n_iter_ = int(data.get("n_iter", 1))
        return clf

"""The shipped reference data of the head-role classifier.

- ``model.json``: the fitted default ``HeadRoleClassifier`` (parameters as JSON, never a pickle),
  with the version, bank seed and size it was fitted with, and its held-out scores;
- ``bank.csv``: the labelled reference bank it was fitted on (``build_bank(seed)`` rebuilds it).

Both are written by ``interp.classify.reference.fit.refit()``. Bump ``REFERENCE_VERSION``
whenever the bank's generators, the feature matrix or the estimator change: a run records the
version it was classified with, and a model file of another version is refused.
"""

REFERENCE_VERSION = "2.1.0"
MODEL_FILE = "model.json"
BANK_FILE = "bank.csv"

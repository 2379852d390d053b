"""The shipped reference data of the head-role classifier.

- ``model.json``: the fitted default ``HeadRoleClassifier`` (parameters as JSON, never a pickle),
  with the version, bank seed and size it was fitted with, and its held-out scores;
- ``bank.csv``: the labelled reference bank it was fitted on (``build_bank(seed)`` rebuilds it);
- ``writes_model.json`` and ``writes_bank.csv``: the write classifier (what a head's OV circuit
  does: interp.classify.writes) and its bank of synthetic heads
  (interp.classify.reference.writes_bank).

All are written by ``interp.classify.reference.fit.refit()``. Bump ``REFERENCE_VERSION``
whenever a bank's generators, the feature or write matrix or the estimator change: a run records
the version it was classified with, and a model file of another version is refused.
"""

REFERENCE_VERSION = "3.0.0"
MODEL_FILE = "model.json"
BANK_FILE = "bank.csv"
WRITES_MODEL_FILE = "writes_model.json"
WRITES_BANK_FILE = "writes_bank.csv"

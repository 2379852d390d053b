"""The shipped default classifier: loading it, and rebuilding it from the reference bank.

The default model is fitted on ``build_bank(BANK_SEED, BANK_PER_ROLE)`` and stored as JSON in
``interp/classify/reference/model.json`` together with the bank as csv; loading it never unpickles
anything. ``refit()`` rebuilds both (about a minute on two cores); bump ``REFERENCE_VERSION`` in
``interp/classify/reference/__init__.py`` when the result changes.
"""

from __future__ import annotations

import json
import stat
import time
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

import numpy as np
import pandas as pd

from interp.classify.estimator import HeadRoleClassifier
from interp.classify.matrix import COLUMNS
from interp.classify.reference import (
    BANK_FILE,
    MODEL_FILE,
    REFERENCE_VERSION,
    WRITES_BANK_FILE,
    WRITES_MODEL_FILE,
)
from interp.classify.reference.bank import build_bank
from interp.classify.writes import WRITE_COLUMNS
from interp.errors import RunError

BANK_SEED = 0
BANK_PER_ROLE = 30
HELD_OUT_SEED = 1  # the bank seed the shipped model's held-out scores are measured on
WRITES_MODELS = 24  # bank vocabularies of the write bank
WRITES_PER_ROLE = 6  # strong heads per write role and vocabulary


def reference_dir() -> Path:
    return Path(str(files("interp.classify.reference")))


def fit_bank(bank: pd.DataFrame, **params) -> HeadRoleClassifier:
    """A HeadRoleClassifier fitted on a bank's feature columns and labels; a head and its
    no-syntax twin (``head_id``) stay in one fold of the temperature fit."""
    groups = bank["head_id"].to_numpy() if "head_id" in bank.columns else None
    return HeadRoleClassifier(**params).fit(
        bank[list(COLUMNS)], bank["label"].astype(str), groups=groups
    )


def read_bank(path: str | Path) -> pd.DataFrame:
    """A bank csv (labels such as "null_head" must not turn into NaN)."""
    return pd.read_csv(path, keep_default_na=False, na_values={"second": [""]})


def load_bank() -> pd.DataFrame:
    """The shipped reference bank."""
    return read_bank(reference_dir() / BANK_FILE)


def save_model(clf: HeadRoleClassifier, path: str | Path, **meta) -> None:
    from interp.pipeline.rundir import write_text

    write_text(
        Path(path),
        json.dumps({"version": REFERENCE_VERSION, **meta, "model": clf.to_dict()}, indent=1),
    )


def load_classifier(
    path: str | Path, version: str | None = REFERENCE_VERSION
) -> HeadRoleClassifier:
    """A fitted classifier from its JSON file; refuse another reference version (None: any)."""
    path = Path(path)
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a FIFO would block, a device never ends
            raise RunError(f"{path} is not a classifier model (not a regular file)")
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunError(
            f"no classifier model at {path}: run `interp classify RUN_DIR --refit`"
        ) from None
    except json.JSONDecodeError as exc:
        raise RunError(f"{path} is not a classifier model ({exc.msg})") from None
    except UnicodeDecodeError:
        raise RunError(f"{path} is not a classifier model (not UTF-8 text)") from None
    except OSError as exc:
        raise RunError(f"{path} is not a classifier model ({exc.strerror or exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise RunError(f"{path} is not a classifier model (no fitted model in it)")
    if version is not None and data.get("version") != version:
        raise RunError(
            f"{path} holds reference version {data.get('version')!r}, this interp needs {version!r}: "
            f"rebuild it with `interp classify RUN_DIR --refit`"
        )
    try:
        return HeadRoleClassifier.from_dict(data["model"])
    except (KeyError, TypeError, ValueError) as exc:
        raise RunError(f"{path} is not a classifier model ({type(exc).__name__}: {exc})") from None


@lru_cache(maxsize=1)
def default_classifier() -> HeadRoleClassifier:
    """The shipped, versioned default model (loaded once per process)."""
    return load_classifier(reference_dir() / MODEL_FILE)


@lru_cache(maxsize=1)
def default_writer() -> HeadRoleClassifier:
    """The shipped, versioned write classifier (loaded once per process)."""
    return load_classifier(reference_dir() / WRITES_MODEL_FILE)


def fit_write_bank(bank: pd.DataFrame, **params) -> HeadRoleClassifier:
    """A HeadRoleClassifier fitted on a write bank's columns and labels; the heads of one bank
    vocabulary (``group``) stay in one fold of the temperature fit."""
    return HeadRoleClassifier(**params).fit(
        bank[list(WRITE_COLUMNS)], bank["label"].astype(str), groups=bank["group"].to_numpy()
    )


def held_out_scores(
    clf: HeadRoleClassifier, bank: pd.DataFrame, columns: tuple[str, ...] = COLUMNS
) -> dict[str, float]:
    """Accuracy, log loss and expected calibration error (10 bins) on a bank the model never saw."""
    proba = clf.predict_proba(bank[list(columns)])
    labels = bank["label"].astype(str).to_numpy()
    pred = clf.classes_[proba.argmax(1)]
    conf = proba.max(1)
    hit = pred == labels
    bins = np.minimum((conf * 10).astype(int), 9)
    ece = sum(
        abs(hit[bins == b].mean() - conf[bins == b].mean()) * (bins == b).mean()
        for b in range(10)
        if (bins == b).any()
    )
    col = {c: i for i, c in enumerate(clf.classes_)}
    p_true = np.array([proba[i, col[l]] if l in col else 0.0 for i, l in enumerate(labels)])
    return {
        "accuracy": float(hit.mean()),
        "log_loss": float(-np.log(np.clip(p_true, 1e-12, 1)).mean()),
        "ece": float(ece),
        "n": int(len(labels)),
    }


def refit(
    directory: str | Path | None = None,
    seed: int = BANK_SEED,
    per_role: int = BANK_PER_ROLE,
    held_out_seed: int | None = HELD_OUT_SEED,
    model_name: str = MODEL_FILE,
    bank_name: str = BANK_FILE,
) -> HeadRoleClassifier:
    """Rebuild the bank, fit the default model, write the bank (``bank.csv``) and the model
    (``model.json``) to ``directory`` (default: the package's reference folder) and return the
    model. ``held_out_seed``: also score it on a second bank built with that seed (None: skip).
    The write classifier is refitted by :func:`refit_writer`."""
    from interp.pipeline.rundir import atomic_path

    directory = reference_dir() if directory is None else Path(directory)
    start = time.perf_counter()
    bank = build_bank(seed, per_role)
    clf = fit_bank(bank)
    meta = {
        "bank_seed": seed,
        "bank_per_role": per_role,
        "n_bank": len(bank),
        "labels": bank["label"].value_counts().sort_index().to_dict(),
    }
    if held_out_seed is not None:
        meta["held_out"] = {
            "seed": held_out_seed,
            **held_out_scores(clf, build_bank(held_out_seed, per_role)),
        }
    meta["seconds"] = round(time.perf_counter() - start, 1)
    with atomic_path(directory / bank_name) as tmp:
        bank.to_csv(tmp, index=False, float_format="%.6g")
    save_model(clf, directory / model_name, **meta)
    if directory == reference_dir():
        default_classifier.cache_clear()
    return clf


def refit_writer(
    directory: str | Path | None = None,
    seed: int = BANK_SEED,
    n_models: int = WRITES_MODELS,
    per_role: int = WRITES_PER_ROLE,
    held_out_seed: int | None = HELD_OUT_SEED,
    model_name: str = WRITES_MODEL_FILE,
    bank_name: str = WRITES_BANK_FILE,
) -> HeadRoleClassifier:
    """Rebuild the write bank, fit the write classifier, write both (``writes_bank.csv``,
    ``writes_model.json``) to ``directory`` (default: the package's reference folder) and return
    the model; ``held_out_seed``: also score it on a write bank built with that seed."""
    from interp.classify.reference.writes_bank import build_write_bank
    from interp.pipeline.rundir import atomic_path

    directory = reference_dir() if directory is None else Path(directory)
    start = time.perf_counter()
    bank = build_write_bank(seed, n_models, per_role)
    clf = fit_write_bank(bank)
    meta = {
        "bank_seed": seed,
        "bank_models": n_models,
        "bank_per_role": per_role,
        "n_bank": len(bank),
        "labels": bank["label"].value_counts().sort_index().to_dict(),
    }
    if held_out_seed is not None:
        other = build_write_bank(held_out_seed, n_models, per_role)
        meta["held_out"] = {"seed": held_out_seed, **held_out_scores(clf, other, WRITE_COLUMNS)}
    meta["seconds"] = round(time.perf_counter() - start, 1)
    with atomic_path(directory / bank_name) as tmp:
        bank.to_csv(tmp, index=False, float_format="%.6g")
    save_model(clf, directory / model_name, **meta)
    if directory == reference_dir():
        default_writer.cache_clear()
    return clf

"""Classify stage: features table -> roles table (+ clusters of unexplained heads, a summary).

Every head gets a primary role from the catalogue (interp.roles) or ``unexplained``, a
calibrated confidence, a second role where one holds, its sink mass (overall and per probe suite),
per-role scores and, when bootstrap replicates of the features are available, a stability; a head
whose role could be decided by features the run did not measure is ``unmeasured`` instead
(interp.classify.unmeasured). The method:

1. :func:`~interp.classify.matrix.head_frames` turns the features table into one row per
   head: each role's feature, read on the head's attention off the sink (the first position),
   as a lift over the no-preference baseline (syntax: the best lift over the best fixed word
   offset, position or form; positional: the best fixed position), plus the normalised entropy
   over the content keys; and beside it the head's sink mass on the queries behind each column.
2. :class:`~interp.classify.estimator.HeadRoleClassifier` (a scikit-learn estimator: a
   temperature-calibrated multinomial logistic model) names what the head does with its non-sink
   attention. The shipped model is fitted on the reference bank (interp.classify.reference.bank):
   synthetic heads of every archetype, their mixtures with BOS sinks, noise and each other, and
   null heads (random, shuffled, off-catalogue behaviours) labelled ``unexplained`` -- all
   scored by the same feature code as real heads.
3. The sink rule (interp.classify.primary): that name is the primary role wherever the
   head's attention off the sink is substantial; a head with too little is ``first_token``.
4. What was not measured (a probe suite skipped or not asked for, NaN attention) is named per
   head, and a label it could have overturned becomes ``unmeasured`` (interp.classify.unmeasured).
5. A head still ``unexplained`` in which detectors fitted on planted blends find two archetypes
   or more, each holding a fifth of its attention, is ``mixed``, its blend in ``components``
   (interp.classify.mixture).
6. Stability: the share of bootstrap replicates (``feature_replicates.npz``) on which the head
   keeps its role of where it looks (a mixed head: the same roles in its blend).
7. Unexplained heads are clustered by attention profile; recurring groups are described.

``interp classify RUN_DIR [--refit]`` calls :func:`run_stage`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from interp.classify.clusters import cluster_unexplained
from interp.classify.config import ClassifyConfig
from interp.classify.estimator import HeadRoleClassifier
from interp.classify.evidence import Evidence, with_evidence
from interp.classify.frequent import name_frequent
from interp.classify.matrix import SINK_MASS, head_frames, head_matrix
from interp.classify.mixture import default_detectors, name_mixtures
from interp.classify.primary import label_heads
from interp.classify.reference import REFERENCE_VERSION
from interp.classify.reference.fit import default_classifier, default_writer, load_classifier
from interp.classify.reference.fit import refit as refit_reference
from interp.classify.stability import head_stability
from interp.classify.unmeasured import mark
from interp.collect.config import FEATURES_VERSION
from interp.collect.measured import measured_mask
from interp.errors import RunError
from interp.pipeline.contract import StageRecord
from interp.pipeline.tables import ROLES_TABLE
from interp.roles import ROLE_NAMES, SCORED_ROLES, UNEXPLAINED

if TYPE_CHECKING:  # classify never runs the model
    from interp.model.load import LoadedModel

__all__ = [
    "ClassifyConfig",
    "ClassifyResult",
    "HeadRoleClassifier",
    "classify",
    "head_matrix",
    "run_stage",
    "write",
]

REPLICATES_FILE = "feature_replicates.npz"
REFIT_MODEL_FILE = "classifier.json"
REFIT_BANK_FILE = "reference_bank.csv"


@dataclass
class ClassifyResult:
    """roles: the roles table; clusters: cluster, layer, head, description; summary: tidy counts
    (scope "model" | "layer" | "truth", layer, role, count, share); confusion: truth x predicted
    head counts when the true roles were given, else None."""

    roles: pd.DataFrame
    clusters: pd.DataFrame
    summary: pd.DataFrame
    confusion: pd.DataFrame | None = None

    @property
    def counts(self) -> pd.Series:
        """Number of heads per role (every role of the catalogue, zeros included)."""
        rows = self.summary[self.summary["scope"] == "model"]
        return rows.set_index("role")["count"]

    @property
    def share_unexplained(self) -> float:
        return float((self.roles["role"] == UNEXPLAINED).mean())

    @property
    def per_layer(self) -> pd.DataFrame:
        """Role counts per layer: layer x role."""
        return pd.crosstab(self.roles["layer"], self.roles["role"]).reindex(
            columns=list(ROLE_NAMES), fill_value=0
        )


def _classifier(config: ClassifyConfig) -> HeadRoleClassifier:
    clf = (
        default_classifier()
        if config.reference is None
        else load_classifier(config.reference, config.reference_version)
    )
    if config.reference is None and config.reference_version != REFERENCE_VERSION:
        raise RunError(
            f"this interp ships reference version {REFERENCE_VERSION!r}, the config asks for "
            f"{config.reference_version!r}: reclassify with --refit or the matching interp version"
        )
    return clf


def roles_table(clf: HeadRoleClassifier, matrix: pd.DataFrame, sinks: pd.DataFrame) -> pd.DataFrame:
    """layer, head, role, confidence, second_role, sink_mass, score_<role> for every role the
    classifier names (stability added later)."""
    labels = label_heads(clf, matrix, sinks)
    frame = pd.DataFrame(
        {
            "layer": matrix.index.get_level_values("layer").astype(int),
            "head": matrix.index.get_level_values("head").astype(int),
            "role": labels.primary,
            "confidence": labels.confidence,
            "second_role": pd.Series(labels.second, dtype=object).to_numpy(),
            "sink_mass": sinks[SINK_MASS].to_numpy(),
            "stability": np.nan,
        }
    )
    for j, role in enumerate(SCORED_ROLES):
        frame[f"score_{role}"] = labels.scores[:, j]
    return frame


def suite_sinks(roles: pd.DataFrame, sinks: pd.DataFrame | None) -> pd.DataFrame:
    """The roles table with ``sink_mass_<suite>`` per suite of the ``sinks`` table (interp.collect.sinks), if any."""
    if sinks is None or sinks.empty:
        return roles
    wide = sinks.pivot_table(
        index=["layer", "head"], columns="suite", values="sink_mass", aggfunc="mean", dropna=False
    )
    wide.columns = [f"sink_mass_{suite}" for suite in wide.columns]
    return roles.join(wide, on=["layer", "head"])


def role_summary(
    roles: pd.DataFrame, truth: Mapping[tuple[int, int], str] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Tidy counts per role for the model and per layer (+ recall per true role), and the confusion table."""
    rows = []
    counts = roles["role"].value_counts()
    for role in ROLE_NAMES:
        rows.append(
            {
                "scope": "model",
                "layer": np.nan,
                "role": role,
                "count": int(counts.get(role, 0)),
                "share": counts.get(role, 0) / len(roles),
            }
        )
    for layer, group in roles.groupby("layer"):
        c = group["role"].value_counts()
        for role in ROLE_NAMES:
            rows.append(
                {
                    "scope": "layer",
                    "layer": layer,
                    "role": role,
                    "count": int(c.get(role, 0)),
                    "share": c.get(role, 0) / len(group),
                }
            )
    confusion = None
    if truth:
        known = roles[[(l, h) in truth for l, h in zip(roles["layer"], roles["head"])]]
        true = pd.Series(
            [truth[(l, h)] for l, h in zip(known["layer"], known["head"])],
            index=known.index,
            name="truth",
        )
        confusion = pd.crosstab(true, known["role"].rename("predicted"))
        for role, group in known.groupby(true):
            rows.append(
                {
                    "scope": "truth",
                    "layer": np.nan,
                    "role": role,
                    "count": len(group),
                    "share": float((group["role"] == role).mean()),
                }
            )
    return pd.DataFrame(rows, columns=["scope", "layer", "role", "count", "share"]), confusion


def classify(
    features: pd.DataFrame,
    replicates: np.ndarray | None = None,
    names: list[str] | None = None,
    config: ClassifyConfig = ClassifyConfig(),
    truth: Mapping[tuple[int, int], str] | None = None,
    classifier: HeadRoleClassifier | None = None,
    sinks: pd.DataFrame | None = None,
    causal: bool | None = None,
    evidence: Evidence | None = None,
    writer: HeadRoleClassifier | None = None,
) -> ClassifyResult:
    """Label every head of a features table.

    replicates: bootstrap replicates of the values, float [replicate, layer, feature, head] with
        features in ``names`` order (``FeatureAccumulator.replicates()``); None: stability NaN.
    truth: known roles of some heads, (layer, head) -> role (planted models): adds recall rows to
        the summary and a confusion table.
    classifier: a fitted HeadRoleClassifier to use instead of the one ``config`` names.
    sinks: the sinks table (every head's sink mass per probe suite, interp.collect.sinks): adds the
        roles table's ``sink_mass_<suite>`` columns.
    causal: whether the model is causal (a causal model cannot have next_token, which is then not
        missing; None: told from the features, see interp.classify.unmeasured).
    evidence: the other stages' tables the roles also read (weights, composition, effects,
        task_attention; interp.classify.evidence); None: where heads look, alone.
    writer: a fitted write classifier to use instead of the shipped one.
    """
    clf = classifier if classifier is not None else _classifier(config)
    if config.second_min_lift is not None:  # a copy: the shipped model is cached and shared
        clf = copy.deepcopy(clf).set_params(second_min_lift=config.second_min_lift)
    matrix, shares = head_frames(features)
    roles = roles_table(clf, matrix, shares)
    if replicates is not None and names is None:
        raise ValueError("replicates need their feature names: pass names=...")
    ok = measured_mask(features, matrix.index)
    roles = suite_sinks(mark(roles, features, matrix, clf, ok, causal), sinks)
    detectors = default_detectors()
    roles = name_frequent(name_mixtures(roles, matrix, detectors), features)
    if replicates is not None and names is not None:
        if config.max_replicates is not None:
            replicates = replicates[: config.max_replicates]
        roles["stability"] = head_stability(
            clf, features, replicates, list(names), shares, roles, detectors
        )
    has_weights = evidence is not None and evidence.weights is not None
    roles, _ = with_evidence(roles, evidence, writer or (default_writer() if has_weights else None))
    roles = ROLES_TABLE.validate(roles.sort_values(["layer", "head"]).reset_index(drop=True))
    clustered = pd.Series(roles["role"].to_numpy(), index=matrix.index)
    clusters = cluster_unexplained(
        matrix.join(shares[[SINK_MASS]]),
        clustered,
        config.cluster_distance,
        config.min_cluster_size,
    )
    summary, confusion = role_summary(roles, truth)
    return ClassifyResult(roles, clusters, summary, confusion)


def read_replicates(run_dir: Path) -> tuple[np.ndarray | None, list[str] | None]:
    """``feature_replicates.npz`` (arrays ``values`` [replicate, layer, feature, head] and ``names``)."""
    path = Path(run_dir) / REPLICATES_FILE
    if not path.exists():
        return None, None
    try:
        if not path.is_file():  # a FIFO would block the reader
            raise ValueError("not a regular file")
        with np.load(path, allow_pickle=False) as data:
            values, names = np.asarray(data["values"], dtype=float), [str(n) for n in data["names"]]
    except Exception:  # noqa: BLE001  (random bytes, a pickle, a truncated zip: numpy and zipfile raise many types)
        raise RunError(
            f"{path} is unreadable or malformed (not a NumPy archive of float arrays 'values' and "
            f"'names'); rerun the stage that writes it"
        ) from None
    if values.ndim != 4 or values.shape[2] != len(names):
        raise RunError(
            f"{path} is unreadable or malformed (values of shape {values.shape} for {len(names)} feature "
            f"names); rerun the stage that writes it"
        )
    return values, names


def check_features_version(run_dir: Path) -> None:
    """Refuse features collected under another definition of the features (older runs record
    none: version 1), since the shipped model reads them as this version's."""
    from interp.pipeline import rundir

    collected = rundir.read_manifest(run_dir).get("stages", {}).get("collect")
    if collected is None:
        return
    version = (collected.get("config") or {}).get(
        "features_version", collected.get("features_version", 1)
    )
    if version != FEATURES_VERSION:
        raise RunError(
            f"{run_dir} was collected with features version {version}, this interp classifies "
            f"version {FEATURES_VERSION}: collect again with `interp collect {run_dir}` or `interp run`"
        )


def write(run_dir: Path, result: ClassifyResult) -> None:
    """Write the ``roles``, ``clusters`` and ``role_summary`` tables into the run."""
    from interp.pipeline import rundir

    rundir.write_table(run_dir, "roles", result.roles)
    rundir.write_table(run_dir, "clusters", result.clusters)
    rundir.write_table(run_dir, "role_summary", result.summary)


def check_inputs(config: ClassifyConfig) -> None:
    """Read the classifier model a config names now, so that a bad one (missing, a FIFO, another
    reference version) fails before the model loads."""
    if config.reference:
        load_classifier(config.reference, config.reference_version)


@dataclass(frozen=True)
class ClassifyRecord(StageRecord):
    """What the manifest records about a classify run."""

    reference_version: str  # the reference bank the classifier was fitted on
    share_unexplained: float  # share of the heads no archetype explains


def run_stage(
    run_dir: Path,
    model: LoadedModel | None = None,
    config: ClassifyConfig = ClassifyConfig(),
    progress: bool = True,
) -> ClassifyRecord:
    """The classify stage of a run: read ``features.parquet`` (+ ``feature_replicates.npz``),
    classify, write. The model is not needed (heads are labelled from their features).

    ``config.refit``: rebuild the reference bank and refit the model (about a minute) instead of
    using the shipped one; the model and its bank are written into the run directory
    (``classifier.json``, ``reference_bank.csv``) and used for this run.
    """
    from interp.pipeline import rundir

    run_dir = Path(run_dir)
    features = rundir.required_table(run_dir, "features", "collect")
    check_features_version(run_dir)
    replicates, names = read_replicates(run_dir)
    classifier = None
    if config.refit:
        classifier = refit_reference(
            run_dir, held_out_seed=None, model_name=REFIT_MODEL_FILE, bank_name=REFIT_BANK_FILE
        )
    causal = (rundir.read_manifest(run_dir).get("model") or {}).get("causal")
    result = classify(
        features,
        replicates,
        names,
        config,
        classifier=classifier,
        sinks=rundir.read_table(run_dir, "sinks"),
        causal=causal if isinstance(causal, bool) else None,
        evidence=Evidence.read(run_dir),
    )
    write(run_dir, result)
    return ClassifyRecord(REFERENCE_VERSION, round(result.share_unexplained, 4))

"""The classify stage's config: which classifier, and how labels, stability and clusters are read."""

from __future__ import annotations

from interp.classify.reference import REFERENCE_VERSION
from interp.config import MAX_INT, StageConfig, config, option, require


@config
class ClassifyConfig(StageConfig):
    """How heads are labelled."""

    refit: bool = option(default=False)
    """rebuild the reference bank and refit the classifier first (about a minute); the model and its bank are
    written into the run directory and used instead of the shipped one"""
    reference: str | None = option(default=None, file=True)
    """a fitted model JSON file; default: the shipped model (or the refit one)"""
    reference_version: str = option(default=REFERENCE_VERSION, cli=False)
    """the reference version the model file must carry (a run classified with another bank is not resumed)"""
    second_min_lift: float | None = option(default=None, ge=0.0, le=1.0)
    """overrides the model's threshold for reporting a second role"""
    max_replicates: int | None = option(default=None, ge=1, le=MAX_INT)
    """use at most this many bootstrap replicates for stability; default: all"""
    cluster_distance: float | None = option(default=None, gt=0)
    """distance (in standard deviations) below which unexplained heads are merged; default: the number of groups
    with the best silhouette"""
    min_cluster_size: int = option(default=2, ge=2, le=MAX_INT)
    """smallest group of unexplained heads reported"""

    def __post_init__(self) -> None:
        require(self, "reference_version", bool(self.reference_version), "a version string")

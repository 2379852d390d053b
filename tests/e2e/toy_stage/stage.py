"""The toy stage: a pure function on the features table, and its entry point."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from interp.pipeline import rundir
from interp.pipeline.contract import StageRecord
from toy_stage.config import ToyConfig


def count(features: pd.DataFrame, config: ToyConfig) -> pd.DataFrame:
    """Each head's number of features, times ``scale``."""
    sizes = features.groupby(["layer", "head"]).size().mul(config.scale)
    return sizes.rename("n").reset_index()


@dataclass(frozen=True)
class ToyRecord(StageRecord):
    heads: int  # heads counted


def run_stage(run_dir: Path, model: object, config: ToyConfig, progress: bool = True) -> ToyRecord:
    """Count the features collected for each head into the table ``toy``."""
    counts = count(rundir.required_table(run_dir, "features", "collect"), config)
    rundir.write_table(run_dir, "toy", counts)
    return ToyRecord(heads=len(counts))

"""A stage that is not part of interp: its config, its entry point, and nothing else. The stage
contract test registers it with one line and drives it through every command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from interp.config import StageConfig, config, option
from interp.pipeline import rundir


@config
class ToyConfig(StageConfig):
    """How the toy stage counts."""

    scale: int = option(1, ge=1, le=1000)
    """multiply every head's feature count by this"""


def run_stage(
    run_dir: Path, model: Any, config: ToyConfig, progress: bool = True
) -> dict[str, Any]:
    """Count the features collected for each head (times ``scale``) into the table ``toy``."""
    features = rundir.read_table(run_dir, "features")
    counts = features.groupby(["layer", "head"]).size().mul(config.scale).rename("n").reset_index()
    rundir.write_table(run_dir, "toy", counts)
    return {"heads": len(counts)}

"""The weights stage: what every head writes and whom it works with, read from its weights
(:mod:`.stage` is its entry point; the scores are pure functions in :mod:`.ov` and
:mod:`.composition`)."""

from interp.pipeline.contract import Stage
from interp.weights.config import WeightsConfig

STAGE = Stage(
    "weights",
    "Read every head's OV circuit, output size and composition with earlier heads.",
    WeightsConfig,
    "interp.weights.stage:run_stage",
    needs_model=True,
    tables=("weights", "composition"),
)

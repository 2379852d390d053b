"""The collect stage: one streaming pass of the model over the probe suites, every head's
attention folded into features (:mod:`.stage` is its entry point)."""

from interp.collect.config import CollectConfig
from interp.pipeline.contract import ReportSection, Stage

STAGE = Stage(
    "collect",
    "Gather every head's attention features over the probe suites.",
    CollectConfig,
    "interp.collect.stage:run_stage",
    needs_model=True,
    check="interp.collect.stage:check_inputs",
    tables=("features", "syntax", "sinks"),
    files=("feature_replicates.npz", "exemplars.npz"),
    sections=(
        ReportSection("features", "interp.report.sections:features", after="roles"),
        ReportSection("syntax", "interp.report.sections:syntax"),
        ReportSection("exemplars", "interp.report.sections:exemplars", after="task-attention"),
    ),
)

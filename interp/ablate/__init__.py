"""The ablate stage's machinery; the entry points live in :mod:`interp.ablate.stage`.

- ``corpus``: the evaluation sequences and the positions each metric reads
- ``forward``: the only code that runs the model (layer reuse, replicas, readout)
- ``values``: what replaces a head's output (zero / mean / resample / sink)
- ``metrics``: readout -> per-sequence sums (pure functions)
- ``stats``: per-sequence sums -> effect rows with paired bootstrap intervals
- ``attribution``: attribution patching, every head from one forward + backward per batch
- ``sweep``: the exact one-head-at-a-time sweep
- ``executor``: the sweep in shards of whole layers, the units an executor runs (interp.executors)
- ``pruning``: cumulative removal, least important first
- ``surprises``: roles meet effects
"""

from interp.ablate.config import AblateConfig
from interp.pipeline.contract import ReportSection, Stage

STAGE = Stage(
    "ablate",
    "Measure each head's causal effect.",
    AblateConfig,
    "interp.ablate.stage:run_stage",
    needs_model=True,
    check="interp.ablate.stage:check_inputs",
    tables=("effects", "pruning"),
    optional_tables=("task_attention",),
    sections=(
        ReportSection("effects", "interp.report.sections:effects"),
        ReportSection("pruning", "interp.report.sections:pruning"),
        ReportSection("task-attention", "interp.report.sections:task_attention"),
    ),
)

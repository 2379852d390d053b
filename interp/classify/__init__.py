"""The head-role classifier's parts; the stage's entry points live in :mod:`interp.classify.stage`.

- :mod:`.matrix`     features table -> per-head feature matrix (lifts over the baseline)
- :mod:`.estimator`  ``HeadRoleClassifier``, a calibrated scikit-learn estimator
- :mod:`.corpus`     synthetic probe sequences (token ids = word ids) for the reference bank
- :mod:`.patterns`   synthetic attention patterns, one builder per archetype and per null
- :mod:`.bank`       the labelled reference bank: ``build_bank(seed)``
- :mod:`.reference`  the shipped, versioned default model (JSON) and ``refit()``
- :mod:`.stability`  re-labelling on bootstrap replicates of the features
- :mod:`.clusters`   grouping the heads nobody named
"""

from interp.classify.config import ClassifyConfig
from interp.pipeline.contract import ReportSection, Stage

STAGE = Stage(
    "classify",
    "Label every head with a role.",
    ClassifyConfig,
    "interp.classify.stage:run_stage",
    reads=("collect", "weights", "ablate"),
    check="interp.classify.stage:check_inputs",
    tables=("roles", "clusters", "role_summary"),
    sections=(
        ReportSection("roles", "interp.report.sections:roles", after="summary"),
        ReportSection("evidence", "interp.report.evidence_section:section", after="exemplars"),
        ReportSection("clusters", "interp.report.sections:clusters", after="heads"),
    ),
)

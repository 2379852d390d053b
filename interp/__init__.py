"""interp: what each attention head of a transformer does, and how much the model needs it.

The public API, one import away::

    import interp
    model = interp.load_model("smollm2-135m")             # or a directory, a .gguf, a bridge
    run_dir = interp.run(interp.RunOptions(quick=True), model=model)
    tables = interp.load_run(run_dir)                      # .features .roles .effects .pruning

``run`` and ``load_model`` load torch when first used; the configs and ``load_run`` do not.
"""

from __future__ import annotations

import importlib
from typing import Any

from interp.ablate.config import AblateConfig
from interp.ablate.tasks import Task
from interp.classify.config import ClassifyConfig
from interp.collect.config import CollectConfig
from interp.model.spec import ModelSpec
from interp.pipeline.options import RunOptions
from interp.pipeline.results import RunTables, load_run
from interp.report.config import ReportConfig

__version__ = "0.1.0"

# Names that load the model stack (torch) on first use.
_LAZY = {
    "load_model": "interp.model.load",
    "LoadedModel": "interp.model.load",
    "run": "interp.pipeline.execute",
    "rerun_stage": "interp.pipeline.execute",
}
_RENAMED = {"run": "run_pipeline"}

__all__ = [
    "AblateConfig",
    "ClassifyConfig",
    "CollectConfig",
    "LoadedModel",
    "ModelSpec",
    "ReportConfig",
    "RunOptions",
    "RunTables",
    "Task",
    "load_model",
    "load_run",
    "rerun_stage",
    "run",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), _RENAMED.get(name, name))
    raise AttributeError(f"module 'interp' has no attribute {name!r}")

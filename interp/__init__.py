"""interp: what each attention head of a transformer does, and how much the model needs it.

The public API, one import away::

    import interp
    model = interp.load_model("smollm2-135m")             # or a directory, a .gguf, a bridge
    run_dir = interp.run(interp.RunOptions(quick=True), model=model)
    tables = interp.load_run(run_dir)                      # .features .roles .effects .pruning
    interp.figure(run_dir, "role_map")                     # in a notebook: the report's figures,
    interp.explorer(run_dir)                               # its explorer inline, and a run's summary

Every registered stage's config is exported under its class name (``interp.CollectConfig``, ...).
``run``, ``load_model`` and ``show`` load torch when first used; the configs and ``load_run`` do not.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import Any

from interp.ablate.tasks import Task
from interp.model.spec import ModelSpec
from interp.pipeline.options import RunOptions
from interp.pipeline.results import RunTables, load_run
from interp.pipeline.stages import STAGES

# The one version number lives in pyproject.toml; the installed package's metadata carries it.
__version__ = metadata.version("interp")

# Names that load the model stack (torch) on first use.
_LAZY = {
    "load_model": "interp.model.load",
    "LoadedModel": "interp.model.load",
    "run": "interp.pipeline.execute",
    "rerun_stage": "interp.pipeline.execute",
    "show": "interp.pipeline.show",
    # matplotlib and the report's templates: loaded when a notebook first asks
    "figure": "interp.report.notebook",
    "explorer": "interp.report.notebook",
}
_RENAMED = {"run": "run_pipeline"}

# The stage configs, one per registered stage (the registry imported them already).
_CONFIGS = {st.config.__name__: st.config for st in STAGES}
globals().update(_CONFIGS)

__all__ = [
    *_CONFIGS,
    "LoadedModel",
    "ModelSpec",
    "RunOptions",
    "RunTables",
    "Task",
    "explorer",
    "figure",
    "load_model",
    "load_run",
    "rerun_stage",
    "run",
    "show",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), _RENAMED.get(name, name))
    raise AttributeError(f"module 'interp' has no attribute {name!r}")

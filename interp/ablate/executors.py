"""Which executor runs the exact sweep: the local one (default), or Ray (an optional extra).

Kept apart from :mod:`interp.ablate.executor` (the seam and the local executor) so that the Ray
executor, which builds on that seam, is imported only when a run asks for it.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator

import torch

from interp.ablate.config import AblateConfig
from interp.ablate.executor import Executor, LocalExecutor
from interp.ablate.forward import Ablator
from interp.errors import ConfigError


def check_executor(config: AblateConfig) -> None:
    """Fail before the model loads when the chosen executor cannot run here."""
    if config.executor == "ray":
        require_ray()


def require_ray() -> None:
    """Fail in one line when Ray, an optional extra, is not installed (``--executor ray``)."""
    if importlib.util.find_spec("ray") is None:
        raise ConfigError('--executor ray needs Ray, an optional extra: pip install "interp[ray]"')


@contextlib.contextmanager
def open_executor(config: AblateConfig, ablator: Ablator) -> Iterator[Executor]:
    """The executor ``config`` asks for, ready for the stage's sweeps, closed after them (Ray's
    actors stopped, and a Ray started for the stage shut down)."""
    if config.executor == "local":
        yield LocalExecutor(ablator)
        return
    check_executor(config)
    from interp.ablate.ray_executor import RayExecutor

    executor = RayExecutor.start(ablator.model, config, torch.get_num_threads())
    try:
        yield executor
    finally:
        executor.close()

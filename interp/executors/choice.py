"""Which executor a stage's placement asks for (:mod:`interp.executors.work`), checked before the
model loads and opened for the stage's work."""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from interp.errors import ConfigError
from interp.executors.work import Executor, LocalExecutor

if TYPE_CHECKING:
    from interp.executors.placement import Placement
    from interp.model.load import LoadedModel


def check_executor(placement: Placement) -> None:
    """Fail before the model loads when the chosen executor cannot run here: Ray is missing, or
    no Ray cluster answers at ``--address`` (:func:`interp.executors.ray_workers.check_address`)."""
    if placement.executor != "ray":
        return
    if importlib.util.find_spec("ray") is None:
        raise ConfigError('--executor ray needs Ray, an optional extra: pip install "interp[ray]"')
    if placement.address is not None:
        from interp.executors.ray_workers import check_address

        check_address(placement.address)


@contextlib.contextmanager
def open_executor(
    placement: Placement,
    model: LoadedModel,
    threads: int,
    dtype: str | None = None,
    most: int | None = None,
    states: dict[str, Any] | None = None,
) -> Iterator[Executor]:
    """The executor ``placement`` asks for, closed after the block (Ray's actors stopped, and a
    Ray started for it shut down). Ray workers load ``model`` from its spec, in ``dtype`` (None:
    as the spec loads it), run ``threads`` torch threads, and are at most ``most`` by default
    (more would have no unit to run)."""
    if placement.executor == "local":
        yield LocalExecutor(model, dict(states or {}))
        return
    check_executor(placement)
    from interp.executors.ray_workers import RayExecutor

    executor = RayExecutor.start(model, placement, threads, dtype, most)
    try:
        yield executor
    finally:
        executor.close()

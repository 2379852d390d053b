"""Where and with how many threads a stage that runs the model does its work: the config fields
every such stage shares (the collect and ablate stages' configs build on :class:`Placement`).

``executor``, ``address`` and ``workers`` are declared ``placement=True``: they never change
what the stage writes (the executors' tests compare tables bit for bit), so ``--resume`` does not
compare them. ``threads`` is compared: a different count may round the last digits differently
(:mod:`interp.executors.threads`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal, get_args

from interp.config import StageConfig, config, option, require

Executor = Literal["local", "ray"]
EXECUTORS: tuple[Executor, ...] = get_args(Executor)


@config
class Placement(StageConfig):
    """Where a stage's work runs and on how many threads."""

    threads: int | None = option(default=None, ge=1, le=4096)
    """torch intra-op threads; default: the CPUs this process may use that other processes leave free (affinity,
    cgroup quota, /proc/stat), at least 1"""
    executor: Executor = option(default="local", placement=True)
    """where the stage's shards run: this process, or Ray actors that each load the model once (pip install
    "interp[ray]"); the tables are the same"""
    address: str | None = option(default=None, placement=True)
    """with --executor ray: the Ray cluster to join (auto, or HOST:PORT); default: one started here for the stage"""
    workers: int | None = option(default=None, ge=1, le=4096, placement=True)
    """with --executor ray: actors, each loading the model once; default: as many as the cluster's CPUs hold, at most
    one per shard"""

    def __post_init__(self) -> None:
        for name in ("address", "workers"):
            require(
                self,
                name,
                getattr(self, name) is None or self.executor != "local",
                "left unset with --executor local",
            )

    def for_replay(self, record: Mapping[str, Any]) -> Any:
        """The config that replays a recorded stage exactly: the thread count it ran with (the
        tables' last digits depend on it) where none is set."""
        threads = record.get("threads")
        if (
            self.threads is None
            and isinstance(threads, int)
            and not isinstance(threads, bool)
            and threads >= 1
        ):
            return dataclasses.replace(self, threads=threads)
        return self

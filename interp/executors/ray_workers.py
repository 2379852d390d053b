"""Ray as an executor (``--executor ray``; the optional extra ``interp[ray]``).

Each worker is a Ray actor that loads the model once, from the run's recorded model spec (a
model built in Python has none, and is refused: its weights are not shipped through the object
store, which for the models that need a cluster would be the largest transfer of the run), in
the stage's dtype, and runs torch with the stage's thread count: the float sums depend on it (in
the 8th digit), and with it the tables equal the local executor's to the last bit. An actor
reserves that many of the cluster's CPUs (and a GPU when the model's device is one), and runs
the units of any :class:`~interp.executors.work.Work`, readying its state for each kind once.

The coordinator puts the job in the object store once, hands each idle actor the next unit, and
takes back each unit's result. A worker that dies mid-unit (a lost node, the OOM killer) returns
nothing: its unit goes back in the queue for another actor, a new actor takes the dead one's
place, and the manifest lists the unit as retried; a unit's result is only ever taken from the
one attempt that returned, so nothing is measured twice or lost. A unit that ends
``MAX_ATTEMPTS`` workers in turn stops the stage.

Joining a cluster (``--address``) is checked first, within ``CONNECT_TIMEOUT_S``: Ray itself
retries an address that does not answer for minutes, and one that answers but is no Ray cluster
for longer (:func:`check_address`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import ray
import torch
from ray.exceptions import GetTimeoutError, RayActorError

from interp.errors import ConfigError, RunError
from interp.executors.placement import Placement
from interp.executors.work import Outcome, Work, unit_record
from interp.model.load import LoadedModel, check_dtype, load_model
from interp.model.spec import DType, ModelSpec

MAX_ATTEMPTS = 3  # a unit that ends this many workers in turn is not the workers' fault
CONNECT_TIMEOUT_S = 20.0  # a Ray cluster answers at --address within this, or it is refused
TCP_TIMEOUT_S = 5.0  # ... after the address took a TCP connection within this
_ANSWERED: set[str] = set()  # addresses a cluster answered at, in this process
# Test hook: units (by index, in every call) whose first attempt ends its worker's process
# once the unit is done and before its result is returned: a worker dying mid-stage.
DIE_ON_FIRST_TRY: frozenset[int] = frozenset()


def _ignore(n: int) -> None:
    """Progress on a worker goes nowhere: the coordinator counts whole units."""


class Worker:
    """A Ray actor: the model loaded once, units of any Work run on it."""

    def __init__(self, spec: dict[str, Any], dtype: DType | None, threads: int):
        torch.set_num_threads(threads)
        self.model = in_dtype(load_model(ModelSpec(**spec)), dtype)
        self.states: dict[str, Any] = {}

    def ready(self) -> bool:
        return True

    def run(self, work: Work, job: Any, unit: Any, die: bool = False) -> tuple[Any, float]:
        if work.name not in self.states:
            self.states[work.name] = work.prepare(self.model)
        start = time.perf_counter()
        result = work.run(self.states[work.name], job, unit, _ignore)
        seconds = time.perf_counter() - start
        if die:
            os._exit(1)
        return result, seconds


def in_dtype(model: LoadedModel, dtype: DType | None) -> LoadedModel:
    """The worker's model in the stage's dtype (converted the way the stage converts its copy)."""
    current = str(next(model.bridge.parameters()).dtype).removeprefix("torch.")
    if dtype is None or dtype == current:
        return model
    model.bridge.to(check_dtype(model.device, dtype))
    return dataclasses.replace(model, dtype=dtype)


@dataclass
class RayExecutor:
    """A stage's units on Ray actors; :meth:`start` connects and loads the model on each."""

    spec: dict[str, Any]
    dtype: str | None
    threads: int
    address: str | None
    owned: bool  # whether this executor started Ray (then it shuts it down)
    workers: int
    name: str = "ray"
    actors: dict[str, Any] = field(default_factory=dict)  # worker name -> live actor
    started: int = 0
    load_seconds: float = 0.0
    log: list[dict[str, Any]] = field(default_factory=list)
    retried: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0

    @classmethod
    def start(
        cls,
        model: LoadedModel,
        placement: Placement,
        threads: int,
        dtype: str | None = None,
        most: int | None = None,
    ) -> RayExecutor:
        if model.spec is None:
            raise ConfigError(
                "--executor ray loads the model on every worker from the run's model spec, and a model "
                "built in Python has none: use the local executor, or load the model by name or path"
            )
        owned = connect(placement.address)
        try:
            cpus = int(ray.cluster_resources().get("CPU", 0))
            workers = placement.workers or max(1, min(cpus // threads, most or cpus))
            if workers * threads > cpus:
                raise ConfigError(
                    f"--workers {workers} with {threads} threads each need {workers * threads} CPUs "
                    f"and the Ray cluster has {cpus}: lower --workers, or pass --threads 1"
                )
            executor = cls(
                dataclasses.asdict(model.spec), dtype, threads, placement.address, owned, workers
            )
            begin = time.perf_counter()
            for _ in range(workers):
                executor._spawn()
            executor._wait_ready(model.name)
            executor.load_seconds = time.perf_counter() - begin
        except BaseException:
            if owned:
                ray.shutdown()
            raise
        return executor

    def map(
        self, work: Work, job: Any, units: Sequence[Any], done: Callable[[int], None]
    ) -> Iterator[Outcome]:
        job_ref = ray.put(job)
        call, self.calls = self.calls, self.calls + 1
        queue = deque((index, 1) for index in range(len(units)))
        idle = deque(self.actors)
        running: dict[Any, tuple[str, int, int]] = {}
        while queue or running:
            while queue and idle:
                worker = idle.popleft()
                if worker not in self.actors:
                    continue
                index, attempt = queue.popleft()
                die = attempt == 1 and index in DIE_ON_FIRST_TRY
                ref = self.actors[worker].run.remote(work, job_ref, units[index], die)
                running[ref] = (worker, index, attempt)
            [ref], _ = ray.wait(list(running), num_returns=1)
            worker, index, attempt = running.pop(ref)
            try:
                result, seconds = ray.get(ref)
            except RayActorError as exc:  # the worker died: nothing of its unit is kept
                self._lost(work, units[index], index, attempt, worker, call, exc)
                queue.appendleft((index, attempt + 1))
                idle.append(self._spawn())
                continue
            outcome = Outcome(index, result, seconds, worker, attempt)
            self.log.append(unit_record(work, units[index], outcome, call))
            idle.append(worker)
            done(work.size(job, units[index]))
            yield outcome

    def record(self) -> dict[str, Any]:
        return {
            "executor": self.name,
            "address": self.address,
            "workers": self.workers,
            "threads_per_worker": self.threads,
            "workers_started": self.started,
            "load_seconds": round(self.load_seconds, 3),
            "shards": self.log,
            "retried": self.retried,
        }

    def close(self) -> None:
        for actor in self.actors.values():
            ray.kill(actor)
        self.actors.clear()
        if self.owned:
            ray.shutdown()

    # --- workers ---------------------------------------------------------------------------

    def _spawn(self) -> str:
        """Start one more actor (it loads the model in the background); return its name."""
        gpu = 1 if str(self.spec.get("device", "cpu")).startswith("cuda") else 0
        actor = ray.remote(num_cpus=self.threads, num_gpus=gpu, max_restarts=0)(Worker)
        name = f"w{self.started}"
        self.actors[name] = actor.remote(self.spec, self.dtype, self.threads)
        self.started += 1
        return name

    def _wait_ready(self, model_name: str) -> None:
        try:
            ray.get([actor.ready.remote() for actor in self.actors.values()])
        except (RayActorError, GetTimeoutError) as exc:
            raise RunError(
                f"the Ray workers could not load the model {model_name}: {last_line(exc)} (every worker "
                f"needs interp installed and the model at the same path or name)"
            ) from None

    def _lost(
        self,
        work: Work,
        unit: Any,
        index: int,
        attempt: int,
        worker: str,
        call: int,
        exc: Exception,
    ) -> None:
        self.actors.pop(worker, None)
        facts = work.describe(unit)
        self.retried.append(
            {
                "call": call,
                "shard": index,
                **facts,
                "worker": worker,
                "attempt": attempt,
                "error": last_line(exc),
            }
        )
        if attempt >= MAX_ATTEMPTS:
            what = ", ".join([work.name, *(f"{k} {v}" for k, v in facts.items())])
            raise RunError(
                f"shard {index} of the {what} ended {attempt} Ray workers in turn, the last with: "
                f"{last_line(exc)}"
            )


def connect(address: str | None) -> bool:
    """Join the Ray cluster at ``address`` (None: start one on this machine); return whether this
    call started Ray. A Ray this process joined already (a notebook, a test) is used as it is."""
    if ray.is_initialized():
        return False
    if address is not None:
        check_address(address)
    try:
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RunError(
            f"cannot reach the Ray cluster at {address}: {last_line(exc)} (start one with "
            f"`ray start --head`, check the address, or leave out --address to start one here)"
        ) from None
    return True


def check_address(address: str, timeout: float | None = None) -> None:
    """RunError, within about 5 s + ``timeout`` (default :data:`CONNECT_TIMEOUT_S`), unless a Ray
    cluster answers at ``address``.

    Ray retries an address that refuses or drops connections for minutes, and one where
    something else listens for longer still, and some of its failures end the process from
    C++. So the address is first resolved (``auto``: the cluster this machine runs) and tried
    with a plain TCP connection, then joined once by a child process that is killed at the
    timeout; only then does this process join it. A Ray this process has joined already (a
    notebook, a test) is used as it is, and an address that answered is not tried again."""
    if ray.is_initialized() or address in _ANSWERED:
        return
    timeout = CONNECT_TIMEOUT_S if timeout is None else timeout
    resolved = _resolve(address)
    host, _, port = resolved.rpartition(":")
    if host and port.isdigit():
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=TCP_TIMEOUT_S).close()
        except OSError as exc:
            why = exc.strerror or str(exc)
            raise RunError(
                f"cannot reach the Ray cluster at {_shown(address, resolved)}: {why} (start one with "
                f"`ray start --head`, check the address, or leave out --address to start one here)"
            ) from None
    probe = (
        "import logging, sys, ray\n"
        "ray.init(address=sys.argv[1], include_dashboard=False, logging_level=logging.ERROR)\n"
        "ray.shutdown()\n"
    )
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as err:
        # its own session, killed whole at the timeout: Ray's helpers must not outlive it, nor
        # hold a pipe this process would wait on
        child = subprocess.Popen(
            [sys.executable, "-c", probe, address],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
            start_new_session=True,
        )
        try:
            code = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            _kill_group(child)
        if code is not None and code != 0:
            err.seek(0)
            why = _why(err.read())
        else:
            why = f"no Ray cluster answered within {timeout:.0f} s"
        if code != 0:
            raise RunError(
                f"cannot reach the Ray cluster at {_shown(address, resolved)}: {why} (start one with "
                f"`ray start --head`, check the address, or leave out --address to start one here)"
            ) from None
    _ANSWERED.add(address)


def _kill_group(child: subprocess.Popen) -> None:
    """End the probe and whatever it started (its session), and reap it."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:  # already gone
        pass
    child.wait()


def _resolve(address: str) -> str:
    """``auto`` (or ``ray://``-less HOST:PORT) as the HOST:PORT Ray would join."""
    address = address.removeprefix("ray://")
    if address != "auto":
        return address
    try:
        from ray._private.services import canonicalize_bootstrap_address

        return canonicalize_bootstrap_address(address) or address
    except Exception:  # noqa: BLE001  (no running cluster, or another Ray: the child process says)
        return address


def _shown(address: str, resolved: str) -> str:
    return address if resolved == address else f"{address} ({resolved})"


def _why(stderr: str) -> str:
    """The last line of a failed join that says something (Ray's own errors end with it)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if "Error" in line or "error" in line]
    return (errors or lines or ["the join failed"])[-1][:300]


def last_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__

"""The trained-model cache: every checkpoint of a training as an ordinary Hugging Face directory.

:func:`train_cached` keeps each kept checkpoint of :func:`interp.synthetic.train.train` as
``config.json``, ``model.safetensors`` and tokenizer files under
``<cache>/trained/<task>-<hash of every setting>/step-<N>`` (``interp.model.load.load_model``
reads any of them), plus ``train.json`` with the curve and the evaluations; no pickle is written
or read, and a changed setting (or ``TRAIN_VERSION``, or a task's ``params()``) trains anew.
:func:`train_many` trains several models in parallel processes through that cache.
:func:`read_meta`, :func:`load_dir` and :func:`save_dir` keep one final model per directory (the
toy's cache and the forced-task models of :mod:`interp.synthetic.trained`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from interp.model.cache import cache_root as interp_cache_root
from interp.synthetic.planted import build_tokenizer
from interp.synthetic.train import (
    TRAIN_VERSION,
    Architecture,
    Training,
    TrainingTask,
    TrainResult,
    build_model,
    constrain,
    train,
)


def cache_key(task: TrainingTask, arch: Architecture, training: Training) -> str:
    """A short hash of everything that determines the trained weights."""
    blob = json.dumps(
        {
            "version": TRAIN_VERSION,
            "task": task.name,
            "task_params": task.params(),
            "arch": dataclasses.asdict(arch),
            "training": _training_key(training),
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _training_key(training: Training) -> dict[str, Any]:
    # the thread count and the logging density do not change the weights
    return {
        k: v
        for k, v in dataclasses.asdict(training).items()
        if k not in ("single_thread", "log_points")
    }


def cache_dir(task: TrainingTask, arch: Architecture, training: Training, root: Path) -> Path:
    return root / f"{task.name}-{cache_key(task, arch, training)}"


def default_cache_root() -> Path:
    return interp_cache_root() / "trained"


def train_cached(
    task: TrainingTask,
    arch: Architecture = Architecture(),
    training: Training = Training(),
    cache_root: str | os.PathLike | None = None,
    progress: bool = True,
) -> TrainResult:
    """:func:`train`, or its cached result: every checkpoint a safetensors Hugging Face directory.

    The directory name holds a hash of the task, architecture and training settings, so a changed
    setting trains anew. Writes are atomic (temp dir + rename).
    """
    from safetensors.torch import save_file

    root = Path(cache_root).expanduser() if cache_root is not None else default_cache_root()
    target = cache_dir(task, arch, training, root)
    if (target / "train.json").exists():
        return load_cached(target, task, arch, training)
    result = train(task, arch, training, progress)
    with atomic_dir(target, ".train-", lambda t: (t / "train.json").exists()) as tmp:
        for step, state in result.states.items():
            folder = tmp / f"step-{step}"
            folder.mkdir()
            result.hf.config.save_pretrained(folder)
            save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
            result.tokenizer.save_pretrained(folder)
        meta = {
            "version": TRAIN_VERSION,
            "task": task.name,
            "task_params": task.params(),
            "arch": dataclasses.asdict(arch),
            "training": dataclasses.asdict(training),
            "curve": result.curve,
            "evals": {str(k): v for k, v in result.evals.items()},
            "train_seconds": result.train_seconds,
        }
        (tmp / "train.json").write_text(json.dumps(meta, indent=1))
    result.path = target
    return result


@contextlib.contextmanager
def atomic_dir(target: Path, prefix: str, complete: Callable[[Path], bool]) -> Iterator[Path]:
    """A fresh folder next to ``target`` that becomes ``target`` when the block ends without
    error (and is removed when it raises): readers never see a half-written cache entry.

    Another process may have written the same entry meanwhile (two runs, a study's workers, a
    parallel test session that all found it missing). Where ``target`` is already ``complete``
    when the block ends, it is kept and this folder dropped: the entry is the same, and a reader
    may be loading it. Only an incomplete or stale ``target`` is replaced, moved aside first so
    that the new folder takes its name in one rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; the cache holds ordinary model directories
    try:
        yield tmp
        _publish(tmp, target, prefix, complete)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _publish(tmp: Path, target: Path, prefix: str, complete: Callable[[Path], bool]) -> None:
    """Rename ``tmp`` to ``target`` unless ``target`` is ``complete`` (then ``tmp`` stays, for
    the caller to remove). A rename takes the name only where no entry holds it, so an entry
    that lands between a check and the rename is found complete after it, and kept. A stale entry
    is set aside first; two writers replacing one stale entry at once may still drop the first
    one's new entry under its reader (a version change met by two processes at once)."""
    if complete(target):
        return
    with contextlib.suppress(OSError):  # the name is held: another writer's entry, or a stale one
        os.replace(tmp, target)
        return
    if complete(target):
        return
    stale = Path(tempfile.mkdtemp(prefix=f"{prefix}stale-", dir=target.parent))
    with contextlib.suppress(FileNotFoundError):  # another writer set it aside first
        os.replace(target, stale / "entry")
    shutil.rmtree(stale, ignore_errors=True)
    try:
        os.replace(tmp, target)
    except OSError:
        if not complete(target):
            raise


def read_meta(target: Path, meta_name: str, wanted: Mapping[str, Any]) -> dict | None:
    """The training record a single-model cache directory holds, where its ``wanted`` fields
    (those that decide the weights) match; None: no cache there, one another process is
    replacing, or another model's. Readers and :func:`save_dir`'s writers share this test, so
    an entry one keeps is one the other accepts."""
    try:
        found = json.loads((target / meta_name).read_text())
    except FileNotFoundError:
        return None
    return found if all(found.get(k) == v for k, v in wanted.items()) else None


def load_dir(target: Path, arch: Architecture) -> Any:
    """A GPT-2 from a single-model cache directory (safetensors; no pickle), ``arch``'s frozen parts applied."""
    from transformers import GPT2LMHeadModel

    hf = GPT2LMHeadModel.from_pretrained(target, attn_implementation="eager", use_safetensors=True)
    return constrain(hf, arch).eval()


def save_dir(
    hf: Any, tok: Any, wanted: Mapping[str, Any], record: dict, target: Path, meta_name: str
) -> dict:
    """Write one trained model as a Hugging Face directory (safetensors, tokenizer, ``meta_name``
    holding ``wanted`` and ``record``), atomically, and return that record. An entry that
    :func:`read_meta` accepts for ``wanted`` is the same model: where another process wrote one
    meanwhile, it is kept."""
    meta = {**wanted, **record}
    with atomic_dir(
        target, f".{target.name}-", lambda t: read_meta(t, meta_name, wanted) is not None
    ) as tmp:
        hf.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        (tmp / meta_name).write_text(json.dumps(meta, indent=1))
    return meta


def load_cached(
    target: Path, task: TrainingTask, arch: Architecture, training: Training
) -> TrainResult:
    """A :class:`TrainResult` read back from a cache directory written by :func:`train_cached`."""
    from safetensors.torch import load_file

    meta = json.loads((target / "train.json").read_text())
    tok = build_tokenizer(task.words)
    hf = build_model(arch, tok, training.seed)
    states = {
        step: load_file(str(target / f"step-{step}" / "model.safetensors"))
        for step in training.kept
    }
    hf.load_state_dict(states[training.steps])
    hf.eval()
    return TrainResult(
        hf,
        tok,
        task,
        arch,
        training,
        meta["curve"],
        {int(k): v for k, v in meta["evals"].items()},
        states,
        meta["train_seconds"],
        path=target,
    )


@dataclass(frozen=True)
class Job:
    """One training of :func:`train_many`."""

    task: TrainingTask
    arch: Architecture
    training: Training


def _run_job(job: Job, cache_root: str) -> str:
    return str(train_cached(job.task, job.arch, job.training, cache_root, progress=False).path)


def train_many(
    jobs: list[Job],
    cache_root: str | os.PathLike | None = None,
    processes: int = 1,
    progress: bool = True,
) -> list[TrainResult]:
    """:func:`train_cached` for every job, ``processes`` at a time (each on one thread).

    Trainings of tiny models are independent and single-threaded, so on 2 cores two processes
    finish two models in about the time of one. Results come back through the cache (each process
    writes its checkpoints, this one reads them), in the order of ``jobs``; jobs already cached
    are only loaded. ``processes`` 1 trains in this process.
    """
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    root = str(Path(cache_root).expanduser() if cache_root is not None else default_cache_root())
    todo = [job for job in jobs if not is_cached(job, root)]
    if processes > 1 and len(todo) > 1:
        with ProcessPoolExecutor(
            min(processes, len(todo)), mp_context=get_context("spawn")
        ) as pool:
            futures = [pool.submit(_run_job, job, root) for job in todo]
            for future in tqdm(futures, desc="train", disable=not progress):
                future.result()
    else:
        for job in tqdm(todo, desc="train", disable=not progress):
            _run_job(job, root)
    return [train_cached(job.task, job.arch, job.training, root, progress=False) for job in jobs]


def is_cached(job: Job, cache_root: str | os.PathLike | None = None) -> bool:
    root = Path(cache_root).expanduser() if cache_root is not None else default_cache_root()
    return (cache_dir(job.task, job.arch, job.training, root) / "train.json").exists()

"""Small transformers trained on the tasks of interp.synthetic.tasks.forced, cached like the toy model.

The recipe is the toy's (interp.synthetic.toy): Hugging Face GPT-2, attention-only (MLPs zero
and frozen), d_model 64, learned positions started from a small sinusoid, init std 0.06, AdamW
with warm-up and linear decay, one CPU thread; only the depth and width come from the task, and
the loss is cross-entropy on the task's masked targets. Each trained model is kept as a Hugging
Face directory (safetensors, tokenizer, ``task.json`` with the training record) under
``<cache>/tasks-<version>/<task>-seed<seed>`` (the cache folder of :mod:`interp.model.cache`); no pickle is written or read.

The model is built by the general trainer (:func:`interp.synthetic.train.build_model` with the
toy's :data:`~interp.synthetic.toy.ARCH`), bitwise as before, so the cached models stay valid. The
loop stays here: these tasks score a target at each position that need not be the next token,
while :func:`interp.synthetic.train.train` scores next-token prediction.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from interp.model.cache import cache_root
from interp.model.load import LoadedModel
from interp.synthetic.cache import load_dir, read_meta, save_dir
from interp.synthetic.planted import boot, build_tokenizer
from interp.synthetic.tasks.forced import TASKS, ForcedBatch, ForcedTask, Ids
from interp.synthetic.toy import ARCH, BATCH, LR, WEIGHT_DECAY
from interp.synthetic.train import Architecture, build_model, single_thread

TASKS_VERSION = 1  # bump when a task or the recipe changes, so that old caches are not reused
META = "task.json"


@dataclass
class TrainedTask:
    """A model trained on one task, and how well it learned it (on fresh held-out batches)."""

    model: LoadedModel
    task: str
    seed: int
    loss: float  # mean cross-entropy on the task's targets
    accuracy: float  # share of targets predicted right
    train_seconds: float


def architecture(task: ForcedTask) -> Architecture:
    """The toy's architecture at the task's depth and head count."""
    return dataclasses.replace(ARCH, n_layers=task.n_layers, n_heads=task.n_heads)


def build(task: ForcedTask, seed: int) -> tuple[Any, Any]:
    """An untrained attention-only GPT-2 of the task's size, and its tokenizer."""
    tok = build_tokenizer(task.words)
    return build_model(architecture(task), tok, seed).train(), tok


def task_loss(logits: torch.Tensor, batch: ForcedBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean cross-entropy, accuracy) over the masked positions; logits float [batch, pos, vocab]."""
    picked = logits[batch.mask]
    targets = batch.targets[batch.mask]
    return F.cross_entropy(picked, targets), (picked.argmax(-1) == targets).float().mean()


def train(
    task: ForcedTask, seed: int = 0, steps: int | None = None
) -> tuple[Any, Any, dict[str, float]]:
    """Train a model on ``task``; returns (hf model, tokenizer, record)."""
    hf, tok = build(task, seed)
    ids = Ids.of(tok, task.words)
    steps = steps or task.steps
    params = [p for p in hf.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=LR, weight_decay=WEIGHT_DECAY, betas=(0.9, 0.98))
    warmup = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * max(0.1, 1 - s / steps)
    )
    gen = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    with single_thread():
        for _ in range(steps):
            batch = task.make(BATCH, gen, ids, seed)
            batch_loss, _ = task_loss(hf(batch.tokens).logits, batch)
            opt.zero_grad(set_to_none=True)
            batch_loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
        seconds = time.perf_counter() - start
        hf.eval()
        loss, accuracy = evaluate(hf, tok, task, seed)
    return hf, tok, {"loss": loss, "accuracy": accuracy, "train_seconds": seconds, "steps": steps}


@torch.inference_mode()
def evaluate(hf: Any, tok: Any, task: ForcedTask, seed: int, n: int = 256) -> tuple[float, float]:
    """Held-out (loss, accuracy) on fresh batches (a generator the training never used)."""
    batch = task.make(
        n, torch.Generator().manual_seed(10_000 + seed), Ids.of(tok, task.words), seed
    )
    loss, accuracy = task_loss(hf(batch.tokens).logits, batch)
    return loss.item(), accuracy.item()


def cache_dir(task: str, seed: int) -> Path:
    return cache_root() / f"tasks-{TASKS_VERSION}" / f"{task}-seed{seed}"


def trained(task: str, seed: int = 0, path: str | os.PathLike | None = None) -> TrainedTask:
    """The model trained on ``task`` with ``seed``, from its cache dir; trained and saved there if missing."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose from {sorted(TASKS)}")
    target = Path(path).expanduser() if path is not None else cache_dir(task, seed)
    wanted = {"version": TASKS_VERSION, "task": task, "seed": seed}
    meta = read_meta(target, META, wanted)
    if meta:
        hf, tok = load_dir(target, architecture(TASKS[task])), build_tokenizer(TASKS[task].words)
    else:
        hf, tok, record = train(TASKS[task], seed)
        meta = save_dir(hf, tok, wanted, record, target, META)
    return TrainedTask(
        boot(hf, tok, f"{task}-seed{seed}"),
        task,
        seed,
        meta["loss"],
        meta["accuracy"],
        meta["train_seconds"],
    )

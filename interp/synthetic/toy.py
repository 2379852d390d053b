"""A toy attention-only transformer that the toolkit trains itself, in which induction heads emerge.

Ground truth of a different kind from :mod:`interp.synthetic.planted`: nobody sets these weights, yet a
2-layer attention-only model trained to predict random tokens that contain a repeat learns the
classic two-head circuit (Olsson et al., 2022): a layer-0 *previous-token* head copies each
token's predecessor into the residual stream, and a layer-1 *induction* head matches the current
token against it, attends to the token that followed the earlier copy and predicts it. Random
tokens cannot be predicted (their loss stays near ``log(128)`` = 4.85 nats); repeated ones can,
once the circuit has formed (a sudden drop after ~500 steps; see ``ToyResult.curve``).

Recipe (each choice was needed for the circuit to form within ~3 minutes on 2 CPU cores):

- model: Hugging Face GPT-2, 2 layers x 4 heads, d_model 64, learned positions started from a
  small sinusoid (offset q-1 is then one linear map away), untied unembedding, MLPs zero and
  frozen (attention-only; TransformerBridge wraps it like any GPT-2);
- init std 0.06 instead of GPT-2's 0.02: the plateau before the circuit forms shrinks from
  ~2000 steps to ~500;
- data (:func:`copy_batch`): the copy starts at a random place and copies from a random distance.
  With the fixed probe layout ``[BOS] r r`` the model instead finds the source by position and
  layer 0 never grows a previous-token head.

Training runs on :func:`interp.synthetic.train.train` with :class:`CopyTask` (the data above) and
:data:`ARCH` (the model above); this module adds the probe-layout evaluation and its own cache.

The vocabulary is 128 numbered words ``t0 .. t127`` behind the word-level tokenizer of
:func:`interp.synthetic.planted.build_tokenizer` (which prepends ``<bos>``), so
:meth:`interp.probes.align.Aligner.repeated` draws its probes from exactly the training pool.
The final losses are measured on held-out probes of that layout, ``[BOS] r r`` with 24 tokens in r.

:func:`toy_cached` keeps the trained weights as a Hugging Face directory (``config.json``,
``model.safetensors``, tokenizer files and ``toy.json`` with the training curve) under
``<cache>/toy-<version>`` (the cache folder of :mod:`interp.model.cache`); that directory also loads with ``interp.model.load.load_model``.
No pickle is written or read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from interp.model.cache import cache_root
from interp.model.load import LoadedModel
from interp.synthetic.cache import load_dir, read_meta, save_dir
from interp.synthetic.planted import boot, build_tokenizer
from interp.synthetic.train import (
    Architecture,
    Training,
    TrainingBatch,
    single_thread,
    sinusoids,  # noqa: F401  (part of this module's public names)
    train,
)

TOY_VERSION = 2  # bump when the recipe below changes, so that old caches are not reused
VOCAB = tuple(f"t{i}" for i in range(128))
N_CTX = 72  # 1 + 2 * 32 tokens for the longest default repeated probe, plus slack
D_MODEL, N_LAYERS, N_HEADS = 64, 2, 4
SEQ_LEN = 64  # training tokens after BOS
START = (16, 48)  # random tokens before the repeat begins, uniform per sequence
MIN_DISTANCE = 4  # the repeat copies from 4 .. start tokens back
BATCH = 32
LR = 3e-3
WEIGHT_DECAY = 0.01
DEFAULT_STEPS = 1500  # the circuit forms at ~450-600 steps (seeds 0, 1); the rest sharpens it
INIT_STD = 0.06  # 3x GPT-2's 0.02 (see the module docstring)
POS_INIT = 0.03  # amplitude of the sinusoidal start of the learned positions
NAME = "toy-attn-only"


@dataclass
class ToyResult:
    """A trained toy model and how its training went."""

    model: LoadedModel
    curve: list[dict[str, float]]  # every log step: step, loss, random, repeated (training batch)
    first_half_loss: float  # held-out loss on the random first half
    repeated_half_loss: float  # held-out loss on the repeated half (its first token excluded)
    steps: int
    seed: int
    train_seconds: float
    info: dict[str, Any] = field(default_factory=dict)


ARCH = Architecture(
    n_layers=N_LAYERS,
    n_heads=N_HEADS,
    d_model=D_MODEL,
    n_ctx=N_CTX,
    attn_only=True,
    init_std=INIT_STD,
    positions="sinusoid",
    pos_init=POS_INIT,
)


class CopyTask:
    """The toy's training task for :func:`interp.synthetic.train.train`: random tokens whose tail
    repeats an earlier stretch (:func:`copy_batch`); every token is scored, and the curve logs the
    ``random`` and ``repeated`` targets apart."""

    name = "toy-copy"
    words = VOCAB
    seq_len = 1 + SEQ_LEN

    def params(self) -> dict[str, Any]:
        return {
            "vocab": len(VOCAB),
            "seq_len": SEQ_LEN,
            "start": START,
            "min_distance": MIN_DISTANCE,
        }

    def batch(self, n: int, gen: torch.Generator, tok: Any) -> TrainingBatch:
        pool = torch.tensor(sorted(set(range(len(tok))) - set(tok.all_special_ids)))
        tokens, copied = copy_batch(n, pool, tok.bos_token_id, gen)
        scored = torch.ones_like(copied)
        scored[:, 0] = False
        return TrainingBatch(tokens, scored, parts={"random": scored & ~copied, "repeated": copied})


def repeated_batch(
    n: int, half: int, pool: torch.Tensor, bos: int, gen: torch.Generator
) -> torch.Tensor:
    """long [n, 1 + 2 * half]: ``[BOS] r r`` with r uniform over ``pool`` (the probe layout)."""
    r = pool[torch.randint(len(pool), (n, half), generator=gen)]
    return torch.cat([torch.full((n, 1), bos, dtype=torch.long), r, r], 1)


def copy_batch(
    n: int, pool: torch.Tensor, bos: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Training data: tokens long [n, 1 + SEQ_LEN] and copied bool [n, 1 + SEQ_LEN].

    Each sequence is ``[BOS]``, ``start`` uniform random tokens, then a repeat that copies the
    sequence from ``distance`` tokens back until the end (``start`` and ``distance`` drawn per
    sequence). ``copied`` marks the repeat's tokens after its first: those an induction head
    can predict. The probe layout ``[BOS] r r`` is the case ``distance == start``. Drawing both
    per sequence matters: with one fixed layout per batch the model finds the source of a copy
    by position alone and layer 0 never grows a previous-token head.
    """
    tokens = pool[torch.randint(len(pool), (n, SEQ_LEN), generator=gen)]
    copied = torch.zeros(n, SEQ_LEN, dtype=torch.bool)
    starts = torch.randint(START[0], START[1] + 1, (n,), generator=gen).tolist()
    for i, start in enumerate(starts):
        distance = int(torch.randint(MIN_DISTANCE, start + 1, (1,), generator=gen))
        # a repeat longer than its distance goes on copying itself: the sequence turns periodic
        source = start - distance + torch.arange(SEQ_LEN - start) % distance
        tokens[i, start:] = tokens[i, source]
        copied[i, start + 1 :] = True
    bos_col = torch.full((n, 1), bos, dtype=torch.long)
    return torch.cat([bos_col, tokens], 1), torch.cat(
        [torch.zeros(n, 1, dtype=torch.bool), copied], 1
    )


def half_losses(
    logits: torch.Tensor, tokens: torch.Tensor, half: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean loss on the first half's tokens, and on the repeated half's tokens after its first.

    The repeat's first token follows a random one and no mechanism can predict it, so it is left
    out; every later one can be copied from the first half.
    """
    loss = F.cross_entropy(
        logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none"
    )  # [batch, pos-1]
    return loss[:, :half].mean(), loss[:, half + 1 :].mean()


def _train(
    steps: int, seed: int, progress: bool
) -> tuple[Any, Any, list[dict[str, float]], dict[str, float]]:
    training = Training(
        steps=steps,
        batch_size=BATCH,
        lr=LR,
        weight_decay=WEIGHT_DECAY,
        warmup=0.05,
        seed=seed,
        log_points=60,
        eval_sequences=0,
    )
    result = train(CopyTask(), ARCH, training, progress)
    curve = [
        {
            "step": r["step"],
            "loss": r["loss"],
            "random": r["loss_random"],
            "repeated": r["loss_repeated"],
        }
        for r in result.curve
    ]
    with single_thread():
        first, rep = evaluate(result.hf, result.tokenizer, seed=seed + 1)
    return (
        result.hf,
        result.tokenizer,
        curve,
        {
            "first_half_loss": first,
            "repeated_half_loss": rep,
            "train_seconds": result.train_seconds,
        },
    )


@torch.inference_mode()
def evaluate(hf: Any, tok: Any, seed: int = 1, n: int = 256, half: int = 24) -> tuple[float, float]:
    """Held-out (first-half, repeated-half) losses of a Hugging Face model on fresh ``[BOS] r r``."""
    pool = torch.tensor(sorted(set(range(len(tok))) - set(tok.all_special_ids)))
    tokens = repeated_batch(n, half, pool, tok.bos_token_id, torch.Generator().manual_seed(seed))
    first, rep = half_losses(hf(tokens).logits, tokens, half)
    return first.item(), rep.item()


def default_cache_dir() -> Path:
    return cache_root() / f"toy-{TOY_VERSION}"


def toy_cached(
    path: str | os.PathLike | None = None,
    steps: int = DEFAULT_STEPS,
    seed: int = 0,
    progress: bool = True,
) -> ToyResult:
    """The trained toy model from ``path`` (default: the cache dir); trained and saved there if missing.

    A cache made with other ``steps`` or ``seed`` (or by another version of the recipe) is
    retrained and replaced. Weights are written as safetensors, atomically (temp dir + rename).
    """
    target = Path(path).expanduser() if path is not None else default_cache_dir()
    wanted = {"version": TOY_VERSION, "steps": steps, "seed": seed}
    meta = read_meta(target, "toy.json", wanted)
    if meta:
        losses = {k: meta[k] for k in ("first_half_loss", "repeated_half_loss", "train_seconds")}
        return _result(
            boot(load_dir(target, ARCH), build_tokenizer(VOCAB), NAME),
            meta["curve"],
            losses,
            steps,
            seed,
            cached=str(target),
        )
    hf, tok, curve, losses = _train(steps, seed, progress)
    save_dir(hf, tok, wanted, {"curve": curve, **losses}, target, "toy.json")
    return _result(boot(hf, tok, NAME), curve, losses, steps, seed, cached=str(target))


def _result(
    model: LoadedModel, curve: list, losses: dict, steps: int, seed: int, **info: Any
) -> ToyResult:
    return ToyResult(
        model=model,
        curve=curve,
        first_half_loss=losses["first_half_loss"],
        repeated_half_loss=losses["repeated_half_loss"],
        steps=steps,
        seed=seed,
        train_seconds=losses["train_seconds"],
        info=info,
    )

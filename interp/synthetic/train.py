"""Train small GPT-2s from scratch on a synthetic *task*, so that the toolkit can study heads it grew itself.

A model here is a Hugging Face GPT-2 (so :func:`interp.synthetic.planted.boot` and
:func:`interp.model.load.load_model` wrap it in a TransformerBridge and every stage runs on it) over a
word-level vocabulary (:func:`interp.synthetic.planted.build_tokenizer`). Two knobs matter for
experiments on attention itself:

- ``attn_only``: every MLP zero and frozen (GELU(0) = 0, no bias), so the model is attention-only;
- ``fixed_concat``: every output projection ``c_proj`` fixed to the identity with zero bias and
  frozen, so a layer's output is the plain concatenation of its heads' outputs: head ``h`` writes
  only residual dimensions ``[h * d_head, (h + 1) * d_head)`` and heads are never mixed before the
  next layer reads them.

A task is any object with this small interface (see :class:`TrainingTask`)::

    name: str                        # folder-safe; part of the cache key
    words: tuple[str, ...]           # the word-level vocabulary (specials are added for you)
    seq_len: int                     # tokens per training sequence, BOS included
    def params(self) -> dict         # JSON-able settings that change the data (cache key)
    def batch(self, n, gen, tok) -> TrainingBatch   # n sequences drawn from torch.Generator gen

:class:`TrainingBatch` holds the tokens, which targets the loss scores, named *parts* of the scored
targets whose loss and accuracy are logged separately (``repeat``, ``agreement``, ...), and
optionally a *foil* per target (the wrong verb form of an agreement): ``foil_acc`` is then the
share of those positions where the model prefers the right form.

Training is deterministic for a given seed on one thread: the initialisation is drawn under
``torch.manual_seed(seed)`` (inside ``fork_rng``, so the caller's RNG is untouched) and the data
from ``torch.Generator().manual_seed(seed)``; held-out evaluation uses its own generator. AdamW
with linear warm-up and linear decay to a tenth, gradient clipping at 1. Checkpoints are kept at
the chosen steps (0 is the initialisation) and evaluated on held-out batches.

:func:`interp.synthetic.cache.train_cached` keeps every checkpoint as a safetensors Hugging Face
directory, and :func:`interp.synthetic.cache.train_many` trains several models in parallel.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from interp.model.load import LoadedModel
from interp.synthetic.planted import boot, build_tokenizer

TRAIN_VERSION = 1  # bump when the training recipe changes, so that old caches are not reused
POSITIONS = ("normal", "sinusoid")


@dataclass
class TrainingBatch:
    """One batch of a task. Shapes: batch, pos (BOS at pos 0)."""

    tokens: torch.Tensor  # long [batch, pos]
    scored: torch.Tensor  # bool [batch, pos]: token pos is a target the loss counts (never pos 0)
    parts: dict[str, torch.Tensor] = field(
        default_factory=dict
    )  # name -> bool [batch, pos], within scored
    foil: torch.Tensor | None = None  # long [batch, pos]: a wrong alternative to the target
    foil_at: torch.Tensor | None = None  # bool [batch, pos]: where ``foil`` is set


class TrainingTask(Protocol):
    """A seeded data generator over a word-level vocabulary (see the module docstring)."""

    name: str
    words: tuple[str, ...]
    seq_len: int

    def params(self) -> dict[str, Any]: ...

    def batch(self, n: int, gen: torch.Generator, tok: Any) -> TrainingBatch: ...


@dataclass(frozen=True)
class Architecture:
    """The GPT-2 to train. ``init_std`` is GPT-2's ``initializer_range``; ``positions`` starts the
    learned position embedding from GPT-2's normal init or from a sinusoid of amplitude
    ``pos_init`` (offset q-1 is then one linear map away, which helps previous-token heads form)."""

    n_layers: int = 2
    n_heads: int = 4
    d_model: int = 64
    n_ctx: int = 72
    attn_only: bool = True
    fixed_concat: bool = False
    d_mlp: int | None = None  # None: 4 * d_model (unused when attn_only)
    init_std: float = 0.02
    positions: str = "normal"
    pos_init: float = 0.03

    def __post_init__(self) -> None:
        if min(self.n_layers, self.n_heads, self.d_model, self.n_ctx) < 1:
            raise ValueError("n_layers, n_heads, d_model and n_ctx must be >= 1")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not a multiple of n_heads {self.n_heads}")
        if self.positions not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}, got {self.positions!r}")
        if not self.init_std > 0:
            raise ValueError("init_std must be > 0")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads


@dataclass(frozen=True)
class Training:
    """How to train. ``checkpoints``: steps whose weights are kept (0: the initialisation); the
    final step is always kept. ``single_thread``: one intra-op thread (matrices this small gain
    nothing from more, and several trainings can then share the cores)."""

    steps: int = 1500
    batch_size: int = 32
    lr: float = 3e-3
    weight_decay: float = 0.01
    warmup: float = 0.05  # share of the steps
    seed: int = 0
    checkpoints: tuple[int, ...] = ()
    single_thread: bool = True
    log_points: int = 60  # about this many rows in the training curve
    eval_sequences: int = 256  # held-out sequences per evaluation

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1:
            raise ValueError("steps and batch_size must be >= 1")
        if any(not 0 <= s <= self.steps for s in self.checkpoints):
            raise ValueError(
                f"checkpoints must lie in [0, steps={self.steps}], got {self.checkpoints}"
            )
        if not 0 <= self.warmup < 1:
            raise ValueError("warmup must be in [0, 1)")

    @property
    def kept(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.checkpoints) | {self.steps}))


@dataclass
class TrainResult:
    """A trained model, its checkpoints and how training went."""

    hf: Any  # the final GPT2LMHeadModel
    tokenizer: Any
    task: TrainingTask
    arch: Architecture
    training: Training
    curve: list[
        dict[str, float]
    ]  # every log step: step, loss, and loss_<part> on the training batch
    evals: dict[int, dict[str, float]]  # checkpoint step -> held-out metrics (see evaluate)
    states: dict[int, dict[str, torch.Tensor]]  # checkpoint step -> state dict
    train_seconds: float
    path: Path | None = None  # the cache directory, when cached

    def model(self, step: int | None = None, name: str | None = None) -> LoadedModel:
        """The checkpoint at ``step`` (None: final) as a LoadedModel (a TransformerBridge)."""
        step = self.training.steps if step is None else step
        if step not in self.states:
            raise ValueError(f"no checkpoint at step {step}; kept: {sorted(self.states)}")
        hf = copy.deepcopy(self.hf)
        hf.load_state_dict(self.states[step])
        return boot(
            hf.eval(), self.tokenizer, name or f"{self.task.name}-s{self.training.seed}-step{step}"
        )

    def checkpoint_dir(self, step: int | None = None) -> Path:
        """The Hugging Face directory of a cached checkpoint (``interp.model.load.load_model`` reads it)."""
        if self.path is None:
            raise ValueError("this result was not cached: use interp.synthetic.cache.train_cached")
        return self.path / f"step-{self.training.steps if step is None else step}"


def gpt2_config(arch: Architecture, tok: Any) -> Any:
    from transformers import GPT2Config

    return GPT2Config(
        vocab_size=len(tok),
        n_positions=arch.n_ctx,
        n_embd=arch.d_model,
        n_layer=arch.n_layers,
        n_head=arch.n_heads,
        n_inner=4 if arch.attn_only else (arch.d_mlp or 4 * arch.d_model),
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        attn_implementation="eager",  # type: ignore[call-arg]  # taken by PretrainedConfig
        tie_word_embeddings=False,
        initializer_range=arch.init_std,
    )


def sinusoids(n_ctx: int, d_model: int) -> torch.Tensor:
    """float [n_ctx, d_model]: the sine / cosine position code of Vaswani et al. (2017)."""
    pos = torch.arange(n_ctx, dtype=torch.float32)[:, None]
    freq = torch.exp(
        -math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float32) / d_model
    )
    out = torch.zeros(n_ctx, d_model)
    out[:, 0::2], out[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    return out


def constrain(hf: Any, arch: Architecture) -> Any:
    """Apply the architecture's frozen parts: zero MLPs (attn_only), identity c_proj (fixed_concat)."""
    for block in hf.transformer.h:
        frozen = []
        if arch.attn_only:
            for param in block.mlp.parameters():
                param.data.zero_()
            frozen += list(block.mlp.parameters())
        if arch.fixed_concat:
            proj = (
                block.attn.c_proj
            )  # Conv1D [d_model, d_model]: z @ W + b, z the heads concatenated
            proj.weight.data.copy_(torch.eye(arch.d_model))
            proj.bias.data.zero_()
            frozen += [proj.weight, proj.bias]
        for param in frozen:
            param.requires_grad_(False)
    return hf


def build_model(arch: Architecture, tok: Any, seed: int) -> Any:
    """A freshly initialised GPT2LMHeadModel for ``arch`` (initialisation seeded, caller's RNG untouched)."""
    from transformers import GPT2LMHeadModel

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        hf = constrain(GPT2LMHeadModel(gpt2_config(arch, tok)), arch)
    if arch.positions == "sinusoid":
        with torch.no_grad():
            hf.transformer.wpe.weight.copy_(sinusoids(arch.n_ctx, arch.d_model) * arch.pos_init)
    return hf


def token_losses(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """float [batch, pos]: the loss of predicting token pos from the prefix; 0 at pos 0 (no prediction)."""
    loss = F.cross_entropy(
        logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none"
    )  # [batch, pos-1]
    return F.pad(loss, (1, 0))


@contextlib.contextmanager
def single_thread(on: bool = True) -> Iterator[None]:
    """One intra-op thread inside the block (when ``on``); on a busy machine, spinning threads made
    each step of a tiny model 10x slower."""
    threads = torch.get_num_threads()
    if on:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@torch.inference_mode()
def evaluate(
    hf: Any, task: TrainingTask, tok: Any, seed: int, n: int = 256, batch_size: int = 64
) -> dict[str, float]:
    """Held-out metrics on ``n`` fresh sequences drawn with ``seed``: ``loss`` (scored targets),
    ``loss_<part>`` and ``acc_<part>`` (argmax = target) per part, and, where the task gives
    foils, ``foil_acc`` (target logit > foil logit) and ``foil_diff`` (their mean difference)."""
    gen = torch.Generator().manual_seed(seed)
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}

    def add(name: str, values: torch.Tensor) -> None:
        sums[name] = sums.get(name, 0.0) + float(values.sum())
        counts[name] = counts.get(name, 0.0) + values.numel()

    was_training = hf.training
    hf.eval()
    for start in range(0, n, batch_size):
        b = task.batch(min(batch_size, n - start), gen, tok)
        logits = hf(b.tokens).logits
        loss = token_losses(logits, b.tokens)
        # logits[:, i] predicts token i + 1: shift so that index pos is the prediction of token pos
        predicted = F.pad(logits[:, :-1].argmax(-1), (1, 0)) == b.tokens
        add("loss", loss[b.scored])
        for name, mask in b.parts.items():
            add(f"loss_{name}", loss[mask])
            add(f"acc_{name}", predicted[mask].float())
        if b.foil is not None and b.foil_at is not None:
            shifted = logits[:, :-1]
            batch, pos = b.foil_at[:, 1:].nonzero(as_tuple=True)
            diff = (
                shifted[batch, pos, b.tokens[batch, pos + 1]]
                - shifted[batch, pos, b.foil[batch, pos + 1]]
            )
            add("foil_diff", diff)
            add("foil_acc", (diff > 0).float())
    hf.train(was_training)
    return {k: sums[k] / counts[k] if counts[k] else float("nan") for k in sums}


def train(
    task: TrainingTask,
    arch: Architecture = Architecture(),
    training: Training = Training(),
    progress: bool = True,
) -> TrainResult:
    """Train ``arch`` on ``task`` (see the module docstring for the recipe)."""
    tok = build_tokenizer(task.words)
    if task.seq_len > arch.n_ctx:
        raise ValueError(f"task sequences ({task.seq_len} tokens) exceed n_ctx {arch.n_ctx}")
    hf = build_model(arch, tok, training.seed).train()
    params = [p for p in hf.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(
        params, lr=training.lr, weight_decay=training.weight_decay, betas=(0.9, 0.98)
    )
    warmup = max(1, int(training.steps * training.warmup))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * max(0.1, 1 - s / training.steps)
    )
    gen = torch.Generator().manual_seed(training.seed)
    curve: list[dict[str, float]] = []
    states: dict[int, dict[str, torch.Tensor]] = {}
    evals: dict[int, dict[str, float]] = {}
    log_every = max(1, training.steps // training.log_points)
    eval_seed = training.seed + 1_000_003  # held out: never the training stream

    def keep(step: int) -> None:
        states[step] = {k: v.detach().clone() for k, v in hf.state_dict().items()}
        evals[step] = evaluate(hf, task, tok, eval_seed, training.eval_sequences)

    seconds = 0.0
    with single_thread(training.single_thread):
        for step in tqdm(range(training.steps), desc=f"train {task.name}", disable=not progress):
            if step in training.kept:
                keep(step)
            start = time.perf_counter()
            b = task.batch(training.batch_size, gen, tok)
            per_token = token_losses(hf(b.tokens).logits, b.tokens)
            loss = per_token[b.scored].mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            seconds += time.perf_counter() - start
            if step % log_every == 0 or step == training.steps - 1:
                row = {"step": step, "loss": loss.item()}
                with torch.no_grad():
                    row.update(
                        {
                            f"loss_{name}": per_token[mask].mean().item()
                            for name, mask in b.parts.items()
                        }
                    )
                curve.append(row)
        hf.eval()
        keep(training.steps)
    return TrainResult(hf, tok, task, arch, training, curve, evals, states, seconds)

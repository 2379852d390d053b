"""Peak memory of a stage, estimated before it runs, and the batch that fits.

A transformer's working memory is dominated by two kinds of tensors, whose sizes follow from
the model's shape and the batch:

- attention: ``[batch, head, q, k]`` scores and patterns, ``b * h * T^2`` values per layer.
  Collection reads every pattern (the features), so the attention phase of a layer holds
  several of them at once;
- per-token activations: ``[batch, pos, d_model]`` residuals and ``[batch, pos, d_mlp]`` MLP
  hiddens (three of them in a gated MLP), ``b * T`` rows each;
- and, where logits are read, ``rows x vocabulary``: a 262k vocabulary makes 1 GiB of float32
  logits out of 1,000 rows.

Only one layer's tensors are alive at a time (inference mode frees them as the pass moves on),
so a batch's peak is the larger of its attention phase and its MLP phase. The coefficients
below count how many tensors of each kind are alive at the peak; they were measured, not
guessed: ``benchmarks/memory_fit.py`` runs the collection pass on batches of 1,024 to 4,096
tokens of widths 16 to 512 on five models (GQA Llama, GPT-2, BERT, MiniLM, SmolLM2) and fits
them; every measured batch peak lies within 14% of this estimate there. Whole stages
(``benchmarks/memory_estimate.py``, RESULTS.md): collect within 14% on three models, ablate
within 30% (its quick mode on SmolLM2 is overestimated 1.6x); tests/unit/test_memory.py checks
30% on two models. They are measured in float32; in bfloat16/float16 the model's own
tensors halve while the features still work in float32, so the estimate is then an upper bound.

:func:`collect_budget` turns the estimate into a batch: the configured token budget if its
largest batch fits into the memory this process may still use, else the largest budget that
fits (with a warning), else a MemoryBudgetError that names the flag to change. Where no budget
was configured and the model is on an accelerator, the budget also *grows* (:func:`grown`):
doubled while the batches still change and their peak still fits, so that a GPU's free memory
sets the batch, not a token count chosen for a CPU.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp.errors import InterpWarning, MemoryBudgetError

FLOAT32 = 4
# [batch, head, q, k] float32 tensors alive at a layer's attention peak during collection.
ATTENTION_CAUSAL, ATTENTION_ENCODER = 8.6, 6.4
TOKEN_RESIDUALS = 6.4  # [batch, pos, d_model] tensors alive beside them
MLP_GATED, MLP_PLAIN = 3.9, 2.5  # [batch, pos, d_mlp + d_model] tensors at the MLP peak
COLLECT_FIXED = (
    6 * 2**20
)  # the probe corpus as Python objects, bootstrap weights, kernel workspaces
# Share of the available memory a stage may plan to fill: glibc keeps freed blocks for reuse,
# so the process' resident size runs 1.5-1.9x above the live tensors (measured, see the benchmark).
HEADROOM = 0.5


@dataclass(frozen=True)
class Shape:
    """What the estimate needs to know about a model."""

    n_layers: int
    n_heads: int
    d_model: int
    d_mlp: int
    d_vocab: int
    causal: bool
    gated_mlp: bool

    @classmethod
    def of(cls, model: Any) -> Shape:
        cfg = model.bridge.cfg
        return cls(
            n_layers=model.n_layers,
            n_heads=model.n_heads,
            d_model=int(cfg.d_model),
            d_mlp=int(getattr(cfg, "d_mlp", None) or 4 * cfg.d_model),
            d_vocab=int(cfg.d_vocab),
            causal=bool(model.causal),
            gated_mlp=bool(getattr(cfg, "gated_mlp", False)),
        )


def collect_batch_peak(shape: Shape, batch: int, width: int) -> float:
    """Bytes one collection batch of ``batch`` sequences padded to ``width`` tokens adds at its peak."""
    tokens = batch * width
    attention = (
        (ATTENTION_CAUSAL if shape.causal else ATTENTION_ENCODER)
        * batch
        * shape.n_heads
        * width**2
        * FLOAT32
    )
    attention += TOKEN_RESIDUALS * tokens * shape.d_model * FLOAT32
    mlp = (
        (MLP_GATED if shape.gated_mlp else MLP_PLAIN)
        * tokens
        * (shape.d_mlp + shape.d_model)
        * FLOAT32
    )
    return max(attention, mlp)


def accumulator_bytes(shape: Shape, n_features: int, n_bootstrap: int) -> float:
    """The feature sums kept across batches: float64 [replicate, layer, feature, head], twice
    (the running sums and, at the end, the replicate means)."""
    return 2 * 8 * (n_bootstrap + 1) * shape.n_layers * n_features * shape.n_heads


def collect_peak(
    shape: Shape, groups: Sequence[tuple[int, int]], n_features: int, n_bootstrap: int
) -> float:
    """Bytes the collect stage adds at its peak, for batches given as (sequences, width)."""
    largest = max((collect_batch_peak(shape, b, w) for b, w in groups), default=0.0)
    return largest + accumulator_bytes(shape, n_features, n_bootstrap) + COLLECT_FIXED


# The ablate stage (measured the same way on the same models, default and quick settings):
FORWARD_ATTENTION = (
    3.0  # [batch, head, q, k] float32 tensors alive in a plain forward (no features)
)
# Attribution's forward with gradients and its backward, per float32 element (benchmarks/memory_fit.py,
# fitted on the peaks of at least 64 MiB: SmolLM2 and MiniLM): [layer, token, d_model + d_mlp]
# activations kept for the backward (per gated / plain MLP), [layer, batch, head, q, k] attention
# probabilities, and [scored row, d_vocab] logits (log-softmax, its gradient and their copies)
BACKWARD_GATED, BACKWARD_PLAIN = 5.8, 3.4
BACKWARD_ATTENTION = 1.0
BACKWARD_LOGITS = 3.9
# Bootstrap sums of 1,000 resamples, both corpora, kernel workspaces: set from the smallest model
# measured (tiny Llama), whose peak is mostly this term.
ABLATE_FIXED = 15 * 2**20


def forward_peak(shape: Shape, batch: int, width: int) -> float:
    """Bytes a plain forward of ``batch`` sequences of ``width`` tokens adds at its peak (one layer
    at a time: the larger of its attention and its MLP phase)."""
    tokens = batch * width
    attention = (
        FORWARD_ATTENTION * batch * shape.n_heads * width**2 * FLOAT32
        + TOKEN_RESIDUALS * tokens * shape.d_model * FLOAT32
    )
    mlp = (
        (MLP_GATED if shape.gated_mlp else MLP_PLAIN)
        * tokens
        * (shape.d_model + shape.d_mlp)
        * FLOAT32
    )
    return max(attention, mlp)


def ablate_batch_peak(shape: Shape, batch: int, width: int, rows: int, replicas: int) -> float:
    """Bytes one evaluation batch adds at the ablate stage's peak: the larger of attribution
    (a backward through every layer, logits of the scored rows) and the sweep (``replicas``
    stacked copies, each with its scored rows' logits, beside the clean pass' cached residuals).
    An encoder reads no logits (its metrics use the final hidden state)."""
    tokens = batch * width
    # A causal LM's readout: its scored rows' logits, and one vocabulary x d_model copy of the
    # unembedding (measured on SmolLM2, where it is 108 MiB); an encoder reads no logits.
    logits = rows * shape.d_vocab * FLOAT32 if shape.causal else 0.0
    unembed = shape.d_vocab * shape.d_model * FLOAT32 if shape.causal else 0.0
    per_token = BACKWARD_GATED if shape.gated_mlp else BACKWARD_PLAIN
    backward = (
        per_token * shape.n_layers * tokens * (shape.d_model + shape.d_mlp) * FLOAT32
        + BACKWARD_ATTENTION * shape.n_layers * batch * shape.n_heads * width**2 * FLOAT32
        + BACKWARD_LOGITS * logits
    )
    cached = shape.n_layers * tokens * shape.d_model * FLOAT32
    sweep = forward_peak(shape, batch * replicas, width) + replicas * logits + cached + unembed
    return max(backward, sweep)


def ablate_peak(shape: Shape, batches: Sequence[tuple[int, int, int, int]]) -> float:
    """Bytes the ablate stage adds at its peak, for evaluation batches given as (sequences,
    width, scored rows, replicas per pass)."""
    return ABLATE_FIXED + max((ablate_batch_peak(shape, *b) for b in batches), default=0.0)


def check_estimator_terms(
    n_layers: int,
    n_heads: int,
    d_head: int,
    n_elements: int,
    resample: bool,
    device: str = "cpu",
    available: float | None = None,
) -> None:
    """MemoryBudgetError when attribution's per-sequence sums would not fit: it keeps, for every batch
    element, layer and head, the gradient summed over positions (twice with resample) until the
    heads' means are known at the end of the corpus."""
    need = (2 if resample else 1) * n_layers * n_elements * n_heads * d_head * FLOAT32
    room = HEADROOM * (available_bytes(device) if available is None else available)
    if need > room:
        raise MemoryBudgetError(
            f"the estimator's {n_elements} sequences need about {_gib(need)} for their gradient "
            f"sums and only {_gib(room)} of memory is free to use: lower --estimator-positions "
            f"(or free memory)"
        )


MAX_GROWN = 2**20  # tokens: a budget never grows past this, whatever the memory


def grown(budget: int, batches: Callable[[int], list], fits: Callable[[list], bool]) -> int:
    """``budget`` doubled while doubling still changes the batches (``batches(budget)``: their
    shapes under a budget; the same shapes mean one batch already holds all) and they still fit."""
    while budget < MAX_GROWN:
        now, bigger = batches(budget), batches(2 * budget)
        if bigger == now or not fits(bigger):
            break
        budget *= 2
    return budget


def ablate_budget(
    shape: Shape,
    budget: int,
    batches: Callable[[int], list[tuple[int, int, int, int]]],
    device: str = "cpu",
    available: float | None = None,
    grow: bool = False,
) -> int:
    """The padded tokens per forward to ablate with: ``budget`` if it fits (grown to the memory
    with ``grow``, see :func:`grown`), else the largest halving of it that does (with a
    warning), else a MemoryBudgetError naming --dtype."""
    room = HEADROOM * (available_bytes(device) if available is None else available)
    need = ablate_peak(shape, batches(budget))
    if need <= room:
        return grown(budget, batches, lambda b: ablate_peak(shape, b) <= room) if grow else budget
    smaller = budget
    while smaller > 16:
        smaller //= 2
        if ablate_peak(shape, batches(smaller)) <= room:
            warnings.warn(
                f"ablate: passes of {budget} tokens would need {_gib(need)} and {_gib(room)} is free "
                f"to use; using {smaller} tokens per pass (--max-tokens-per-batch)",
                InterpWarning,
                stacklevel=2,
            )
            return smaller
    raise MemoryBudgetError(
        f"ablate needs about {_gib(ablate_peak(shape, batches(smaller)))} even in passes of "
        f"{smaller} tokens and only {_gib(room)} of memory is free to use: use --dtype bfloat16 "
        f"(or free memory)"
    )


def available_bytes(device: str = "cpu") -> float:
    """Memory this process may still fill: free GPU memory, or on a CPU the smaller of the
    kernel's MemAvailable and what the cgroup limit leaves."""
    if device.startswith("cuda"):
        import torch

        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return float(free)
    found = [v for v in (_meminfo_available(), _cgroup_available()) if v is not None]
    return float(min(found)) if found else float("inf")


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_available() -> int | None:
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = Path("/sys/fs/cgroup/memory.current").read_text().strip()
    except OSError:
        return None
    return None if limit == "max" else int(limit) - int(used)


def collect_budget(
    shape: Shape,
    lengths: Sequence[int],
    budget: int,
    n_features: int,
    n_bootstrap: int,
    group: Callable[[int], list[tuple[int, int]]],
    device: str = "cpu",
    available: float | None = None,
    grow: bool = False,
) -> int:
    """The token budget per batch to collect with: ``budget`` if its batches fit (grown to the
    memory with ``grow``, see :func:`grown`), else the largest power-of-two fraction of it that
    does (with a warning); a MemoryBudgetError naming --max-seq-len when not even the longest
    probe fits alone. ``group(budget)`` gives the (sequences, width) of each batch under a budget."""
    room = HEADROOM * (available_bytes(device) if available is None else available)
    need = collect_peak(shape, group(budget), n_features, n_bootstrap)
    if need <= room:
        if grow:
            return grown(
                budget, group, lambda b: collect_peak(shape, b, n_features, n_bootstrap) <= room
            )
        return budget
    longest = max(lengths, default=1)
    smaller = budget
    while smaller > longest:
        smaller = max(longest, smaller // 2)
        if collect_peak(shape, group(smaller), n_features, n_bootstrap) <= room:
            warnings.warn(
                f"collect: batches of {budget} tokens would need {_gib(need)} and {_gib(room)} is free "
                f"to use; using {smaller} tokens per batch (--max-tokens-per-batch)",
                InterpWarning,
                stacklevel=2,
            )
            return smaller
    alone = collect_peak(shape, [(1, longest)], n_features, n_bootstrap)
    raise MemoryBudgetError(
        f"collect needs about {_gib(alone)} for its longest probe ({longest} tokens) and only "
        f"{_gib(room)} of memory is free to use: lower --max-seq-len (or free memory)"
    )


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def measure_peak(fn: Callable[[], Any]) -> float:
    """Bytes by which this process' resident size peaked above its size when ``fn`` started
    (Linux: the kernel's high-water mark, reset through /proc/self/clear_refs)."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    before = process_memory()["VmRSS"]
    Path("/proc/self/clear_refs").write_text("5")
    fn()
    return process_memory()["VmHWM"] - before


def process_memory() -> dict[str, float]:
    """Resident and peak resident bytes of this process (Linux), for reports and tests."""
    found: dict[str, float] = {}
    try:
        for line in Path(f"/proc/{os.getpid()}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = float(value.split()[0]) * 1024
    except OSError:
        pass
    return found

# Over 400 lines: the one adapter to TransformerLens; all its hook use is here.
"""The one adapter between interp and TransformerLens' ``TransformerBridge``.

Everything that depends on how TransformerLens names its hook points or runs a bridge lives
here; the stages call the functions below and never touch a bridge's hooks or blocks
themselves. What the toolkit relies on, each pinned by a test in tests/unit/test_lens.py:

- **Facts** (:func:`facts`): layers, heads, key-value heads, context and vocabulary sizes read
  from ``bridge.cfg``; whether attention is bidirectional from the wrapped Hugging Face config's
  ``model_type`` or, for a bridge with none (``boot_native``), from ``cfg.attention_dir``; each
  query head's output projection (:func:`output_weights`, ``bridge.W_O``).
- **Sites** (:class:`Tap`): ``blocks.{l}.attn.hook_pattern`` ``[batch, head, q, k]``,
  ``attn.hook_z`` ``[batch, pos, head, d_head]`` with one slice per *query* head (grouped-query
  models included), ``attn.hook_v`` ``[batch, pos, kv_head, d_head]``, ``hook_resid_pre`` and
  ``hook_out`` ``[batch, pos, d_model]``; a tensor a hook returns is what the model goes on with.
- **Streaming patterns** (:func:`run_patterns`): each layer's pattern once, in layer order.
- **Readouts** (:class:`Rows`, :class:`FinalHidden`): a hook on ``unembed.hook_in`` may return
  fewer rows, and the model's own head (final softcapping included) then runs on those alone,
  or on none: the pattern pass and an encoder's readout (the last block's ``hook_out``; its
  MLM head is random) compute no logits at all.
- **Restarting at a layer** (:func:`run` with ``start_layer``): the residual cached from a
  full pass's ``hook_resid_pre`` enters block ``l`` and blocks ``0..l-1`` do no work.

Public hook points do all of this but one thing. Both choices below were measured both ways
in one run (benchmarks/lens_tricks.py; benchmarks/RESULTS.md, section ``lens_tricks``):

- *No logits where none are needed* is a public hook returning zero rows. It replaced a hook
  that raised an exception after the last pattern (``stop_at_layer`` stops before a block,
  never after one). The exception also skipped the last block's MLP, but that saved only 3% of
  SmolLM2's pattern pass (and of MiniLM's readout): not worth an exception thrown through the
  bridge, so the public hook stays. Against a plain full forward, which computes every logit,
  the zero rows save 23% on SmolLM2 (its 49k-row unembedding) and half of MiniLM's pass (its
  30k-row MLM head).
- *Skipping the blocks below a restart* is the one trick kept. ``start_at_layer`` still
  executes blocks ``0..l-1`` and throws their output away (and misses the injection on BERT,
  whose block names it does not parse), so :func:`_skipping_blocks` sets an instance ``forward``
  on those blocks for the call: each hands its input on in the container the model's blocks
  return (a bare tensor or a 1-tuple, learnt once per bridge from one real call of block 0),
  and block ``l - 1`` hands over the cached residual. With ``start_at_layer`` alone the exact
  sweep on SmolLM2 takes 1.8x as long (a restart at layer 29: 7.5x). :func:`check_restart`
  proves the shortcut exact on a model before anyone relies on it; where it is not (or it
  raises), callers run full forwards instead.

The adapter was verified with the TransformerLens versions in :data:`VERIFIED`; another 4.x
version gets a one-time warning, another major version a :class:`~interp.errors.ModelError`.
"""

from __future__ import annotations

import contextlib
import functools
import math
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch

from interp.errors import ModelError, first_line

VERIFIED = ("4.3",)  # TransformerLens major.minor versions this adapter's tests passed on
ENCODER_MODEL_TYPES = frozenset(
    {"bert", "roberta", "distilbert", "electra", "xlm-roberta", "albert", "mpnet"}
)
SITES = {  # what a Tap names -> the hook point's name inside block l
    "pattern": "attn.hook_pattern",  # [batch, head, q, k]
    "z": "attn.hook_z",  # [batch, pos, head, d_head]: query heads
    "v": "attn.hook_v",  # [batch, pos, kv_head, d_head]: key-value heads
    "resid_pre": "hook_resid_pre",  # [batch, pos, d_model]: entering block l
    "out": "hook_out",  # [batch, pos, d_model]: leaving block l
    # what a head's attention is computed from (the QK fix of interp.ablate.qk_fix reads them)
    "norm_scale": "ln1.hook_scale",  # [batch, pos, 1]: the norm's divisor before attention
    "normalized": "ln1.hook_normalized",  # [batch, pos, d_model]: the residual over that divisor
    "attn_in": "ln1.hook_out",  # [batch, pos, d_model]: what the queries and keys are read from
    "q": "attn.hook_q",  # [batch, pos, head, d_head]: before rotary embedding
    "k": "attn.hook_k",  # [batch, pos, kv_head, d_head]
    "rot_q": "attn.hook_rot_q",  # rotary models: after rotary embedding
    "rot_k": "attn.hook_rot_k",
    "cos": "attn.hook_cos",  # rotary models: [1 or batch, pos, d_head]
    "sin": "attn.hook_sin",
    "scores": "attn.hook_attn_scores",  # [batch, head, q, k]: before the softmax, mask included
}


# --- version ------------------------------------------------------------------------------------


def installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("transformer-lens")
    except PackageNotFoundError:
        raise ModelError(
            "TransformerLens is not installed: pip install 'transformer-lens>=4.3,<5'"
        ) from None


@functools.cache
def check_version(found: str | None = None) -> None:
    """Warn once when TransformerLens is a 4.x version the adapter was not verified with; refuse
    another major version (its bridge API differs)."""
    found = found or installed_version()
    parts = found.split(".")
    if parts[0] != VERIFIED[0].split(".")[0]:
        raise ModelError(
            f"TransformerLens {found} is installed; interp needs 4.x (verified with "
            f"{', '.join(VERIFIED)}): pip install 'transformer-lens>=4.3,<5'"
        )
    if ".".join(parts[:2]) not in VERIFIED:
        warnings.warn(
            f"TransformerLens {found} has not been verified with interp (verified: {', '.join(VERIFIED)}); "
            "run tests/unit/test_lens.py before trusting the results",
            stacklevel=2,
        )


# --- facts --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Facts:
    """What the stages need to know about a bridge's shape."""

    n_layers: int
    n_heads: int  # query heads per layer
    n_kv_heads: int  # key-value heads per layer (fewer than n_heads in grouped-query models)
    d_head: int
    n_ctx: int  # longest sequence the model takes
    d_vocab: int  # input token ids the embedding takes
    d_vocab_out: int  # logits per position
    model_type: str  # the wrapped Hugging Face config's model_type ("" when there is none)
    causal: bool  # False: every position attends to both sides (an encoder)
    name: str  # the name the bridge was built from ("" when unknown)


def facts(bridge: Any) -> Facts:
    """The shape of a bridge, from ``bridge.cfg`` and the wrapped model's config."""
    check_version()
    cfg = bridge.cfg
    hf_config = getattr(getattr(bridge, "original_model", None), "config", None)
    model_type = getattr(hf_config, "model_type", "") or ""
    n_heads = int(cfg.n_heads)
    d_vocab = int(cfg.d_vocab)
    d_vocab_out = int(getattr(cfg, "d_vocab_out", -1) or -1)
    bidirectional = (
        model_type in ENCODER_MODEL_TYPES
        or getattr(cfg, "attention_dir", "causal") == "bidirectional"
    )
    return Facts(
        n_layers=int(cfg.n_layers),
        n_heads=n_heads,
        n_kv_heads=int(getattr(cfg, "n_key_value_heads", None) or n_heads),
        d_head=int(cfg.d_head),
        n_ctx=int(cfg.n_ctx),
        d_vocab=d_vocab,
        d_vocab_out=d_vocab_out if d_vocab_out > 0 else d_vocab,
        model_type=model_type,
        causal=not bidirectional,
        name=str(getattr(cfg, "model_name", "") or ""),
    )


def boot(name: str, device: str, dtype: torch.dtype, **kwargs: Any) -> Any:
    """A bridge over a Hugging Face model (``hf_model=``, ``tokenizer=`` as boot_transformers takes them), in eval mode."""
    from transformer_lens.model_bridge import TransformerBridge

    check_version()
    bridge = TransformerBridge.boot_transformers(name, device=device, dtype=dtype, **kwargs)
    bridge.eval()
    return bridge


def has_patterns(bridge: Any) -> bool:
    """Whether the bridge exposes an attention pattern in its first block (state-space models do not)."""
    return hook_name("pattern", 0) in bridge.hook_dict


def attends_ahead(bridge: Any, ids: Sequence[int]) -> bool | None:
    """Whether any head of block 0 puts attention on a later position of ``ids`` (one sequence):
    True for a bidirectional model, False for a causal one, None when it cannot be told (fewer
    than two ids, or the pass fails)."""
    if len(ids) < 2:
        return None
    seen: list[bool] = []  # per pattern [batch, head, q, k]: any mass above the diagonal
    block_0 = SimpleNamespace(bridge=bridge, n_layers=1, device=first_param(bridge).device)
    tokens = torch.tensor([list(ids)])
    try:
        run_patterns(
            block_0,
            tokens,
            torch.ones_like(tokens),
            lambda _, p: seen.append(bool(p.float().triu(1).sum() > 1e-6)),
        )
    except Exception:  # noqa: BLE001  (an unusual bridge: fall back on what its config says)
        return None
    return seen[0] if len(seen) == 1 else None


def is_bridge(obj: Any) -> bool:
    from transformer_lens.model_bridge import TransformerBridge

    return isinstance(obj, TransformerBridge)


def first_param(bridge: Any) -> torch.Tensor:
    """One parameter of the model: where it lives and in which dtype it computes."""
    return next(bridge.parameters())


def output_weights(bridge: Any) -> torch.Tensor:
    """float ``[layer, head, d_head, d_model]``: each query head's output projection ``W_O``
    (what a head writes into the residual is its ``z`` slice times this), detached."""
    return bridge.W_O.detach().float()


@dataclass(frozen=True)
class QKWeights:
    """Each layer's query and key projections, float and detached: ``W_Q`` ``[layer, head,
    d_model, d_head]``, ``W_K`` ``[layer, kv_head, d_model, d_head]`` (grouped-query models have
    fewer key heads), their biases ``[layer, head | kv_head, d_head]`` (zero where the model has
    none), and ``W_O`` as :func:`output_weights`."""

    W_Q: torch.Tensor
    W_K: torch.Tensor
    b_Q: torch.Tensor
    b_K: torch.Tensor
    W_O: torch.Tensor


def qk_weights(bridge: Any) -> QKWeights:
    """The projections a head's attention scores are made with (see :class:`QKWeights`)."""
    W_Q, W_K = bridge.W_Q.detach().float(), bridge.W_K.detach().float()
    return QKWeights(
        W_Q, W_K, _bias(bridge, "b_Q", W_Q), _bias(bridge, "b_K", W_K), output_weights(bridge)
    )


def _bias(bridge: Any, name: str, weight: torch.Tensor) -> torch.Tensor:
    """A projection's bias, or zeros where the checkpoint has none (the bridge then raises)."""
    try:
        bias = getattr(bridge, name)
    except AttributeError:
        bias = None
    if bias is None:
        return torch.zeros(weight.shape[0], weight.shape[1], weight.shape[3])
    return bias.detach().float().reshape(weight.shape[0], weight.shape[1], weight.shape[3])


def has_site(bridge: Any, site: str, layer: int = 0) -> bool:
    """Whether the bridge has this site in block ``layer`` (rotary sites exist only in rotary models)."""
    return hook_name(site, layer) in bridge.hook_dict


# --- what a pass reads and changes --------------------------------------------------------------


@dataclass(frozen=True)
class Tap:
    """``fn(activation, layer)`` on one site of one layer (``layer=None``: of every layer).

    ``fn`` may return a tensor of the same shape, which replaces the activation, or None.
    """

    site: str
    fn: Callable[[torch.Tensor, int], torch.Tensor | None]
    layer: int | None = None

    def __post_init__(self) -> None:
        if self.site not in SITES:
            raise ValueError(f"unknown site {self.site!r}; choose from {tuple(SITES)}")


@dataclass(frozen=True)
class Rows:
    """Readout: the logits at rows ``(batch[i], pos[i])`` only, ``[row, vocab]``."""

    batch: torch.Tensor  # long [row]
    pos: torch.Tensor  # long [row]


@dataclass(frozen=True)
class FinalHidden:
    """Readout: the last block's output ``[batch, pos, d_model]``; nothing after it runs."""


Readout = Rows | FinalHidden


def hook_name(site: str, layer: int) -> str:
    return f"blocks.{layer}.{SITES[site]}"


def _hooks(taps: Iterable[Tap], n_layers: int) -> list[tuple[str, Callable]]:
    hooks: list[tuple[str, Callable]] = []
    for tap in taps:
        for layer in range(n_layers) if tap.layer is None else (tap.layer,):
            hooks.append((hook_name(tap.site, layer), functools.partial(_call_tap, tap.fn, layer)))
    return hooks


def _call_tap(fn: Callable, layer: int, x: torch.Tensor, hook: Any) -> torch.Tensor | None:
    return fn(x, layer)


def _no_logits(x: torch.Tensor, hook: Any = None) -> torch.Tensor:
    """``unembed.hook_in``: hand the unembedding zero rows ``[batch, 0, d_model]``, so it does no work."""
    return x[:, :0]


def _readout_hooks(readout: Readout, n_layers: int, box: list) -> list[tuple[str, Callable]]:
    def keep(x: torch.Tensor, hook: Any) -> None:
        box.append(x)

    if isinstance(readout, FinalHidden):
        return [(hook_name("out", n_layers - 1), keep), ("unembed.hook_in", _no_logits)]

    def gather_rows(x: torch.Tensor, hook: Any) -> torch.Tensor:
        # [batch, pos, d_model] -> [1, row, d_model]: the model's own head runs on these rows alone.
        return x[readout.batch.to(x.device), readout.pos.to(x.device)].unsqueeze(0)

    return [
        ("unembed.hook_in", gather_rows),
        ("unembed.hook_out", lambda x, hook: keep(x[0], hook)),
    ]


# --- passes -------------------------------------------------------------------------------------


def run_patterns(
    model: Any,
    tokens: torch.Tensor,
    attention_mask: torch.Tensor,
    on_pattern: Callable[[int, torch.Tensor], None],
) -> None:
    """One forward pass, under inference mode, that hands every layer's attention pattern
    ``[batch, head, q, k]`` to ``on_pattern(layer, pattern)`` in layer order; no logits are
    computed (features need attention only). ``model``: a LoadedModel (``bridge``,
    ``n_layers``, ``device``)."""
    hooks = _hooks(
        [Tap("pattern", lambda pattern, layer: on_pattern(layer, pattern))], model.n_layers
    )
    with torch.inference_mode():
        model.bridge.run_with_hooks(
            tokens.to(model.device),
            attention_mask=attention_mask.to(model.device),
            fwd_hooks=hooks + [("unembed.hook_in", _no_logits)],
            return_type=None,
        )


def run(
    model: Any,
    inputs: torch.Tensor,
    attention_mask: torch.Tensor,
    taps: Sequence[Tap],
    readout: Readout,
    start_layer: int = 0,
) -> torch.Tensor:
    """One forward pass with ``taps`` applied; returns the ``readout``.

    ``inputs``: token ids ``[batch, pos]``, or with ``start_layer > 0`` the residual entering
    that block ``[batch, pos, d_model]`` (a full pass's ``resid_pre``); the blocks below it do
    no work and taps on them never fire. Gradients flow when the caller enables them.
    """
    if not 0 <= start_layer < model.n_layers:
        raise ValueError(f"start_layer must be in [0, {model.n_layers}), got {start_layer}")
    bridge = model.bridge
    box: list[torch.Tensor] = []
    hooks = _hooks(taps, model.n_layers) + _readout_hooks(readout, model.n_layers, box)
    skipping = (
        _skipping_blocks(bridge, start_layer, inputs) if start_layer else contextlib.nullcontext()
    )
    with skipping:
        bridge.run_with_hooks(
            inputs,
            attention_mask=attention_mask,
            fwd_hooks=hooks,
            start_at_layer=start_layer or None,
            return_type=None,
        )
    if len(box) != 1:
        raise RuntimeError(
            f"the readout hooks fired {len(box)} times, not once: this bridge's hook points differ"
        )
    return box[0]


# --- restarting at a layer ----------------------------------------------------------------------

# bridge -> how its blocks wrap the hidden states they return (learnt from one real call)
_BLOCK_OUTPUT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _container(output: Any) -> Callable[[torch.Tensor], Any]:
    """How to return hidden states the way a block returned ``output``: bare, or as a 1-tuple
    (TransformerLens-native blocks do; so did Hugging Face layers in older transformers releases)."""
    if isinstance(output, torch.Tensor):
        return lambda h: h
    if isinstance(output, tuple) and len(output) == 1 and isinstance(output[0], torch.Tensor):
        return lambda h: (h,)
    kind = f"a {len(output)}-tuple" if isinstance(output, tuple) else type(output).__name__
    raise NotImplementedError(
        f"a block returns {kind}; skipping blocks only knows a tensor or a 1-tuple"
    )


@contextlib.contextmanager
def _skipping_blocks(bridge: Any, start_layer: int, resid: torch.Tensor) -> Iterator[None]:
    """Make blocks ``0..start_layer-1`` free for one call: start_at_layer discards their output.

    Each hands its input on; block ``start_layer - 1`` hands over ``resid`` itself, so block
    ``start_layer`` receives it even where TransformerLens' own injection misses (it finds a
    block's index by name and fails on BERT's ``bert.encoder.layer.N``). On the first restart
    of a bridge, block 0 runs once for real to show what a block returns.
    """
    blocks = list(bridge.blocks)[:start_layer]

    def make(i: int) -> Callable:
        def forward(*args: Any, **kwargs: Any) -> Any:
            hidden = (
                resid if i == start_layer - 1 else (args[0] if args else kwargs["hidden_states"])
            )
            if bridge not in _BLOCK_OUTPUT:
                _BLOCK_OUTPUT[bridge] = _container(
                    type(blocks[i]).forward(blocks[i], *args, **kwargs)
                )
            return _BLOCK_OUTPUT[bridge](hidden)

        return forward

    for i, block in enumerate(blocks):
        # Into the instance dict directly: the bridge's __setattr__ would forward the name to
        # the wrapped layer, which must stay untouched.
        object.__setattr__(block, "forward", make(i))
    try:
        yield
    finally:
        for block in blocks:
            block.__dict__.pop("forward", None)


def probe_layers(n_layers: int) -> list[int]:
    """The layers a restart is checked at: the first, middle and last one it can start from."""
    return sorted({1, n_layers // 2, n_layers - 1} & set(range(1, n_layers)))


@dataclass(frozen=True)
class RestartCheck:
    """Restarting at cached layers against the full forward on the same batch."""

    error: float  # largest |readout difference| (inf: restarting failed)
    scale: float  # largest |readout| of the full forward
    tolerance: float  # allowed error relative to scale (rounding of the dtype)
    failure: str = ""  # what restarting raised, if it did

    @property
    def exact(self) -> bool:
        return self.error <= self.tolerance * (self.scale or 1.0)

    def problem(self) -> str:
        """What went wrong, to complete "restarting at a cached layer ..."."""
        return (
            f"fails here ({self.failure})"
            if self.failure
            else f"changes the output by {self.error:.3g}"
        )


def check_restart(
    restart: Callable[[int], torch.Tensor], reference: torch.Tensor, layers: Iterable[int]
) -> RestartCheck:
    """Compare ``restart(layer)`` (a pass from that layer's cached residual) with ``reference``
    (the full forward's readout) at each of ``layers``.

    Anything restarting raises counts as a failure, with its first line: this is the check that
    decides whether the shortcut may be used on an architecture it has never seen.
    """
    ref = reference.detach().float()
    scale = float(ref.abs().max()) if ref.numel() else 0.0
    tolerance = 1e-5 if reference.dtype in (torch.float32, torch.float64) else 2e-2
    worst = 0.0
    for layer in layers:
        try:
            out = restart(layer)
        except Exception as exc:  # noqa: BLE001 - any failure means: do not use the shortcut here
            return RestartCheck(math.inf, scale, tolerance, first_line(exc))
        if out.shape != ref.shape:
            return RestartCheck(
                math.inf, scale, tolerance, f"output shape {tuple(out.shape)} != {tuple(ref.shape)}"
            )
        worst = max(worst, float((out.detach().float() - ref).abs().max()) if ref.numel() else 0.0)
    return RestartCheck(worst, scale, tolerance)

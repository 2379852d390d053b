"""Running the model with head ablations: the only place the ablate stage calls the bridge.

Three things make an all-head sweep cheap on a CPU:

- **Layer reuse.** Ablating a head of layer ``l`` leaves everything below ``l`` unchanged, so
  the clean pass caches each layer's ``hook_resid_pre`` once per batch, and every ablated pass
  of a layer-``l`` head restarts from that residual with ``start_at_layer=l``. TransformerLens
  4.3 still *executes* blocks ``0..l-1`` on that path (it swaps the residual in at block ``l``
  and throws their output away), so :func:`_skipping_blocks` makes those blocks free for the
  duration of the call; skipping them halves the cost of a sweep.
  :func:`interp.ablation.sweep.reuse_error` checks the shortcut against the full forward
  before a sweep relies on it.
- **Readout at the needed positions only.** A causal LM's unembedding (49k logits per token
  for SmolLM2) is a fifth of its compute; a hook on ``unembed.hook_in`` keeps only the rows a
  metric reads, so the model's own head (softcapping and all) runs on those rows alone. An
  encoder's random MLM head is never run: the last block's output is taken and the forward
  is stopped there.
- **Replicas.** Several heads can be ablated in one pass by stacking ``k`` copies of the batch,
  copy ``i`` ablating head ``i`` (:class:`Edit.replica`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

from interp.ablation.corpus import EvalBatch
from interp.models import LoadedModel


@dataclass(frozen=True)
class Edit:
    """Replace one query head's ``hook_z`` in one replica of the batch by ``value``.

    ``value`` broadcasts to ``[batch, pos, d_head]``: a 0-d zero, a ``[d_head]`` mean, or a
    ``[batch, pos, d_head]`` resampled output.
    """

    layer: int
    head: int
    value: torch.Tensor
    replica: int = 0


@dataclass
class CleanPass:
    """What the intact model's pass over one batch leaves behind for the ablated passes."""

    readout: torch.Tensor  # causal: logits [row, vocab]; encoder: final hidden [batch, pos, d_model]
    resid_pre: list[torch.Tensor] = field(default_factory=list)  # per layer [batch, pos, d_model]
    z: list[torch.Tensor] = field(default_factory=list)  # per layer [batch, pos, head, d_head]


class _Stop(Exception):
    """Raised by the encoder readout hook: nothing after the last block is needed."""


class Ablator:
    """Runs one LoadedModel on EvalBatches, intact or with Edits, optionally from a cached layer."""

    def __init__(self, model: LoadedModel):
        self.model = model
        self.bridge = model.bridge
        self.n_layers = model.n_layers
        self.device = next(self.bridge.parameters()).device

    # --- public passes -------------------------------------------------------------------

    def clean(self, batch: EvalBatch, keep_resid: bool = False, keep_z: bool = False) -> CleanPass:
        """The intact model's readout, with each layer's resid_pre and/or z kept when asked."""
        out = CleanPass(readout=torch.empty(0))
        hooks: list[tuple[Any, Callable]] = []
        if keep_resid:
            out.resid_pre = [None] * self.n_layers  # type: ignore[list-item]
            hooks.append((lambda n: n.endswith(".hook_resid_pre"), _keep(out.resid_pre)))
        if keep_z:
            out.z = [None] * self.n_layers  # type: ignore[list-item]
            hooks.append((lambda n: n.endswith("attn.hook_z"), _keep(out.z)))
        with torch.inference_mode():
            out.readout = self._forward(batch, hooks, replicas=1)
        return out

    def run(self, batch: EvalBatch, edits: list[Edit], replicas: int = 1,
            start_layer: int = 0, resid: torch.Tensor | None = None) -> torch.Tensor:
        """Readout with ``edits`` applied; ``[replica, ...]`` leading dim when ``replicas > 1``.

        With ``start_layer > 0``, ``resid`` (the clean ``hook_resid_pre`` of that layer, one
        copy) is the input and blocks below are skipped; no edit may sit below ``start_layer``.
        """
        if any(e.layer < start_layer for e in edits):
            raise ValueError("an edit below start_layer would be skipped")
        hooks = [(f"blocks.{layer}.attn.hook_z", _edit_hook(group, replicas))
                 for layer, group in _by_layer(edits).items()]
        with torch.inference_mode():
            if start_layer == 0:
                out = self._forward(batch, hooks, replicas)
            else:
                if resid is None:
                    raise ValueError("start_layer > 0 needs the cached resid_pre of that layer")
                out = self._forward(batch, hooks, replicas, resid=resid, start_layer=start_layer)
        return out.unflatten(0, (replicas, -1)) if replicas > 1 else out

    def run_with_grad(self, batch: EvalBatch) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Intact readout with autograd on, and every layer's hook_z as graph tensors.

        The residual entering block 0 is made a leaf that requires grad, so the graph exists
        even when the caller froze the parameters; nothing is detached, so the gradient with
        respect to a layer's z includes every path through later layers.
        """
        zs: list[torch.Tensor] = [None] * self.n_layers  # type: ignore[list-item]

        def make_leaf(x: torch.Tensor, hook: Any) -> torch.Tensor:
            return x.detach().requires_grad_(True)

        def keep_z(z: torch.Tensor, hook: Any) -> torch.Tensor:
            # The hook sees a reshaped view; only a tensor it *returns* flows on into the output
            # projection, so return (and keep) a copy that the graph really uses.
            z = z.clone()
            zs[int(hook.name.split(".")[1])] = z
            return z

        hooks = [("blocks.0.hook_resid_pre", make_leaf), (lambda n: n.endswith("attn.hook_z"), keep_z)]
        with torch.enable_grad():
            readout = self._forward(batch, hooks, replicas=1)
        return readout, zs

    # --- the one forward -----------------------------------------------------------------

    def _forward(self, batch: EvalBatch, hooks: list, replicas: int, resid: torch.Tensor | None = None,
                 start_layer: int | None = None) -> torch.Tensor:
        mask = batch.attention_mask.to(self.device)
        if resid is not None:
            inputs = resid.repeat(replicas, 1, 1) if replicas > 1 else resid
        else:
            inputs = batch.tokens.to(self.device)
            inputs = inputs.repeat(replicas, 1) if replicas > 1 else inputs
        mask = mask.repeat(replicas, 1) if replicas > 1 else mask
        box: list[torch.Tensor] = []
        hooks = hooks + self._readout_hooks(batch, replicas, box)
        skipping = _skipping_blocks(self.bridge, start_layer, inputs) if start_layer else contextlib.nullcontext()
        try:
            with skipping:
                self.bridge.run_with_hooks(inputs, attention_mask=mask, fwd_hooks=hooks,
                                           start_at_layer=start_layer, return_type=None)
        except _Stop:
            pass
        return box[0]

    def _readout_hooks(self, batch: EvalBatch, replicas: int, box: list) -> list[tuple[str, Callable]]:
        if not self.model.causal:
            def stop_after_last(x: torch.Tensor, hook: Any) -> None:
                box.append(x)
                raise _Stop

            return [(f"blocks.{self.n_layers - 1}.hook_out", stop_after_last)]

        n = batch.tokens.shape[0]
        offsets = (torch.arange(replicas) * n).repeat_interleave(len(batch.row_batch))
        rows_b = (batch.row_batch.repeat(replicas) + offsets).to(self.device)
        rows_p = batch.row_pos.repeat(replicas).to(self.device)

        def gather_rows(x: torch.Tensor, hook: Any) -> torch.Tensor:
            # Every replica's scored rows, stacked: the model's own head runs on [1, rows, d_model].
            return x[rows_b, rows_p].unsqueeze(0)

        def keep_logits(x: torch.Tensor, hook: Any) -> None:
            box.append(x[0])

        return [("unembed.hook_in", gather_rows), ("unembed.hook_out", keep_logits)]


def _keep(store: list) -> Callable:
    def hook(x: torch.Tensor, hook: Any) -> None:
        store[int(hook.name.split(".")[1])] = x.detach()
    return hook


def _by_layer(edits: list[Edit]) -> dict[int, list[Edit]]:
    out: dict[int, list[Edit]] = {}
    for e in edits:
        out.setdefault(e.layer, []).append(e)
    return out


def _edit_hook(edits: list[Edit], replicas: int) -> Callable:
    def hook(z: torch.Tensor, hook: Any) -> torch.Tensor:
        z = z.clone()  # never write into a tensor the bridge may still hold
        view = z.unflatten(0, (replicas, -1))  # [replica, batch, pos, head, d_head], shares z's memory
        for e in edits:
            view[e.replica, :, :, e.head] = e.value.to(z.dtype)
        return z
    return hook


@contextlib.contextmanager
def _skipping_blocks(bridge: Any, start_layer: int, resid: torch.Tensor) -> Iterator[None]:
    """Make blocks ``0..start_layer-1`` free: start_at_layer discards what they compute.

    Blocks below the last pass their input through; the last returns ``resid`` itself, so
    block ``start_layer`` receives it even where TransformerLens' own injection misses (it
    finds a block's index by name and fails on BERT's ``bert.encoder.layer.N``). HF layers
    take the hidden states first and return a bare tensor in the installed transformers;
    :func:`interp.ablation.sweep.reuse_error` proves the shortcut exact before a sweep uses it.
    """

    def passthrough(*args: Any, **kwargs: Any) -> torch.Tensor:
        return args[0] if args else kwargs["hidden_states"]

    def hand_over(*args: Any, **kwargs: Any) -> torch.Tensor:
        return resid

    blocks = list(bridge.blocks)[:start_layer]
    for i, block in enumerate(blocks):
        # Into the instance dict directly: the bridge's __setattr__ would forward the name to
        # the wrapped HF layer, which must stay untouched.
        object.__setattr__(block, "forward", hand_over if i == start_layer - 1 else passthrough)
    try:
        yield
    finally:
        for block in blocks:
            block.__dict__.pop("forward", None)

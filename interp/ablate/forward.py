"""Running the model with head ablations: the only place the ablate stage runs the model.

The passes themselves go through :mod:`interp.model.lens` (hook names, readouts, restarting at a
layer); this module decides what each pass does. Three things make an all-head sweep cheap on
a CPU:

- **Layer reuse.** Ablating a head of layer ``l`` leaves everything below ``l`` unchanged, so
  the clean pass caches each layer's ``resid_pre`` once per batch, and every ablated pass of a
  layer-``l`` head restarts from that residual, the blocks below doing no work (TransformerLens'
  own ``start_at_layer`` runs them: the sweep would take 1.8x as long, see :mod:`interp.model.lens`). Whether that is exact on the model is checked once, on
  the first batch (:meth:`Ablator.check_reuse`) or on the first restart, which is also run in
  full and compared; where it is not (or restarting fails), every pass runs in full, with a
  warning. A 1-layer model never restarts.
- **Readout at the needed positions only.** A causal LM's unembedding (49k logits per token
  for SmolLM2) is a fifth of its compute; only the rows a metric reads are unembedded, by the
  model's own head (softcapping and all). An encoder's random MLM head computes nothing: the
  readout is the last block's output.
- **Replicas.** Several heads can be ablated in one pass by stacking ``k`` copies of the batch,
  copy ``i`` ablating head ``i`` (:class:`Edit.replica`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from interp.ablate.batches import EvalBatch
from interp.model import lens
from interp.model.load import LoadedModel


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

    readout: (
        torch.Tensor
    )  # causal: logits [row, vocab]; encoder: final hidden [batch, pos, d_model]
    resid_pre: list[torch.Tensor] = field(default_factory=list)  # per layer [batch, pos, d_model]
    z: list[torch.Tensor] = field(default_factory=list)  # per layer [batch, pos, head, d_head]
    sink_v: list[torch.Tensor] = field(
        default_factory=list
    )  # per layer [batch, head, d_head]: value at position 0


@dataclass
class GradPass:
    """An intact pass with autograd on (:meth:`Ablator.run_for_estimates`): graph tensors to
    differentiate against, and each layer's attention inputs for the QK fix (detached)."""

    readout: torch.Tensor
    z: list[torch.Tensor]  # per layer [batch, pos, head, d_head]
    pattern: list[torch.Tensor] = field(default_factory=list)  # per layer [batch, head, q, k]
    resid: list[torch.Tensor] = field(
        default_factory=list
    )  # entering each block, then leaving the last: [batch, pos, d_model]
    inputs: list[dict[str, torch.Tensor]] = field(default_factory=list)  # per layer: site -> tensor


class Ablator:
    """Runs one LoadedModel on EvalBatches, intact or with Edits, optionally from a cached layer.

    ``reuse`` says whether restarting from a cached layer is exact on this model: None until
    the first check (:meth:`check_reuse`, or the first restart, which checks itself against a
    full forward); once False, every restart runs the full forward instead, with one warning.
    """

    def __init__(self, model: LoadedModel):
        self.model = model
        self.n_layers = model.n_layers
        self.device = lens.first_param(model.bridge).device
        self.reuse: bool | None = None if model.n_layers > 1 else False

    # --- public passes -------------------------------------------------------------------

    def clean(
        self,
        batch: EvalBatch,
        keep_resid: bool = False,
        keep_z: bool = False,
        keep_sink: bool = False,
    ) -> CleanPass:
        """The intact model's readout, with each layer's resid_pre, z and/or the value vectors at
        the first position (per query head) kept when asked."""
        out = CleanPass(readout=torch.empty(0))
        taps: list[lens.Tap] = []
        if keep_resid:
            out.resid_pre = [None] * self.n_layers  # type: ignore[list-item]  # filled layer by layer
            taps.append(lens.Tap("resid_pre", _keep(out.resid_pre)))
        if keep_z:
            out.z = [None] * self.n_layers  # type: ignore[list-item]  # filled layer by layer
            taps.append(lens.Tap("z", _keep(out.z)))
        if keep_sink:
            out.sink_v = [None] * self.n_layers  # type: ignore[list-item]  # filled layer by layer
            taps.append(lens.Tap("v", _keep_sink(out.sink_v, self.model.n_heads)))
        with torch.inference_mode():
            out.readout = self._forward(batch, taps, replicas=1)
        return out

    def run(
        self,
        batch: EvalBatch,
        edits: list[Edit],
        replicas: int = 1,
        start_layer: int = 0,
        resid: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Readout with ``edits`` applied; ``[replica, ...]`` leading dim when ``replicas > 1``.

        With ``start_layer > 0``, ``resid`` (the clean ``hook_resid_pre`` of that layer, one
        copy) is the input and blocks below are skipped; no edit may sit below ``start_layer``.
        Where restarting is not exact (see ``reuse``) the full forward runs instead.
        """
        if any(e.layer < start_layer for e in edits):
            raise ValueError("an edit below start_layer would be skipped")
        taps = [
            lens.Tap("z", _edit_hook(group, replicas), layer)
            for layer, group in _by_layer(edits).items()
        ]
        with torch.inference_mode():
            if start_layer == 0:
                out = self._forward(batch, taps, replicas)
            else:
                if resid is None:
                    raise ValueError("start_layer > 0 needs the cached resid_pre of that layer")
                out = self._restart(batch, taps, replicas, start_layer, resid)
        return out.unflatten(0, (replicas, -1)) if replicas > 1 else out

    def restart_check(self, batch: EvalBatch, clean: CleanPass) -> lens.RestartCheck:
        """Restarting from ``clean``'s cached resid_pre at the first, middle and last layer,
        against ``clean``'s readout (the shortcut itself, whatever ``reuse`` says)."""
        with torch.inference_mode():
            return lens.check_restart(
                lambda layer: self._forward(batch, [], 1, clean.resid_pre[layer], layer),
                clean.readout,
                lens.probe_layers(self.n_layers),
            )

    def check_reuse(self, batch: EvalBatch, clean: CleanPass) -> bool:
        """Whether restarting is exact here (:meth:`restart_check`): checked once per Ablator,
        with a warning when it is not."""
        if self.reuse is None:
            self._settle(self.restart_check(batch, clean))
        return bool(self.reuse)

    def run_with_grad(
        self, batch: EvalBatch, mix: Callable[[torch.Tensor, int], torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Intact readout with autograd on, and every layer's hook_z as graph tensors.

        The residual entering block 0 is made a leaf that requires grad, so the graph exists
        even when the caller froze the parameters; nothing is detached, so the gradient with
        respect to a layer's z includes every path through later layers. ``mix(z, layer)``, when
        given, replaces each layer's z (``[batch, pos, head, d_head]``) on its way on, and the
        tensors returned are the mixed ones (what integrated gradients differentiates against).
        """
        zs: list[torch.Tensor] = [None] * self.n_layers  # type: ignore[list-item]  # filled layer by layer

        def make_leaf(x: torch.Tensor, layer: int) -> torch.Tensor:
            return x.detach().requires_grad_(True)

        def keep_z(z: torch.Tensor, layer: int) -> torch.Tensor:
            # The hook sees a reshaped view; only a tensor it *returns* flows on into the output
            # projection, so return (and keep) a copy that the graph really uses.
            z = z.clone() if mix is None else mix(z, layer)
            zs[layer] = z
            return z

        taps = [lens.Tap("resid_pre", make_leaf, layer=0), lens.Tap("z", keep_z)]
        with torch.enable_grad():
            readout = self._forward(batch, taps, replicas=1)
        return readout, zs

    def run_for_estimates(
        self, batch: EvalBatch, attention: bool = False, residual: bool = False
    ) -> GradPass:
        """Like :meth:`run_with_grad`, and with ``attention`` every layer's pattern as a graph
        tensor (what the model goes on with: its gradient is the metric's sensitivity to the
        attention) and its attention inputs (:data:`ATTENTION_SITES`, detached, float); with
        ``residual`` the residual entering every block and leaving the last, as graph tensors
        (GradDrop differentiates the metric with respect to them)."""
        n = self.n_layers
        out = GradPass(torch.empty(0), [None] * n)  # type: ignore[list-item]
        out.resid = [None] * (n + 1)  # type: ignore[list-item]

        def enter(x: torch.Tensor, layer: int) -> torch.Tensor | None:
            if layer == 0:  # a leaf, so that the graph exists even with frozen parameters
                x = x.detach().requires_grad_(True)
            out.resid[layer] = x
            return x if layer == 0 else None

        def leave(x: torch.Tensor, layer: int) -> None:
            out.resid[n] = x

        taps = [lens.Tap("resid_pre", enter), lens.Tap("z", _graph_copy(out.z))]
        if residual:
            taps.append(lens.Tap("out", leave, layer=n - 1))
        if attention:
            out.pattern = [None] * n  # type: ignore[list-item]
            out.inputs = [{} for _ in range(n)]
            taps.append(lens.Tap("pattern", _graph_copy(out.pattern)))
            bridge = self.model.bridge
            taps += [
                lens.Tap(site, _keep_input(out.inputs, site))
                for site in ATTENTION_SITES
                if lens.has_site(bridge, site)
            ]
        with torch.enable_grad():
            out.readout = self._forward(batch, taps, replicas=1)
        if not residual:
            out.resid = []
        return out

    # --- the one forward -----------------------------------------------------------------

    def _restart(
        self,
        batch: EvalBatch,
        taps: list[lens.Tap],
        replicas: int,
        start_layer: int,
        resid: torch.Tensor,
    ) -> torch.Tensor:
        """A pass from ``start_layer``'s cached residual; the first one on this model is also
        run in full and compared, and the full pass is used from then on if they differ."""
        if self.reuse is None:
            full = self._forward(batch, taps, replicas)
            self._settle(
                lens.check_restart(
                    lambda layer: self._forward(batch, taps, replicas, resid, layer),
                    full,
                    [start_layer],
                )
            )
            return full
        if not self.reuse:
            return self._forward(batch, taps, replicas)
        return self._forward(batch, taps, replicas, resid, start_layer)

    def _settle(self, check: lens.RestartCheck) -> None:
        self.reuse = check.exact
        if not check.exact:
            warnings.warn(
                f"restarting at a cached layer {check.problem()}: running full forwards instead "
                "(slower, still exact)",
                stacklevel=4,
            )

    def _forward(
        self,
        batch: EvalBatch,
        taps: list[lens.Tap],
        replicas: int,
        resid: torch.Tensor | None = None,
        start_layer: int = 0,
    ) -> torch.Tensor:
        mask = batch.attention_mask.to(self.device)
        if resid is not None:
            inputs = resid.repeat(replicas, 1, 1) if replicas > 1 else resid
        else:
            inputs = batch.tokens.to(self.device)
            inputs = inputs.repeat(replicas, 1) if replicas > 1 else inputs
        mask = mask.repeat(replicas, 1) if replicas > 1 else mask
        return lens.run(self.model, inputs, mask, taps, self._readout(batch, replicas), start_layer)

    def _readout(self, batch: EvalBatch, replicas: int) -> lens.Readout:
        """Causal: every replica's scored rows, stacked; encoder: the last block's output."""
        if not self.model.causal:
            return lens.FinalHidden()
        n = batch.tokens.shape[0]
        offsets = (torch.arange(replicas) * n).repeat_interleave(len(batch.row_batch))
        return lens.Rows(batch.row_batch.repeat(replicas) + offsets, batch.row_pos.repeat(replicas))


# The attention inputs the QK fix reads (interp.ablate.qk_fix.LayerInputs), where the model has them.
ATTENTION_SITES = (
    "resid_pre",
    "norm_scale",
    "normalized",
    "attn_in",
    "q",
    "k",
    "rot_q",
    "rot_k",
    "cos",
    "sin",
    "scores",
)


def _graph_copy(store: list) -> Callable:
    """Keep (and hand on) a copy of the activation: the hook sees a reshaped view, and only a
    tensor it returns is what the model computes with, so its gradient is the metric's."""

    def keep(x: torch.Tensor, layer: int) -> torch.Tensor:
        x = x.clone()
        store[layer] = x
        return x

    return keep


def _keep_input(store: list[dict[str, torch.Tensor]], site: str) -> Callable:
    def keep(x: torch.Tensor, layer: int) -> None:
        store[layer][site] = x.detach().float()

    return keep


def _keep(store: list) -> Callable:
    def keep(x: torch.Tensor, layer: int) -> None:
        store[layer] = x.detach()

    return keep


def _keep_sink(store: list, n_heads: int) -> Callable:
    """Keep the value vectors (site ``v``) at position 0, [batch, pos, kv_head, d_head], as [batch, head, d_head]:
    each query head reads its key-value group's value (grouped-query models share them)."""

    def keep(v: torch.Tensor, layer: int) -> None:
        first = v[:, 0].detach()
        store[layer] = first.repeat_interleave(n_heads // first.shape[1], dim=1)

    return keep


def _by_layer(edits: list[Edit]) -> dict[int, list[Edit]]:
    out: dict[int, list[Edit]] = {}
    for e in edits:
        out.setdefault(e.layer, []).append(e)
    return out


def _edit_hook(edits: list[Edit], replicas: int) -> Callable:
    def edit(z: torch.Tensor, layer: int) -> torch.Tensor:
        z = z.clone()  # never write into a tensor the bridge may still hold
        view = z.unflatten(
            0, (replicas, -1)
        )  # [replica, batch, pos, head, d_head], shares z's memory
        for e in edits:
            view[e.replica, :, :, e.head] = e.value.to(z.dtype)
        return z

    return edit

"""Attribution patching: a first-order estimate of every head's ablation effect at once.

For a metric ``M`` and a head whose output ``z`` (``hook_z`` slice, ``[pos, d_head]``) an
ablation replaces by ``z'``, the estimate is

    M(ablated) - M(intact)  ~=  sum over positions of  dM/dz . (z' - z)

The gradient comes from one forward and one backward pass per batch, for every head of every
layer and for every ablation kind together (only ``z' - z`` differs between kinds). Per
sequence, the pieces are kept as sums so that the ``mean`` kind, whose ``z'`` is only known
after the whole corpus has been seen, costs nothing extra:

    zero:      -sum_p g.z
    mean:      mean . sum_p g  -  sum_p g.z
    resample:  sum_{p with donor} g.z_donor  +  mean . sum_{p without} g  -  sum_p g.z
    sink:      v_0 . sum_p g  -  sum_p g.z       (v_0: the head's value vector at the first position)

Since every sequence belongs to exactly one metric, one backward of the sum of all metrics
gives each sequence's own gradient (batch elements do not interact; ``retrieval_margin``
compares a sentence with the batch's other views, so its per-sequence split is approximate,
its total is not). Metrics whose gradient vanishes at the intact model (``embedding_cosine``,
a distance from the intact output) cannot be estimated to first order and get no rows.
"""

from __future__ import annotations

import functools
import operator
import time
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from interp.ablate.batches import EvalBatch, EvalCorpus
from interp.ablate.catalogue import HAS_GRADIENT
from interp.ablate.forward import Ablator
from interp.ablate.metrics import PerSeq, batch_metrics, metric_sizes
from interp.ablate.stats import SumStore
from interp.ablate.values import MeanAccumulator


@dataclass
class _BatchTerms:
    """Per batch element and head: the sums the estimates above are made of."""

    batch: EvalBatch
    per: dict[str, PerSeq]  # the intact metrics (detached)
    zg: torch.Tensor  # [layer, batch, head]: sum_p g.z
    g: torch.Tensor  # [layer, batch, head, d_head]: sum_p g
    donor_zg: (
        torch.Tensor | None
    )  # [layer, batch, head]: sum over donor-covered p of g.z_donor (resample only)
    g_nodonor: (
        torch.Tensor | None
    )  # [layer, batch, head, d_head]: sum over the other valid p of g (resample only)
    sink_v: (
        torch.Tensor | None
    )  # [layer, batch, head, d_head]: value at the first position (sink kind only)


@dataclass
class AttributionResult:
    store: SumStore  # condition (kind, layer, head) -> intact + estimated change, per sequence
    means: torch.Tensor  # [layer, head, d_head], from the same pass
    seconds_per_batch: float


def attribute(
    ablator: Ablator, corpus: EvalCorpus, kinds: tuple[str, ...], progress: bool = True
) -> AttributionResult:
    """Estimate every head's effect on every gradient-carrying metric, for each ablation kind."""
    acc = MeanAccumulator()
    terms: list[_BatchTerms] = []
    start = time.perf_counter()
    for batch in tqdm(
        corpus.batches, desc="ablate: attribution", unit="batch", disable=not progress
    ):
        terms.append(
            _batch_terms(ablator, batch, acc, sink="sink" in kinds, resample="resample" in kinds)
        )
    seconds = (time.perf_counter() - start) / max(len(corpus.batches), 1)
    means = acc.means()
    store = SumStore(
        {m: n for m, n in metric_sizes(corpus.sizes).items() if HAS_GRADIENT.get(m, True)}
    )  # tasks: yes
    for t in terms:
        store.add_base({m: p for m, p in t.per.items() if m in store})
        estimates = _estimates(t, kinds, means)
        for (kind, layer, head), change in estimates.items():
            store.add(
                (kind, layer, head),
                shifted(t.batch, {m: p for m, p in t.per.items() if m in store}, change),
            )
    return AttributionResult(store, means, seconds)


def _batch_terms(
    ablator: Ablator,
    batch: EvalBatch,
    acc: MeanAccumulator,
    sink: bool = False,
    resample: bool = True,
) -> _BatchTerms:
    """One batch's terms; the resample terms only when asked (kept for every batch until the
    means are known, they would double the memory a large estimator corpus holds)."""
    sink_v = torch.stack(ablator.clean(batch, keep_sink=True).sink_v).float() if sink else None
    readout, zs = ablator.run_with_grad(batch)
    per = batch_metrics(readout, batch)
    total = functools.reduce(
        operator.add, [p.num.sum() for m, p in per.items() if HAS_GRADIENT.get(m, True)]
    )
    grads = torch.autograd.grad(total, zs)
    with torch.no_grad():
        z = torch.stack([t.detach() for t in zs]).float()  # [layer, batch, pos, head, d_head]
        g = torch.stack(grads).float()
        valid = batch.valid.to(z.device)[None, :, :, None, None]
        acc.add(list(z), batch.valid)
        g = g * valid
        donor_zg, g_nodonor = None, None
        if resample:
            donor = batch.donor.to(z.device)
            own = donor == torch.arange(len(donor), device=z.device)
            covered = (batch.valid.to(z.device)[donor] & ~own.unsqueeze(1))[
                None, :, :, None, None
            ] & valid.bool()
            donor_zg, g_nodonor = (
                (g * z[:, donor] * covered).sum((2, 4)),
                (g * (valid.bool() & ~covered)).sum(2),
            )
        terms = _BatchTerms(
            batch=batch,
            per={m: PerSeq(p.index, p.num.detach(), p.den.detach()) for m, p in per.items()},
            zg=(g * z).sum((2, 4)),
            g=g.sum(2),
            donor_zg=donor_zg,
            g_nodonor=g_nodonor,
            sink_v=sink_v,
        )
    return terms


def _estimates(
    t: _BatchTerms, kinds: tuple[str, ...], means: torch.Tensor
) -> dict[tuple[str, int, int], torch.Tensor]:
    """(kind, layer, head) -> estimated change of num per batch element ``[batch]``."""
    out: dict[tuple[str, int, int], torch.Tensor] = {}
    m = means.to(t.g.device)[:, None]  # [layer, 1, head, d_head]
    per_kind = {"zero": -t.zg, "mean": (t.g * m).sum(-1) - t.zg}
    if t.donor_zg is not None and t.g_nodonor is not None:
        per_kind["resample"] = t.donor_zg + (t.g_nodonor * m).sum(-1) - t.zg
    if t.sink_v is not None:
        per_kind["sink"] = (t.g * t.sink_v.to(t.g.device)).sum(-1) - t.zg
    n_layers, _, n_heads = t.zg.shape
    for kind in kinds:
        change = per_kind[kind]  # [layer, batch, head]
        for layer in range(n_layers):
            for head in range(n_heads):
                out[(kind, layer, head)] = change[layer, :, head]
    return out


def shifted(batch: EvalBatch, intact: dict[str, PerSeq], change: torch.Tensor) -> dict[str, PerSeq]:
    """Intact per-sequence num plus the estimated change (``[batch]``, per batch element),
    summed onto each metric's sequences."""
    out = {}
    for metric, per in intact.items():
        # A sentence and its view share an index: both elements' changes belong to the sentence.
        delta = torch.zeros(int(batch.index.max()) + 1, dtype=change.dtype).index_add(
            0, batch.index, change.cpu()
        )
        out[metric] = PerSeq(per.index, per.num.cpu() + delta[per.index], per.den)
    return out

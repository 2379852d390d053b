# Over 400 lines: one estimator whose passes (gradients, QK fix, GradDrop) share per-batch state.
"""AtP* (Kramár et al. 2024): every head's ablation effect estimated from gradients, seeing through
attention.

Per batch, one forward pass with autograd and one backward pass of the metric give every
head's first-order estimate (attribution patching, as :mod:`interp.ablate.attribution`):

    estimate_h = sum over positions of  dM/dz_h . (z'_h - z_h),

with ``z'_h`` the ablated value (zero, the heads' mean, or a donor sequence's output,
:mod:`interp.ablate.values`; the means are known before the pass, so each kind's change is
exact). AtP* adds two things:

- **the QK fix** (:mod:`interp.ablate.qk_fix`): where a head's ablation moves a later head's
  queries or keys, that head's softmax is recomputed exactly instead of through its gradient.
  It is computed on the first ``qk_positions`` scored positions of each eval set (sequences in
  index order, the QK tier) and carried to the rest of the eval set as the same correction per
  scored position (a KL estimate, which squares a per-sequence change, below, as the same
  ratio to its first-order value).
- **GradDrop** (:mod:`interp.ablate.graddrop`): a size that exposes heads whose paths cancel,
  computed on the first ``graddrop_positions`` scored positions of each eval set (about ``L / 2``
  extra backward passes per batch).

Two metrics are estimated from another's gradient, since their own vanishes or is a function
of one number per sequence:

- ``kl_prose`` / ``kl_corpus`` (a KL divergence from the intact model: zero, with zero
  gradient, at the intact model) to second order. With ``y`` drawn from the intact model at
  each scored position and a random sign ``e`` per position, ``F = sum e log p(y)`` has
  ``E[(dF)^2] = sum Var_p(d log p) = 2 KL`` to second order (Hutchinson's trick on the Fisher
  information), so each sequence's KL is estimated by ``(dF)^2 / 2``, ``dF`` the AtP* estimate
  of ``F``'s change: one more backward pass per batch of those eval sets.
- ``sv_prob`` (the probability of the right verb form between the two): ``sigmoid(d + dd) -
  sigmoid(d)`` per sentence, ``d`` its logit difference and ``dd`` the estimate of its change.

The module is long because the per-batch run (:class:`_Run`) keeps the QK tier's corrections,
the GradDrop scores and the derived metrics' state together; the pieces it calls live in
:mod:`interp.ablate.qk_fix`, :mod:`interp.ablate.qk_check` and :mod:`interp.ablate.graddrop`.
Not yet the ablate stage's estimator: ``benchmarks/estimators.py`` measures it against exact
ablation.

Rows come out as any estimator's (``estimator`` = ``atp_star``), the GradDrop score beside
each (``graddrop``); :func:`estimate` is the entry point.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from interp.ablate import graddrop, qk_check, qk_fix
from interp.ablate.attribution import shifted
from interp.ablate.batches import EvalBatch, EvalCorpus
from interp.ablate.catalogue import ENCODER, HAS_GRADIENT, KL_OF, PROB_OF, eval_set_metrics
from interp.ablate.forward import Ablator, GradPass
from interp.ablate.metrics import PerSeq, batch_metrics, metric_sizes
from interp.ablate.stats import SumStore, effects_from_sums, sequence_tokens
from interp.ablate.values import replacement
from interp.model import lens

NAME = "atp_star"


def primary_metric(eval_set: str) -> str:
    """The metric of an eval set whose gradient AtP* takes (its others are derived from it)."""
    return "retrieval_margin" if eval_set == ENCODER else eval_set_metrics(eval_set)[0]


def estimable_sizes(sizes: dict[str, int]) -> dict[str, int]:
    """The metrics AtP* estimates (those with a gradient, and the KL and probability metrics it
    derives from another gradient), with their number of sequences."""
    derived = set(KL_OF.values()) | set(PROB_OF.values())
    return {
        m: n for m, n in metric_sizes(sizes).items() if HAS_GRADIENT.get(m, True) or m in derived
    }


@dataclass
class Tiers:
    """How many sequences (in index order) of each eval set get the QK fix and GradDrop."""

    qk: dict[str, int]
    graddrop: dict[str, int]

    def of(self, batch: EvalBatch) -> tuple[bool, bool]:
        """(QK fix, GradDrop) for a batch: its sequences all lie within a tier or all beyond."""
        last = int(batch.index.max())
        return last < self.qk.get(batch.eval_set, 0), last < self.graddrop.get(batch.eval_set, 0)


@dataclass
class Estimates:
    """The estimator's per-sequence sums, its GradDrop scores and what it read."""

    store: SumStore
    graddrop: pd.DataFrame  # layer, head, ablation, metric, graddrop
    qk: str  # "applied", or why the QK fix could not be applied to this model
    positions: dict[str, dict[str, int]] = field(default_factory=dict)  # eval set -> part -> scored
    seconds: float = 0.0


def tiers_for(corpus: EvalCorpus, qk_positions: int, graddrop_positions: int) -> Tiers:
    """The first sequences of each eval set holding at least the asked scored positions (all of
    an eval set that holds fewer; none for 0)."""
    scored = sequence_tokens(corpus)

    def first(target: int) -> dict[str, int]:
        out = {}
        for eval_set in corpus.sizes:
            reached = np.nonzero(np.cumsum(scored[primary_metric(eval_set)]) >= target)[0]
            out[eval_set] = (
                0
                if not target
                else int(reached[0]) + 1
                if len(reached)
                else (corpus.sizes[eval_set])
            )
        return out

    return Tiers(first(qk_positions), first(graddrop_positions))


def estimate(
    ablator: Ablator,
    corpus: EvalCorpus,
    kinds: tuple[str, ...],
    means: torch.Tensor | None,
    tiers: Tiers,
    seed: int,
    progress: bool = True,
) -> Estimates:
    """Every head's AtP* estimate on every metric with one, for each ablation kind, and its
    GradDrop score. Each of ``corpus``'s batches must hold sequences of one tier, and the
    tiers' batches must come first (:func:`interp.ablate.corpora.estimator_corpus` orders them
    so), since what the QK tier finds is carried to the sequences after it."""
    start = time.perf_counter()
    run = _Run(ablator, kinds, means, tiers, seed, SumStore(estimable_sizes(corpus.sizes)))
    for batch in tqdm(corpus.batches, desc="ablate: AtP*", unit="batch", disable=not progress):
        run.batch(batch)
    model = ablator.model
    return Estimates(
        run.store,
        run.graddrop_frame(model.n_layers, model.n_heads),
        run.qk_state,
        _positions(corpus, tiers),
        time.perf_counter() - start,
    )


def rows(result: Estimates, corpus: EvalCorpus, n_boot: int, seed: int) -> pd.DataFrame:
    """The estimator's effects rows, with their GradDrop score (NaN where none was taken)."""
    frame = effects_from_sums(result.store, NAME, n_boot, seed, sequence_tokens(corpus))
    if frame.empty:
        return frame
    keys = ["layer", "head", "ablation", "metric"]
    return frame.merge(result.graddrop, on=keys, how="left")


def _positions(corpus: EvalCorpus, tiers: Tiers) -> dict[str, dict[str, int]]:
    scored = sequence_tokens(corpus)
    out = {}
    for eval_set in corpus.sizes:
        counts = scored[primary_metric(eval_set)]
        out[eval_set] = {
            "estimate": int(counts.sum()),
            "qk_fix": int(counts[: tiers.qk.get(eval_set, 0)].sum()),
            "graddrop": int(counts[: tiers.graddrop.get(eval_set, 0)].sum()),
        }
    return out


class _Run:
    """The estimator's state across batches: the QK check, what the QK tier found per eval set
    (carried to the eval set's later sequences), the GradDrop sums."""

    def __init__(
        self,
        ablator: Ablator,
        kinds: tuple[str, ...],
        means: torch.Tensor | None,
        tiers: Tiers,
        seed: int,
        store: SumStore,
    ):
        self.ablator, self.kinds, self.means, self.tiers = ablator, kinds, means, tiers
        self.store = store
        self.model = ablator.model
        self.qk_model: qk_check.QKModel | None = None
        self.composition: qk_fix.Composition | None = None
        self.qk_state = "not reached"
        self.generator = torch.Generator().manual_seed(seed)
        self.carry = _Carried()
        self.gd_sums: dict[tuple[str, str], torch.Tensor] = {}  # (kind, metric) -> [drop, L, H]
        self.gd_den: dict[str, float] = {}

    def batch(self, batch: EvalBatch) -> None:
        qk_tier, gd_tier = self.tiers.of(batch)
        qk_tier = qk_tier and self.qk_state in ("not reached", "applied")
        passed = self.ablator.run_for_estimates(batch, attention=qk_tier, residual=gd_tier)
        per = batch_metrics(passed.readout, batch)
        metric = primary_metric(batch.eval_set)
        if metric not in self.store:  # an encoder asked for embedding_cosine alone
            return
        functionals = [per[metric].num.sum()]
        kl = KL_OF.get(batch.eval_set) if KL_OF.get(batch.eval_set) in self.store else None
        if kl is not None:
            functionals.append(hutchinson(passed.readout, self.generator))
        graph = passed.z + (passed.pattern if qk_tier else [])
        grads = [
            torch.autograd.grad(
                f,
                graph + (passed.resid if gd_tier and i == 0 else []),
                retain_graph=True,
                allow_unused=True,
            )
            for i, f in enumerate(functionals)
        ]
        n = self.model.n_layers
        valid = batch.valid.to(passed.z[0].device)
        mask = valid[:, :, None, None].float()
        dz = {kind: self._changes(kind, passed, batch, mask) for kind in self.kinds}
        linear = [{kind: _linear(g[:n], changes) for kind, changes in dz.items()} for g in grads]
        corrections = self._qk(passed, grads, dz, valid) if qk_tier else None
        if gd_tier:
            resid_grads = list(grads[0][len(graph) :])
            dropped = graddrop.dropped_estimates(
                passed, resid_grads, list(grads[0][:n]), dz, linear[0]
            )
            self._add_graddrop(dropped, corrections, metric, float(per[metric].den.sum()))
        del passed, grads
        self._store(batch, per[metric], metric, kl, linear, corrections)

    def _changes(
        self, kind: str, passed: GradPass, batch: EvalBatch, mask: torch.Tensor
    ) -> list[torch.Tensor]:
        """Per layer ``[batch, pos, head, d_head]``: the ablation's change of every head's z."""
        out = []
        clean = [z.detach().float() for z in passed.z]
        for layer, z in enumerate(clean):
            heads = [
                replacement(kind, layer, head, batch, clean, self.means)
                .to(z.device)
                .float()
                .expand(z.shape[0], z.shape[1], z.shape[3])
                for head in range(z.shape[2])
            ]
            out.append((torch.stack(heads, dim=2) - z) * mask)
        return out

    def _qk(
        self,
        passed: GradPass,
        grads: list[tuple[torch.Tensor, ...]],
        dz: dict[str, list[torch.Tensor]],
        valid: torch.Tensor,
    ) -> dict[str, torch.Tensor] | None:
        """kind -> ``[functional, layer, batch, head]``: the QK fix of every head (None where the
        model does not allow it; the first batch decides, with one warning)."""
        n, heads = self.model.n_layers, self.model.n_heads
        layers = [_layer_inputs(passed, layer) for layer in range(n)]
        pattern_grads = [[g[n + layer] for layer in range(n)] for g in grads]
        if self.qk_model is None:
            found = qk_check.check(
                layers,
                all(g is not None for g in pattern_grads[0]),
                lens.qk_weights(self.model.bridge),
                valid.cpu(),
                self.model.causal,
            )
            if isinstance(found, str):
                self.qk_state = found
                warnings.warn(
                    f"AtP*: no QK fix on this model ({found}); its estimates are first order "
                    "through attention",
                    stacklevel=4,
                )
                return None
            self.qk_model, self.qk_state = found, "applied"
            self.composition = qk_fix.Composition(found)
        assert self.composition is not None and isinstance(self.qk_model, qk_fix.QKModel)
        causal = self.model.causal
        per_layer = [[g[layer].detach().float() for g in pattern_grads] for layer in range(n)]
        leverage = [qk_fix.leverage(grads_[0], valid, causal) for grads_ in per_layer]
        out = {}
        for kind, changes in dz.items():
            up = qk_fix.upstream(changes, self.qk_model, layers)
            pairs = qk_fix.choose_pairs(self.composition, layers, up, leverage)
            total = torch.zeros(len(grads), n * heads, valid.shape[0], dtype=torch.float64)
            for layer, chosen in pairs.items():
                fixed = qk_fix.correction(
                    self.qk_model, layer, layers[layer], up, chosen, per_layer[layer], valid, causal
                )  # [functional, batch, head_up]
                total[:, : layer * heads] += fixed.permute(0, 2, 1)
            out[kind] = total.unflatten(1, (n, heads)).permute(0, 1, 3, 2)  # [f, L, B, H]
        return out

    def _store(
        self,
        batch: EvalBatch,
        intact: PerSeq,
        metric: str,
        kl: str | None,
        linear: list[dict[str, torch.Tensor]],
        corrections: dict[str, torch.Tensor] | None,
    ) -> None:
        """Every head's estimated per-sequence sums of this batch's metrics."""
        own = {metric: intact}
        self.store.add_base(own)
        prob = PROB_OF.get(batch.eval_set) if PROB_OF.get(batch.eval_set) in self.store else None
        if prob is not None:
            self.store.add_base({prob: _sigmoid_of(intact)})
        if kl is not None:
            self.store.add_base({kl: PerSeq(intact.index, 0 * intact.num, intact.den)})
        rows_ = torch.zeros(len(batch)).index_add(
            0, batch.row_batch, torch.ones(len(batch.row_batch))
        )
        n, heads = self.model.n_layers, self.model.n_heads
        for kind in self.kinds:
            change = linear[0][kind].double().cpu()  # [L, B, H]
            half_square = None
            if kl is not None:
                first = linear[1][kind].double().cpu()
                first_kl = _per_sequence(batch, first) ** 2 / 2  # [L, seq, H]
            if corrections is not None and kind in corrections:
                found = corrections[kind]
                change = change + found[0]
                self.carry.add(batch.eval_set, kind, found[0], rows_)
                if kl is not None:
                    half_square = _per_sequence(batch, first + found[1]) ** 2 / 2
                    self.carry.add_kl(batch.eval_set, kind, first_kl, half_square, intact.index)
            else:
                change = change + self.carry.per_position(batch.eval_set, kind, rows_, n, heads)
                if kl is not None:
                    half_square = first_kl * self.carry.kl_ratio(batch.eval_set, kind, n, heads)
            for layer in range(n):
                for head in range(heads):
                    moved = shifted(batch, own, change[layer, :, head])
                    self.store.add((kind, layer, head), moved)
                    if prob is not None:
                        self.store.add((kind, layer, head), {prob: _sigmoid_of(moved[metric])})
                    if kl is not None and half_square is not None:
                        kl_seq = half_square[layer, intact.index, head]
                        self.store.add(
                            (kind, layer, head), {kl: PerSeq(intact.index, kl_seq, intact.den)}
                        )

    def _add_graddrop(
        self,
        dropped: dict[str, torch.Tensor],
        corrections: dict[str, torch.Tensor] | None,
        metric: str,
        den: float,
    ) -> None:
        self.gd_den[metric] = self.gd_den.get(metric, 0.0) + den
        for kind, est in dropped.items():
            total = est.double().cpu().sum(2)  # [drop, L, H]
            if corrections is not None and kind in corrections:
                total = total + corrections[kind][0].sum(1)[None]
            key = (kind, metric)
            self.gd_sums[key] = self.gd_sums.get(key, 0) + total

    def graddrop_frame(self, n_layers: int, n_heads: int) -> pd.DataFrame:
        out = []
        for (kind, metric), sums in self.gd_sums.items():
            score = graddrop.scores(sums, self.gd_den[metric])
            out += [
                {
                    "layer": layer,
                    "head": head,
                    "ablation": kind,
                    "metric": metric,
                    "graddrop": float(score[layer, head]),
                }
                for layer in range(n_layers)
                for head in range(n_heads)
            ]
        return pd.DataFrame(out, columns=["layer", "head", "ablation", "metric", "graddrop"])


class _Carried:
    """What the QK tier of each eval set found, carried to the eval set's later sequences: the
    correction per scored position (added), and for a KL estimate the ratio of the corrected
    to the first-order estimate (multiplied: it squares a per-sequence change)."""

    def __init__(self) -> None:
        self.sums: dict[tuple[str, str], torch.Tensor] = {}  # (eval set, kind) -> [L, H]
        self.positions: dict[tuple[str, str], float] = {}
        self.kl: dict[tuple[str, str], list[torch.Tensor]] = {}  # -> [first order, corrected]

    def add(self, eval_set: str, kind: str, found: torch.Tensor, rows: torch.Tensor) -> None:
        key = (eval_set, kind)
        self.sums[key] = self.sums.get(key, 0) + found.sum(1)
        self.positions[key] = self.positions.get(key, 0.0) + float(rows.sum())

    def per_position(
        self, eval_set: str, kind: str, rows: torch.Tensor, n: int, heads: int
    ) -> torch.Tensor:
        """``[layer, batch, head]``: the eval set's correction per scored position times each
        batch element's scored positions (zero where the eval set had no QK tier)."""
        key = (eval_set, kind)
        if key not in self.sums or not self.positions[key]:
            return torch.zeros(n, len(rows), heads, dtype=torch.float64)
        return (self.sums[key] / self.positions[key])[:, None, :] * rows.double()[None, :, None]

    def add_kl(
        self,
        eval_set: str,
        kind: str,
        first: torch.Tensor,
        corrected: torch.Tensor,
        index: torch.Tensor,
    ) -> None:
        sums = self.kl.setdefault((eval_set, kind), [torch.zeros(()), torch.zeros(())])
        sums[0] = sums[0] + first[:, index].sum(1)
        sums[1] = sums[1] + corrected[:, index].sum(1)

    def kl_ratio(self, eval_set: str, kind: str, n: int, heads: int) -> torch.Tensor:
        """``[layer, 1, head]``: corrected over first-order KL on the eval set's QK tier (1
        without)."""
        sums = self.kl.get((eval_set, kind))
        if sums is None:
            return torch.ones(n, 1, heads, dtype=torch.float64)
        first, corrected = sums
        ratio = torch.where(first > 0, corrected / first.clamp_min(1e-300), torch.ones_like(first))
        return ratio[:, None, :]


def hutchinson(readout: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """``sum e log p(y)`` over the scored rows (``readout``: their logits), with ``y`` drawn from
    the model's own distribution there and ``e`` a random sign: its squared change estimates
    twice the KL divergence to second order (module docstring)."""
    logp = torch.log_softmax(readout.float(), dim=-1)
    with torch.no_grad():
        y = torch.multinomial(logp.detach().exp().cpu(), 1, generator=generator)[:, 0]
        sign = torch.randint(0, 2, (len(y),), generator=generator) * 2 - 1
    picked = logp.gather(1, y.to(logp.device)[:, None])[:, 0]
    return (sign.to(logp.device, logp.dtype) * picked).sum()


def _linear(grads: tuple[torch.Tensor, ...], changes: list[torch.Tensor]) -> torch.Tensor:
    """``[layer, batch, head]``: sum over positions of the gradient times the change of z."""
    with torch.no_grad():
        return torch.stack([(g.float() * d).sum((1, 3)) for g, d in zip(grads, changes)])


def _layer_inputs(passed: GradPass, layer: int) -> qk_check.LayerInputs:
    site = passed.inputs[layer]
    return qk_check.LayerInputs(
        resid=site["resid_pre"],
        normalized=site["normalized"],
        scale=site["norm_scale"],
        attn_in=site["attn_in"],
        q=site["q"],
        k=site["k"],
        rot_q=site.get("rot_q"),
        rot_k=site.get("rot_k"),
        cos=site.get("cos"),
        sin=site.get("sin"),
        scores=site["scores"],
        pattern=passed.pattern[layer].detach().float(),
    )


def _sigmoid_of(per: PerSeq) -> PerSeq:
    """The probability of the right verb form between the two, from the logit difference (one
    row per sentence)."""
    return PerSeq(per.index, torch.sigmoid(per.num), per.den)


def _per_sequence(batch: EvalBatch, change: torch.Tensor) -> torch.Tensor:
    """``[layer, sequence index, head]``: a change per batch element (``[layer, batch, head]``)
    summed onto its sequence."""
    out = torch.zeros(
        change.shape[0], int(batch.index.max()) + 1, change.shape[2], dtype=change.dtype
    )
    return out.index_add(1, batch.index, change)

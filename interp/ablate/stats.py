"""Per-sequence sums -> effect rows with paired bootstrap confidence intervals.

Each metric is a ratio of sums over sequences (see :mod:`interp.ablate.metrics`). A
bootstrap resample draws the eval set's sequences with replacement and recomputes baseline and
ablated metric on the *same* draw, so the interval is for the paired difference: it is narrow
when a head changes every sequence a little in the same direction, even if the sequences
themselves vary a lot. The same draws serve every head of a metric.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from interp.ablate.batches import EvalCorpus
from interp.ablate.catalogue import BEHAVIOUR_METRICS, ENCODER, ORIENTATION
from interp.ablate.metrics import PerSeq, eval_set_metrics, metric_sizes
from interp.errors import RunError

Condition = tuple[str, int, int]  # (ablation kind, layer, head)
TOLERANCE = (
    0.01  # a head "matters" past 1% of the intact metric: the pruning curve's tightest tolerance
)


@dataclass
class MetricSums:
    """Per-sequence ``num`` of the intact model and of each ablated condition, for one metric.

    ``measured`` marks the sequences whose intact sums are in (a shard of a sweep, or a round of
    a sequential one, sees only some); an ablated condition's unmeasured sequences are NaN.
    ``nonfinite`` marks, per condition, the sequences whose ablated output was NaN or infinite:
    NaN there would read as "not measured", and the effect would silently rest on the others
    (:func:`check_finite` refuses it).
    """

    size: int
    base: torch.Tensor = field(init=False)
    den: torch.Tensor = field(init=False)
    measured: torch.Tensor = field(init=False)
    ablated: dict[Condition, torch.Tensor] = field(default_factory=dict)
    nonfinite: dict[Condition, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.base = torch.zeros(self.size, dtype=torch.float64)
        self.den = torch.zeros(self.size, dtype=torch.float64)
        self.measured = torch.zeros(self.size, dtype=torch.bool)

    def add_base(self, per: PerSeq) -> None:
        self.base[per.index] = per.num.detach().double().cpu()
        self.den[per.index] = per.den.detach().double().cpu()
        self.measured[per.index] = True

    def add(self, condition: Condition, per: PerSeq) -> None:
        row = self.ablated.setdefault(
            condition, torch.full((self.size,), float("nan"), dtype=torch.float64)
        )
        values = per.num.detach().double().cpu()
        row[per.index] = values
        bad = ~torch.isfinite(values)
        if bad.any():
            mask = self.nonfinite.setdefault(condition, torch.zeros(self.size, dtype=torch.bool))
            mask[per.index[bad]] = True

    def merge(self, other: MetricSums, metric: str = "") -> None:
        """Take in ``other``'s sums (another shard of the same sweep): values are copied, never
        added, so the result equals one process having measured both. Both shards ran the intact
        model on the sequences they share, and must have got the same sums; a (condition,
        sequence) measured by both is refused (a head measured twice)."""
        if other.size != self.size:
            raise ValueError(
                f"{metric}: cannot merge sums over {other.size} sequences into {self.size}"
            )
        both = self.measured & other.measured
        if not (
            _same(self.base[both], other.base[both]) and _same(self.den[both], other.den[both])
        ):
            raise ValueError(
                f"{metric}: two shards measured the intact model differently on the same sequences "
                "(different weights, dtype, thread count or library versions)"
            )
        new = other.measured & ~self.measured
        self.base[new], self.den[new] = other.base[new], other.den[new]
        self.measured |= other.measured
        for condition, mask in other.nonfinite.items():
            mine_bad = self.nonfinite.setdefault(
                condition, torch.zeros(self.size, dtype=torch.bool)
            )
            mine_bad |= mask
        for condition, row in other.ablated.items():
            mine = self.ablated.get(condition)
            if mine is None:
                self.ablated[condition] = row.clone()
                continue
            theirs = ~torch.isnan(row)
            if (theirs & ~torch.isnan(mine)).any():
                raise ValueError(
                    f"{metric}: condition {condition} was measured by two shards on the same sequence"
                )
            mine[theirs] = row[theirs]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal to the last bit, NaN equal to NaN."""
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


class SumStore(dict):
    """metric name -> MetricSums; ``add_base``/``add`` take a batch's ``{metric: PerSeq}``;
    :meth:`merge` takes in another store of the same sweep (a shard's partial sums)."""

    def __init__(self, sizes: dict[str, int]):
        super().__init__({m: MetricSums(n) for m, n in sizes.items()})

    def add_base(self, per_metric: dict[str, PerSeq]) -> None:
        for name, per in per_metric.items():
            self[name].add_base(per)

    def add(self, condition: Condition, per_metric: dict[str, PerSeq]) -> None:
        for name, per in per_metric.items():
            self[name].add(condition, per)

    def merge(self, other: SumStore) -> SumStore:
        """This store with ``other``'s sums taken in (see :meth:`MetricSums.merge`); both must
        hold the same metrics. Merging is exact and, shard by shard, gives the single process'
        store (conditions in the same order too when whole-layer shards are merged in layer order)."""
        if set(other) != set(self):
            raise ValueError(f"cannot merge sums of metrics {sorted(other)} into {sorted(self)}")
        for name, sums in other.items():
            self[name].merge(sums, name)
        return self

    def baseline(self, metric: str) -> float:
        sums = self[metric]
        return float(sums.base.sum() / sums.den.sum())


def sequence_tokens(corpus: EvalCorpus) -> dict[str, np.ndarray]:
    """metric -> scored positions of each of its sequences: the positions the metric reads (a
    causal metric: its rows, one per sequence for sv_logit_diff, a task's own positions; an
    encoder's embedding reads every token, of the sentence and of its view)."""
    out = {m: np.zeros(n, dtype=np.int64) for m, n in metric_sizes(corpus.sizes).items()}
    for item in corpus.items:
        for metric in eval_set_metrics(item.eval_set):
            out[metric][item.index] += (
                len(item.tokens) if item.eval_set == ENCODER else len(item.rows)
            )
    return out


def check_finite(store: SumStore, estimator: str) -> None:
    """RunError naming the first condition whose ablated output (or its estimate) was NaN or
    infinite on some sequence of a metric: its effect would rest on the other sequences only."""
    for metric, sums in store.items():
        for (kind, layer, head), marked in sums.nonfinite.items():
            # where the intact output is not finite either, the model itself fails there: that is
            # check_measured's refusal (ablate.stage), with its own message
            mask = marked & torch.isfinite(sums.base)
            if mask.any():
                seen = int((~torch.isnan(sums.ablated[(kind, layer, head)]) | mask).sum())
                raise RunError(
                    f"the {estimator} effect of L{layer}H{head} ({kind} ablation) on {metric} is NaN or "
                    f"infinite on {int(mask.sum())} of {seen} sequences: the model's output with the head "
                    f"removed overflows or is NaN there; load the model with --dtype float32 if it "
                    f"overflows in half precision, or check the weights"
                )


def bootstrap_weights(n: int, n_boot: int, seed: int) -> np.ndarray:
    """``[n, n_boot]`` counts: how often each sequence is drawn in each resample."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(n_boot, n))
    weights = np.zeros((n, n_boot))
    np.add.at(weights, (draws, np.arange(n_boot)[:, None]), 1.0)
    return weights


def effects_from_sums(
    store: SumStore,
    estimator: str,
    n_boot: int,
    seed: int,
    tokens: dict[str, np.ndarray] | None = None,
) -> pd.DataFrame:
    """One ``effects`` row per (condition, metric) in ``store``; delta oriented worse = positive.

    A condition's effect rests on the sequences it was measured on (a sequential sweep stops
    some heads early): conditions measured on the same sequences share one bootstrap. ``tokens``
    (metric -> scored positions per sequence, :func:`sequence_tokens`) fills ``n_tokens``; the
    decisions against zero and against the tolerance (``TOLERANCE`` of the baseline) read the
    interval (:func:`decisions`).
    """
    check_finite(store, estimator)
    rows = []
    for metric, sums in store.items():
        if not sums.ablated or float(sums.den.sum()) == 0:
            continue
        conditions = list(sums.ablated)
        abl = torch.stack([sums.ablated[c] for c in conditions]).numpy()  # [condition, seq]
        seen = ~np.isnan(abl)
        baseline = float(sums.base.sum() / sums.den.sum())
        n_tok = tokens.get(metric) if tokens else None
        for mask in np.unique(seen, axis=0):
            if not mask.any():
                continue
            group = np.nonzero((seen == mask).all(1))[0]
            delta, lo, hi = _paired(
                sums, abl[group][:, mask], mask, ORIENTATION.get(metric, 1), n_boot, seed
            )
            for j, i in enumerate(group):
                kind, layer, head = conditions[i]
                rows.append(
                    {
                        "layer": layer,
                        "head": head,
                        "ablation": kind,
                        "metric": metric,
                        "baseline": baseline,
                        "ablated": baseline + ORIENTATION.get(metric, 1) * delta[j],
                        "delta": delta[j],
                        "delta_rel": delta[j] / abs(baseline) if baseline != 0 else np.nan,
                        "ci_low": lo[j],
                        "ci_high": hi[j],
                        "estimator": estimator,
                        "n_tokens": int(n_tok[mask].sum()) if n_tok is not None else np.nan,
                    }
                )
    frame = pd.DataFrame(rows)
    return decisions(frame) if len(frame) else frame


def _paired(
    sums: MetricSums, abl: np.ndarray, mask: np.ndarray, sign: int, n_boot: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(delta, ci_low, ci_high) per condition of ``abl`` ``[condition, seq]``, on the sequences
    ``mask`` keeps: the delta of the ratio of sums, and its paired bootstrap interval."""
    base, den = sums.base.numpy()[mask], sums.den.numpy()[mask]
    delta = sign * (abl.sum(1) - base.sum()) / den.sum()
    w = bootstrap_weights(len(base), n_boot, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = sign * ((abl @ w) - (base @ w)) / (den @ w)  # [condition, n_boot]
    lo, hi = np.nanquantile(boot, [0.025, 0.975], axis=1)
    return delta, lo, hi


def tolerance_of(baseline: pd.Series, metric: pd.Series) -> pd.Series:
    """The effect a head may have and still count as removable: ``TOLERANCE`` of the intact
    ``metric``, or that much absolute for a metric that compares with the intact model (a KL
    divergence, embedding_cosine: 0 there by definition) or whose intact value is 0
    (the rule of :func:`interp.ablate.removable.change_scale`)."""
    scale = baseline.abs()
    return TOLERANCE * scale.where((scale > 1e-12) & ~metric.isin(BEHAVIOUR_METRICS), 1.0)


def decisions(effects: pd.DataFrame) -> pd.DataFrame:
    """``effects`` with ``tolerance``, ``vs_zero`` (above | below | undecided: does the 95%
    interval exclude zero, and on which side) and ``vs_tolerance`` (above | within | below |
    undecided: is the interval wholly beyond +tolerance, inside +-tolerance, beyond -tolerance)."""
    tol = tolerance_of(effects["baseline"], effects["metric"])
    lo, hi = effects["ci_low"], effects["ci_high"]
    vs_zero = np.select([lo > 0, hi < 0], ["above", "below"], "undecided")
    vs_tol = np.select(
        [lo > tol, hi < -tol, (lo >= -tol) & (hi <= tol)], ["above", "below", "within"], "undecided"
    )
    return effects.assign(tolerance=tol, vs_zero=vs_zero, vs_tolerance=vs_tol)

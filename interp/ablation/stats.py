"""Per-sequence sums -> effect rows with paired bootstrap confidence intervals.

Each metric is a ratio of sums over sequences (see :mod:`interp.ablation.metrics`). A
bootstrap resample draws the family's sequences with replacement and recomputes baseline and
ablated metric on the *same* draw, so the interval is for the paired difference: it is narrow
when a head changes every sequence a little in the same direction, even if the sequences
themselves vary a lot. The same draws serve every head of a metric.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from interp.ablation.catalogue import ORIENTATION
from interp.ablation.metrics import PerSeq

Condition = tuple[str, int, int]  # (ablation kind, layer, head)


@dataclass
class MetricSums:
    """Per-sequence ``num`` of the intact model and of each ablated condition, for one metric."""

    size: int
    base: torch.Tensor = field(init=False)
    den: torch.Tensor = field(init=False)
    ablated: dict[Condition, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.base = torch.zeros(self.size, dtype=torch.float64)
        self.den = torch.zeros(self.size, dtype=torch.float64)

    def add_base(self, per: PerSeq) -> None:
        self.base[per.index] = per.num.detach().double().cpu()
        self.den[per.index] = per.den.detach().double().cpu()

    def add(self, condition: Condition, per: PerSeq) -> None:
        row = self.ablated.setdefault(condition, torch.full((self.size,), float("nan"), dtype=torch.float64))
        row[per.index] = per.num.detach().double().cpu()


class SumStore(dict):
    """metric name -> MetricSums; ``add_base``/``add`` take a batch's ``{metric: PerSeq}``."""

    def __init__(self, sizes: dict[str, int]):
        super().__init__({m: MetricSums(n) for m, n in sizes.items()})

    def add_base(self, per_metric: dict[str, PerSeq]) -> None:
        for name, per in per_metric.items():
            self[name].add_base(per)

    def add(self, condition: Condition, per_metric: dict[str, PerSeq]) -> None:
        for name, per in per_metric.items():
            self[name].add(condition, per)

    def baseline(self, metric: str) -> float:
        sums = self[metric]
        return float(sums.base.sum() / sums.den.sum())


def bootstrap_weights(n: int, n_boot: int, seed: int) -> np.ndarray:
    """``[n, n_boot]`` counts: how often each sequence is drawn in each resample."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(n_boot, n))
    weights = np.zeros((n, n_boot))
    np.add.at(weights, (draws, np.arange(n_boot)[:, None]), 1.0)
    return weights


def effects_from_sums(store: SumStore, method: str, n_boot: int, seed: int) -> pd.DataFrame:
    """One ``effects`` row per (condition, metric) in ``store``; delta oriented worse = positive."""
    rows = []
    for metric, sums in store.items():
        if not sums.ablated or float(sums.den.sum()) == 0:
            continue
        conditions = list(sums.ablated)
        abl = torch.stack([sums.ablated[c] for c in conditions]).numpy()  # [condition, seq]
        keep = ~np.isnan(abl).any(0)  # sequences every condition saw (all, in a full run)
        base, den, abl = sums.base.numpy()[keep], sums.den.numpy()[keep], abl[:, keep]
        sign = ORIENTATION.get(metric, 1)  # a user task is oriented higher = worse
        baseline = base.sum() / den.sum()
        ablated = abl.sum(1) / den.sum()
        delta = sign * (ablated - baseline)
        w = bootstrap_weights(len(base), n_boot, seed)
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = sign * ((abl @ w) - (base @ w)) / (den @ w)  # [condition, n_boot]
        lo, hi = np.nanquantile(boot, [0.025, 0.975], axis=1)
        for i, (kind, layer, head) in enumerate(conditions):
            rows.append({
                "layer": layer, "head": head, "ablation": kind, "metric": metric,
                "baseline": baseline, "ablated": ablated[i], "delta": delta[i],
                "delta_rel": delta[i] / abs(baseline) if baseline != 0 else np.nan,
                "ci_low": lo[i], "ci_high": hi[i], "method": method,
            })
    return pd.DataFrame(rows)

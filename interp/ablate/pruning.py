"""Pruning curves: remove heads cumulatively, least important first, and watch each metric.

**Per metric, in that metric's own order.** A metric's curve removes heads in ascending order
of their effect on *that* metric (``delta``, oriented so positive = worse; from the exact sweep
where a head has one and from the estimator otherwise; heads with neither go first, as the ones
the top-k selection judged least important), so a head that only the repeated-token loss needs
is not thrown out early because prose does not need it. The order comes from the evaluation
corpus (split 0); the curve is measured on the held-out split 1 (no sequence in common), so
heads whose removal happened to help the ranking sequences do not make pruning look free. A
metric's curve runs only on its own eval set's batches, so per-metric orders cost no more
forwards than one shared order.

**Resolution where it matters.** Step 0 is the intact model; then a grid (one head per step up
to 64 heads, else 5% of the heads), and, for each tolerance (``TOLERANCES``: 1% and 5% of the
intact value, either side), bisection between the last grid step within it and the first
beyond it, down to a single head. The removable share at a tolerance is the largest count
whose every evaluated step up to it stays within, on both sides: a metric that *improves* past
the tolerance is not "within" (:func:`interp.ablate.removable.removable_fraction`, the same
rule the report applies to the table, which also says how much a metric improved).

**Intervals.** Each step's value gets a percentile bootstrap interval over held-out sequences
(``ci_low``/``ci_high``), its change from the intact model one from the same draws of both
(``change_low``/``change_high``: paired, so the spread of the metric between sequences, which
both share, drops out; the level's interval holds it), and the removable share one from the
same draws (the rule applied to each resampled curve), reported in the stage's summary.

**By role** (:func:`role_rows`): every head of one primary role removed at once (all
``first_token`` heads, all ``unexplained`` heads, ...), each metric measured on the held-out
split; rows with ``removed_by`` = ``role:<name>``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from interp.ablate.batches import EvalBatch, EvalCorpus
from interp.ablate.forward import Ablator
from interp.ablate.metrics import batch_metrics, eval_set_metrics, metric_sizes
from interp.ablate.removable import EFFECT_ORDER, TOLERANCES, removable_index, share_interval
from interp.ablate.stats import bootstrap_weights
from interp.ablate.sweep import chunks, pass_size
from interp.ablate.values import edits_for

Head = tuple[int, int]
FINE_GRID_MAX_HEADS = 64
SPANS = ("ci_low", "ci_high", "change_low", "change_high")  # a step's interval columns


@dataclass
class Spans:
    """The intervals of some removals (:meth:`Removals.intervals`): per ``SPANS`` column, one
    bound per key; and ``boot``, the bootstrap draws of their values ``[key, draw]``, from which
    the removable share's own interval is read (:func:`share_interval`)."""

    columns: dict[str, np.ndarray]
    boot: np.ndarray


def pruning_order(effects: pd.DataFrame, heads: list[Head], metric: str, kind: str) -> list[Head]:
    """``heads`` sorted least important first for ``metric`` (see module docstring)."""
    score: dict[Head, float] = {}
    rows = effects[(effects["metric"] == metric) & (effects["ablation"] == kind)]
    for exact in (False, True):  # exact overwrites the estimate
        part = rows[(rows["estimator"] == "exact") == exact]
        score.update({(int(r.layer), int(r.head)): float(r.delta) for r in part.itertuples()})
    known = sorted((h for h in heads if h in score), key=lambda h: (score[h], h))
    return [h for h in heads if h not in score] + known


def step_sizes(n_heads: int, step: float | None) -> list[int]:
    """Cumulative head counts after each grid step, ending at ``n_heads``."""
    if step is None:
        size = 1 if n_heads <= FINE_GRID_MAX_HEADS else max(1, math.ceil(0.05 * n_heads))
    else:
        size = max(1, math.ceil(step * n_heads))
    return list(range(size, n_heads, size)) + [n_heads]


class Removals:
    """Per-sequence sums of one metric with head sets removed, measured on held-out batches."""

    def __init__(
        self,
        ablator: Ablator,
        corpus: EvalCorpus,
        metric: str,
        kind: str,
        means: torch.Tensor | None,
        max_tokens: int | None,
    ):
        self.ablator, self.metric, self.kind, self.means, self.max_tokens = (
            ablator,
            metric,
            kind,
            means,
            max_tokens,
        )
        self.batches = [b for b in corpus.batches if metric in eval_set_metrics(b.eval_set)]
        size = metric_sizes(corpus.sizes)[metric]
        self.den = np.zeros(size)
        self.num: dict[object, np.ndarray] = {}  # key -> [seq]

    def measure(self, sets: dict[object, list[Head]]) -> None:
        """Add the per-sequence sums of every ``key -> heads removed`` not measured yet."""
        todo = [(k, heads) for k, heads in sets.items() if k not in self.num]
        if not todo:
            return
        for key, _ in todo:
            self.num[key] = np.zeros_like(self.den)
        for batch in self.batches:
            clean = self.ablator.clean(
                batch,
                keep_resid=True,
                keep_z=self.kind == "resample",
                keep_sink=self.kind == "sink",
            )
            intact = batch_metrics(clean.readout, batch)[self.metric]
            self.den[intact.index.numpy()] = intact.den.double().numpy()
            for chunk in chunks(todo, pass_size(batch, None, self.max_tokens)):
                for key, per in zip(
                    [k for k, _ in chunk], self._pass(batch, clean, [h for _, h in chunk])
                ):
                    self.num[key][per.index.numpy()] = per.num.double().numpy()

    def _pass(self, batch: EvalBatch, clean, sets: list[list[Head]]) -> list:
        """One stacked forward: copy ``i`` of the batch has ``sets[i]`` removed (the intact
        readout for an empty set)."""
        edits = [
            e
            for i, heads in enumerate(sets)
            for e in edits_for(
                self.kind,
                heads,
                batch,
                clean.z or None,
                self.means,
                replica=i,
                sink_v=clean.sink_v or None,
            )
        ]
        if not edits:
            return [batch_metrics(clean.readout, batch)[self.metric] for _ in sets]
        start = min(e.layer for e in edits)
        out = self.ablator.run(
            batch,
            edits,
            replicas=len(sets),
            start_layer=start,
            resid=clean.resid_pre[start] if start else None,
        )
        return [
            batch_metrics(out[i] if len(sets) > 1 else out, batch, clean.readout)[self.metric]
            for i in range(len(sets))
        ]

    def counts(self) -> list[int]:
        """The head counts of the own-order curve measured so far (role sets have text keys)."""
        return sorted(k for k in self.num if isinstance(k, int))

    def intervals(self, keys: list, n_boot: int, seed: int) -> Spans:
        """Per key, the 95% percentile bootstrap interval of its value (``ci_low``, ``ci_high``)
        and of its change from the intact model, key 0, under the same draws (``change_low``,
        ``change_high``), with the draws themselves."""
        weights = bootstrap_weights(len(self.den), n_boot, seed)
        boot, intact = self.values(keys, weights), self.values([0], weights)
        low, high = np.nanquantile(boot, [0.025, 0.975], axis=1)
        change_low, change_high = np.nanquantile(boot - intact, [0.025, 0.975], axis=1)
        return Spans(dict(zip(SPANS, (low, high, change_low, change_high))), boot)

    def values(self, keys: list, weights: np.ndarray | None = None) -> np.ndarray:
        """``[key]`` metric values, or ``[key, draw]`` under bootstrap ``weights`` ``[seq, draw]``."""
        num = np.stack([self.num[k] for k in keys])
        if weights is None:
            return num.sum(1) / self.den.sum()
        with np.errstate(invalid="ignore", divide="ignore"):
            return (num @ weights) / (self.den @ weights)


def metric_curve(
    removals: Removals,
    order: list[Head],
    step: float | None,
    n_boot: int,
    seed: int,
    progress: bool = True,
) -> tuple[pd.DataFrame, dict[str, dict[str, float]]]:
    """One metric's curve in its own ``order``: (pruning rows, tolerance -> removable share with CI)."""
    n = len(order)
    counts = [0] + step_sizes(n, step)
    with tqdm(desc=f"ablate: pruning {removals.metric}", unit="step", disable=not progress) as bar:
        removals.measure({k: order[:k] for k in counts})
        bar.update(len(counts))
        for tol in TOLERANCES:
            while True:
                counts = removals.counts()
                cut = removable_index(removals.values(counts), tol, removals.metric)
                if cut + 1 >= len(counts) or counts[cut + 1] - counts[cut] <= 1:
                    break
                mid = (counts[cut] + counts[cut + 1]) // 2
                removals.measure({mid: order[:mid]})
                bar.update(1)
    counts = removals.counts()
    spans = removals.intervals(counts, n_boot, seed)
    values = removals.values(counts)
    rows = [
        {
            "fraction_removed": k / n if n else 0.0,
            "heads_removed": k,
            "metric": removals.metric,
            "value": values[i],
            "last_removed": " ".join(f"L{la}H{he}" for la, he in order[counts[i - 1] : k])
            if i
            else np.nan,
            **{name: spans.columns[name][i] for name in SPANS},
            "removed_by": EFFECT_ORDER,
        }
        for i, k in enumerate(counts)
    ]
    shares = {
        f"{tol:.0%}": share_interval(counts, n, values, spans.boot, tol, removals.metric)
        for tol in TOLERANCES
    }
    return pd.DataFrame(rows), shares


def role_rows(
    removals: Removals, roles: dict[str, list[Head]], n_heads: int, n_boot: int, seed: int
) -> pd.DataFrame:
    """One row per role: the metric with every head of that role removed at once (held-out split)."""
    removals.measure({f"role:{r}": heads for r, heads in roles.items()})
    keys = [f"role:{r}" for r in roles]
    if not keys:
        return pd.DataFrame()
    spans = removals.intervals(keys, n_boot, seed)
    values = removals.values(keys)
    return pd.DataFrame(
        [
            {
                "fraction_removed": len(roles[r]) / n_heads,
                "heads_removed": len(roles[r]),
                "metric": removals.metric,
                "value": values[i],
                "last_removed": " ".join(f"L{la}H{he}" for la, he in roles[r]),
                **{name: spans.columns[name][i] for name in SPANS},
                "removed_by": keys[i],
            }
            for i, r in enumerate(roles)
        ]
    )

"""Streaming accumulation of feature sums, with a Poisson bootstrap over probe sequences.

Memory is fixed by (layers x heads x features x replicates), never by the corpus: each batch's
per-sequence sums are folded into running totals and dropped. Confidence intervals use the
Poisson bootstrap (each sequence gets an independent Poisson(1) weight in each replicate),
which resamples sequences without keeping them. A score is a ratio of sums (mass on the targets
over the head's non-sink mass, see interp.collect.features), so each replicate keeps both sums per head.
The raw share (``raw``) is a mean of per-sequence shares: its sum and the count of sequences (no interval).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import torch

from interp.collect.bootstrap import add_sums, sequence_weights
from interp.collect.features import (
    DIRECTIONS,
    MASS_FEATURES,
    STATIC_FEATURES,
    FeatureContext,
    Pattern,
    syntactic_name,
)
from interp.collect.syntax import arc_sink, best_rule_share, fixed_rule_counts, syntactic


class FeatureAccumulator:
    def __init__(
        self,
        n_layers: int,
        n_heads: int,
        relations: tuple[str, ...],
        n_bootstrap: int = 200,
        seed: int = 0,
    ):
        self.relations = tuple(relations)
        self.names = list(STATIC_FEATURES) + [
            syntactic_name(r, d) for r in self.relations for d in DIRECTIONS
        ]
        n_feat = len(self.names)
        self.n_layers, self.n_heads, self.n_static = n_layers, n_heads, len(STATIC_FEATURES)
        shape = (n_layers, n_feat, n_heads)
        # sums over eligible queries: mass on the targets, its uniform baseline, the counted
        # (non-sink) mass they are divided by, and the mass on the first position
        self.value, self.base, self.weight, self.sink = (
            torch.zeros(shape, dtype=torch.float64) for _ in range(4)
        )
        self.count = torch.zeros(n_feat, dtype=torch.float64)
        # mass features' raw shares (interp.collect.features), summed over the sequences each reads
        self.raw = torch.zeros((n_layers, self.n_static, n_heads), dtype=torch.float64)
        self.raw_sequences = torch.zeros(self.n_static, dtype=torch.float64)
        self.rep_value = torch.zeros((n_bootstrap,) + shape, dtype=torch.float64)
        self.rep_weight = torch.zeros((n_bootstrap,) + shape, dtype=torch.float64)
        self.rule_hits: dict[tuple[int, tuple], int] = {}  # fixed-rule syntactic baseline
        self.seed = seed
        self._weights: torch.Tensor | None = None
        self._layers_seen: set[int] = set()

    SUMS = (
        "value",
        "base",
        "weight",
        "sink",
        "count",
        "raw",
        "raw_sequences",
        "rep_value",
        "rep_weight",
    )

    def merge(self, other: FeatureAccumulator) -> None:
        """Add the sums of an accumulator fed other sequences (a shard of the corpus)."""
        add_sums(self, other, self.SUMS, ("rule_hits",))

    def start_batch(self, ctx: FeatureContext) -> None:
        """Take this batch's bootstrap weights (interp.collect.bootstrap: keyed by sequence) and add
        its (layer-independent) query and arc counts."""
        n = ctx.batch.tokens.shape[0]
        self._weights = sequence_weights(self.seed, ctx.batch.index, self.rep_value.shape[0])
        self._layers_seen = set()
        dummy = ctx.batch.valid.new_zeros((n, 1, 1, 1), dtype=torch.float32).expand(
            n, 1, *ctx.allowed.shape[1:]
        )
        static = [fn(dummy, ctx) for fn in MASS_FEATURES.values()]
        count = [s.count for s in static]
        self.raw_sequences += torch.stack([(s.rows > 0).double() for s in static], 1).sum(0)
        _, arcs = syntactic(dummy, ctx)
        self.count += torch.cat([torch.stack(count, 1), arcs], 1).sum(0)
        for key, c in fixed_rule_counts(ctx).items():
            self.rule_hits[key] = self.rule_hits.get(key, 0) + c

    def add_layer(self, layer: int, pattern: Pattern, ctx: FeatureContext) -> None:
        """Fold one layer's pattern [batch, head, q, k] into the totals."""
        if self._weights is None or layer in self._layers_seen:
            raise RuntimeError("call start_batch once before each batch's layers")
        self._layers_seen.add(layer)
        pattern = pattern.float()
        sums = [fn(pattern, ctx) for fn in MASS_FEATURES.values()]
        correct, arcs = syntactic(pattern, ctx)  # [batch, slot, head], [batch, slot]
        arcs = arcs[..., None].expand_as(correct)

        def per_seq(field: str, syntax: torch.Tensor) -> torch.Tensor:  # [batch, feature, head]
            return torch.cat([torch.stack([getattr(s, field) for s in sums], 1), syntax], 1)

        value, weight = per_seq("value", correct), per_seq("weight", arcs)
        self.value[layer] += value.sum(0)
        self.weight[layer] += weight.sum(0)
        self.base[layer] += per_seq("baseline", torch.zeros_like(correct)).sum(0)
        self.sink[layer] += per_seq("sink", arc_sink(pattern, ctx)).sum(0)
        self.rep_value[:, layer] += torch.einsum("rb,bfh->rfh", self._weights, value)
        self.rep_weight[:, layer] += torch.einsum("rb,bfh->rfh", self._weights, weight)
        self.raw[layer] += torch.stack([s.raw / s.rows.clamp(min=1)[:, None] for s in sums], 1).sum(
            0
        )

    def table(self) -> pd.DataFrame:
        """The tidy features table (see interp.pipeline.tables.FEATURES)."""
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter(
                "ignore", RuntimeWarning
            )  # all-NaN slices: features without positions
            count = self.count.numpy()
            value = _ratio(self.value, self.weight)
            baseline = _ratio(self.base, self.weight)
            baseline[:, self.n_static :] = best_rule_share(self.rule_hits, count[self.n_static :])[
                None, :, None
            ]
            sink = self.sink.numpy() / count[None, :, None]
            raw = np.full(value.shape, np.nan)
            raw[:, : self.n_static] = _ratio(
                self.raw, self.raw_sequences[None, :, None].expand_as(self.raw)
            )
            reps = self.replicates()
            lo, hi = (
                np.nanquantile(reps, [0.025, 0.975], axis=0)
                if np.isfinite(reps).any()
                else (value * np.nan,) * 2
            )
        layer, feat, head = np.meshgrid(
            np.arange(self.n_layers),
            np.arange(len(self.names)),
            np.arange(self.n_heads),
            indexing="ij",
        )
        frame = pd.DataFrame(
            {
                "layer": layer.ravel(),
                "head": head.ravel(),
                "feature": np.array(self.names)[feat.ravel()],
                "value": value.ravel(),
                "raw": raw.ravel(),
                "baseline": baseline.ravel(),
                "sink_mass": sink.ravel(),
                "ci_low": lo.ravel(),
                "ci_high": hi.ravel(),
                "n": np.broadcast_to(count[None, :, None], value.shape).ravel().astype(int),
            }
        )
        return frame.sort_values(["layer", "head", "feature"], kind="stable").reset_index(drop=True)

    def replicates(self) -> np.ndarray:
        """Bootstrap replicates of every value, float [replicate, layer, feature, head] (NaN where empty).

        The classifier re-labels heads on each replicate to measure how stable a label is.
        """
        return _ratio(self.rep_value, self.rep_weight)


def _ratio(num: torch.Tensor, den: torch.Tensor) -> np.ndarray:
    """num / den, NaN where den is 0 (no eligible query, or no mass off the sink)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        out = num.numpy() / den.numpy()
    out[~np.isfinite(out)] = np.nan
    return out

"""Streaming accumulation of feature sums, with a Poisson bootstrap over probe sequences.

Memory is fixed by (layers x heads x features x replicates), never by the corpus: each batch's
per-sequence sums are folded into running totals and dropped. Confidence intervals use the
Poisson bootstrap (each sequence gets an independent Poisson(1) weight in each replicate),
which resamples sequences without keeping them.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import torch

from interp.features import DIRECTIONS, MASS_FEATURES, STATIC_FEATURES, FeatureContext, best_rule_share, fixed_rule_counts, syntactic, syntactic_name


class FeatureAccumulator:
    def __init__(self, n_layers: int, n_heads: int, relations: tuple[str, ...], n_bootstrap: int = 200, seed: int = 0):
        self.relations = tuple(relations)
        self.names = list(STATIC_FEATURES) + [syntactic_name(r, d) for r in self.relations for d in DIRECTIONS]
        n_feat = len(self.names)
        self.n_layers, self.n_heads, self.n_static = n_layers, n_heads, len(STATIC_FEATURES)
        self.value = torch.zeros(n_layers, n_feat, n_heads, dtype=torch.float64)
        self.baseline = torch.zeros(n_feat, dtype=torch.float64)
        self.count = torch.zeros(n_feat, dtype=torch.float64)
        self.rep_value = torch.zeros(n_bootstrap, n_layers, n_feat, n_heads, dtype=torch.float64)
        self.rep_count = torch.zeros(n_bootstrap, n_feat, dtype=torch.float64)
        self.rule_hits: dict[tuple[int, tuple], int] = {}  # fixed-rule syntactic baseline
        self._gen = torch.Generator().manual_seed(seed)
        self._weights: torch.Tensor | None = None
        self._layers_seen: set[int] = set()

    def start_batch(self, ctx: FeatureContext) -> None:
        """Draw this batch's bootstrap weights and add its (layer-independent) baselines and counts."""
        n = ctx.batch.tokens.shape[0]
        self._weights = torch.poisson(torch.ones(self.rep_count.shape[0], n, dtype=torch.float64), generator=self._gen)
        self._layers_seen = set()
        base, count = [], []
        dummy = ctx.batch.valid.new_zeros((n, 1, 1, 1), dtype=torch.float32).expand(n, 1, *ctx.allowed.shape[1:])
        for fn in MASS_FEATURES.values():
            sums = fn(dummy, ctx)
            base.append(sums.baseline)
            count.append(sums.count)
        _, arcs = syntactic(dummy, ctx)
        count_b = torch.cat([torch.stack(count, 1), arcs], 1)  # [batch, feature]
        base_b = torch.cat([torch.stack(base, 1), torch.zeros_like(arcs)], 1)
        self.baseline += base_b.sum(0)
        self.count += count_b.sum(0)
        self.rep_count += self._weights @ count_b
        for key, c in fixed_rule_counts(ctx).items():
            self.rule_hits[key] = self.rule_hits.get(key, 0) + c

    def add_layer(self, layer: int, pattern: torch.Tensor, ctx: FeatureContext) -> None:
        """Fold one layer's pattern [batch, head, q, k] into the totals."""
        if self._weights is None or layer in self._layers_seen:
            raise RuntimeError("call start_batch once before each batch's layers")
        self._layers_seen.add(layer)
        pattern = pattern.float()
        values = [fn(pattern, ctx).value for fn in MASS_FEATURES.values()]  # each [batch, head]
        correct, _ = syntactic(pattern, ctx)  # [batch, slot, head]
        per_seq = torch.cat([torch.stack(values, 1), correct], 1)  # [batch, feature, head]
        self.value[layer] += per_seq.sum(0)
        self.rep_value[:, layer] += torch.einsum("rb,bfh->rfh", self._weights, per_seq)

    def table(self) -> pd.DataFrame:
        """The tidy features table (see interp.tables.FEATURES)."""
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices: features without positions
            count = self.count.numpy()
            value = self.value.numpy() / count[None, :, None]
            baseline = self.baseline.numpy() / count
            baseline[self.n_static:] = best_rule_share(self.rule_hits, self.count.numpy()[self.n_static:])
            reps = self.rep_value.numpy() / self.rep_count.numpy()[:, None, :, None]
            reps[~np.isfinite(reps)] = np.nan
            lo, hi = np.nanquantile(reps, [0.025, 0.975], axis=0) if np.isfinite(reps).any() else (value * np.nan,) * 2
        layer, feat, head = np.meshgrid(np.arange(self.n_layers), np.arange(len(self.names)), np.arange(self.n_heads), indexing="ij")
        frame = pd.DataFrame({
            "layer": layer.ravel(), "head": head.ravel(), "feature": np.array(self.names)[feat.ravel()],
            "value": value.ravel(), "baseline": np.broadcast_to(baseline[None, :, None], value.shape).ravel(),
            "ci_low": lo.ravel(), "ci_high": hi.ravel(), "n": np.broadcast_to(count[None, :, None], value.shape).ravel().astype(int),
        })
        return frame.sort_values(["layer", "head", "feature"], kind="stable").reset_index(drop=True)

    def replicates(self) -> np.ndarray:
        """Bootstrap replicates of every value, float [replicate, layer, feature, head] (NaN where empty).

        The classifier re-labels heads on each replicate to measure how stable a label is.
        """
        with np.errstate(invalid="ignore", divide="ignore"):
            reps = self.rep_value.numpy() / self.rep_count.numpy()[:, None, :, None]
        reps[~np.isfinite(reps)] = np.nan
        return reps

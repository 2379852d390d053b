"""Sink mass per probe suite: how much of its attention each head parks on the first position,
suite by suite.

A head's sink mass depends on what it reads: an induction head can sink most of its attention on
prose, where it has nothing to copy, and little on repeated random tokens, where it works. The
features table's ``sink_mass`` gives it per feature (over that feature's queries), the roles
table's ``sink_mass`` over every content query of the run (mostly prose and syntax sentences);
:class:`SuiteSinks` gives it per suite (``prose``, ``repeated``, ``syntax``, each ``user:<stem>``
corpus), over the suite's content queries (the ``first_token`` feature's queries): the ``sinks``
table, which the classify stage spreads into the roles table's ``sink_mass_<suite>`` columns.
Sums stream like the features' (interp.collect.accumulator).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from interp.collect.bootstrap import add_sums
from interp.collect.features import FeatureContext, Pattern, first_token


class SuiteSinks:
    """Mass on the first position summed per (layer, suite, head), and content queries per suite."""

    def __init__(self, n_layers: int, n_heads: int, suite_of: Sequence[str]):
        """``suite_of``: the suite of every probe sequence, in corpus order (``ProbeBatch.index``)."""
        self.suites = tuple(dict.fromkeys(suite_of))
        self._suite_of = torch.tensor([self.suites.index(s) for s in suite_of], dtype=torch.long)
        self.n_layers, self.n_heads = n_layers, n_heads
        self.mass = torch.zeros((n_layers, len(self.suites), n_heads), dtype=torch.float64)
        self.count = torch.zeros(len(self.suites), dtype=torch.float64)
        self._batch_suites = torch.zeros(0, dtype=torch.long)

    def merge(self, other: SuiteSinks) -> None:
        """Add the sums of an accumulator fed other sequences (a shard of the corpus)."""
        add_sums(self, other, ("mass", "count"))

    def start_batch(self, ctx: FeatureContext) -> None:
        """Note the batch's suites and add its content queries (the same for every layer)."""
        self._batch_suites = self._suite_of[ctx.batch.index]
        n = ctx.batch.tokens.shape[0]
        dummy = torch.zeros((n, 1) + tuple(ctx.allowed.shape[1:]))
        self.count.index_add_(0, self._batch_suites, first_token(dummy, ctx).count)

    def add_layer(self, layer: int, pattern: Pattern, ctx: FeatureContext) -> None:
        """Fold one layer's pattern [batch, head, q, k] into the sums."""
        self.mass[layer].index_add_(0, self._batch_suites, first_token(pattern.float(), ctx).sink)

    def table(self) -> pd.DataFrame:
        """The tidy ``sinks`` table (see interp.pipeline.tables): layer, head, suite, sink_mass, n."""
        count = self.count.numpy()
        with np.errstate(invalid="ignore", divide="ignore"):
            sink = (
                self.mass.numpy() / count[None, :, None]
            )  # NaN where a suite has no content query
        layer, suite, head = np.meshgrid(
            np.arange(self.n_layers),
            np.arange(len(self.suites)),
            np.arange(self.n_heads),
            indexing="ij",
        )
        frame = pd.DataFrame(
            {
                "layer": layer.ravel(),
                "head": head.ravel(),
                "suite": np.array(self.suites, dtype=object)[suite.ravel()],
                "sink_mass": sink.ravel(),
                "n": count[suite.ravel()].astype(int),
            }
        )
        return frame.sort_values(["layer", "head"], kind="stable").reset_index(drop=True)

"""The pruning curve: remove heads cumulatively, least important first, and watch the metrics.

Order: ascending effect on the primary metric (``delta``, oriented so positive = worse), from
the exact sweep where a head has one and from the estimator otherwise; heads with neither (an
encoder's heads outside ``top_k`` have no estimate for ``embedding_cosine``) go first, as
the ones the top-k selection judged least important. Heads whose removal *helps* (negative
delta) are therefore removed first.

Step 0 is the intact model; step ``s`` ablates the first ``s * step`` heads together (the
stage's primary ablation kind) and measures every metric on the corpus given: the ablate stage
gives the held-out half (split 1) of its evaluation corpus, not the one the order came from. Tiny
models get one head per step; models with more than 64 heads a grid of 5% of the heads.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from interp.ablation.corpus import EvalBatch, EvalCorpus
from interp.ablation.forward import CleanPass, Ablator
from interp.ablation.metrics import batch_metrics
from interp.ablation.sweep import chunks, pass_size
from interp.ablation.values import edits_for

Head = tuple[int, int]
FINE_GRID_MAX_HEADS = 64


def pruning_order(effects: pd.DataFrame, heads: list[Head], metric: str, kind: str) -> list[Head]:
    """``heads`` sorted least important first (see module docstring)."""
    score: dict[Head, float] = {}
    rows = effects[(effects["metric"] == metric) & (effects["ablation"] == kind)]
    for exact in (False, True):  # exact overwrites the estimate
        part = rows[(rows["method"] == "exact") == exact]
        score.update({(int(r.layer), int(r.head)): float(r.delta) for r in part.itertuples()})
    known = sorted((h for h in heads if h in score), key=lambda h: (score[h], h))
    return [h for h in heads if h not in score] + known


def step_sizes(n_heads: int, step: float | None) -> list[int]:
    """Cumulative head counts after each step, ending at ``n_heads``."""
    if step is None:
        size = 1 if n_heads <= FINE_GRID_MAX_HEADS else max(1, math.ceil(0.05 * n_heads))
    else:
        size = max(1, math.ceil(step * n_heads))
    return list(range(size, n_heads, size)) + [n_heads]


def pruning_curve(ablator: Ablator, corpus: EvalCorpus, order: list[Head], kind: str, means: torch.Tensor | None,
                  step: float | None = None, max_tokens: int | None = None, progress: bool = True) -> pd.DataFrame:
    """Rows of the ``pruning`` table: every metric after every cumulative removal step.

    The steps are independent forwards, so several run in one pass as stacked copies of the
    batch (as in the sweep), as many as fit in ``max_tokens`` padded tokens (None: all).
    """
    counts = [0] + step_sizes(len(order), step)
    num: dict[tuple[int, str], float] = {}
    den: dict[tuple[int, str], float] = {}
    with tqdm(total=len(corpus.batches) * len(counts), desc="ablate: pruning", unit="step",
              disable=not progress) as bar:
        for batch in corpus.batches:
            clean = ablator.clean(batch, keep_resid=True, keep_z=kind == "resample", keep_sink=kind == "sink")
            results = [(0, batch_metrics(clean.readout, batch))]
            bar.update(1)
            for chunk in chunks(list(enumerate(counts))[1:], pass_size(batch, None, max_tokens)):
                results += _removal_pass(ablator, batch, clean, chunk, order, kind, means)
                bar.update(len(chunk))
            for s, per in results:
                for metric, p in per.items():
                    num[s, metric] = num.get((s, metric), 0.0) + float(p.num.sum())
                    den[s, metric] = den.get((s, metric), 0.0) + float(p.den.sum())
    rows = []
    total = len(order)
    for (s, metric), n in sorted(num.items()):
        k = counts[s]
        removed = order[counts[s - 1]: k] if s else []
        rows.append({
            "fraction_removed": k / total if total else 0.0, "heads_removed": k, "metric": metric,
            "value": n / den[s, metric] if den[s, metric] else np.nan,
            "last_removed": " ".join(f"L{layer}H{head}" for layer, head in removed) if removed else np.nan,
        })
    return pd.DataFrame(rows)


def _removal_pass(ablator: Ablator, batch: EvalBatch, clean: CleanPass, steps: list[tuple[int, int]], order: list[Head],
                  kind: str, means: torch.Tensor | None) -> list[tuple[int, dict]]:
    """(step, metrics) for each (step, heads removed) in ``steps``, from one stacked forward:
    copy ``i`` of the batch has the first ``steps[i][1]`` heads of ``order`` ablated."""
    edits = [e for i, (_, k) in enumerate(steps)
             for e in edits_for(kind, order[:k], batch, clean.z or None, means, replica=i, sink_v=clean.sink_v or None)]
    start = min(e.layer for e in edits)
    out = ablator.run(batch, edits, replicas=len(steps), start_layer=start, resid=clean.resid_pre[start] if start else None)
    return [(s, batch_metrics(out[i] if len(steps) > 1 else out, batch, clean.readout)) for i, (s, _) in enumerate(steps)]

"""The exact sweep: every chosen head ablated alone, the model run, every metric read.

Loop order is batch-outer: one intact pass per batch caches each layer's ``hook_resid_pre``
(and ``hook_z`` when resampling), then every head of layer ``l`` reruns only blocks ``l..L-1``
from that cache (see :mod:`interp.ablate.forward`), so the corpus' residuals are never all
held at once. ``heads_per_pass > 1`` stacks that many copies of the batch, each ablating its
own head of the same layer: fewer, larger forwards amortize the per-forward cost (Python
hooks, streaming the weights); on the 2-core box all 9 heads of a SmolLM2 layer per pass
were 1.2-1.5x faster than one (two interleaved measurements, benchmarks/ablation_sweep.py).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from tqdm.auto import tqdm

from interp.ablate.batches import EvalBatch, EvalCorpus
from interp.ablate.forward import Ablator, CleanPass
from interp.ablate.metrics import batch_metrics
from interp.ablate.stats import SumStore
from interp.ablate.values import edits_for

Head = tuple[int, int]


def reuse_error(ablator: Ablator, batch: EvalBatch, clean: CleanPass) -> float:
    """Largest |readout difference| between the full forward (``clean``, its resid_pre kept) and
    restarting at the first, middle and last layer (inf where restarting fails; 0 for 1 layer)."""
    return ablator.restart_check(batch, clean).error


def exact_sweep(
    ablator: Ablator,
    corpus: EvalCorpus,
    store: SumStore,
    heads: list[Head],
    kinds: tuple[str, ...],
    means: torch.Tensor | None,
    heads_per_pass: int | None = 1,
    max_tokens: int | None = None,
    reuse: bool = True,
    progress: bool = True,
    done: Callable[[int], None] | None = None,
) -> bool:
    """Fill ``store`` with the intact and every (kind, head)'s per-sequence metric sums.

    ``heads_per_pass``: heads of one layer ablated in one forward (None: all of them), as
    stacked copies of the batch, never more copies than fit in ``max_tokens`` padded tokens.

    ``done(n)``: told of each ``n`` head passes as they finish, instead of a progress bar of its own.

    Returns whether layer reuse was used: it is switched off, with a warning, when the first
    batch's check (:meth:`Ablator.check_reuse`) finds that restarting differs from the full
    forward or fails on this architecture; a 1-layer model has nothing to reuse.
    """
    by_layer: dict[int, list[int]] = {}
    for layer, head in sorted(heads):
        by_layer.setdefault(layer, []).append(head)
    total = len(corpus.batches) * len(heads) * len(kinds)
    own = done is None and progress
    with tqdm(total=total, desc="ablate: exact", unit="head", disable=not own) as bar:
        step = done or bar.update
        for i, batch in enumerate(corpus.batches):
            clean = ablator.clean(
                batch, keep_resid=reuse, keep_z="resample" in kinds, keep_sink="sink" in kinds
            )
            store.add_base(batch_metrics(clean.readout, batch))
            if i == 0 and reuse:
                reuse = ablator.check_reuse(batch, clean)
            size = pass_size(batch, heads_per_pass, max_tokens)
            for layer, layer_heads in by_layer.items():
                for kind in kinds:
                    for chunk in chunks(layer_heads, size):
                        _run_chunk(ablator, batch, clean, store, kind, layer, chunk, means, reuse)
                        step(len(chunk))
    return reuse


def pass_size(batch: EvalBatch, heads_per_pass: int | None, max_tokens: int | None) -> int:
    """Copies of the batch per forward: as asked, within the token budget (which also bounds
    the logits a pass returns), at least one."""
    size = heads_per_pass or 10**9
    if max_tokens is not None:
        size = min(size, max(1, max_tokens // batch.tokens.numel()))
    return max(1, size)


def chunks(items: list, size: int) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _run_chunk(
    ablator: Ablator,
    batch: EvalBatch,
    clean: CleanPass,
    store: SumStore,
    kind: str,
    layer: int,
    chunk: list[int],
    means: torch.Tensor | None,
    reuse: bool,
) -> None:
    edits = [
        e
        for i, head in enumerate(chunk)
        for e in edits_for(
            kind,
            [(layer, head)],
            batch,
            clean.z or None,
            means,
            replica=i,
            sink_v=clean.sink_v or None,
        )
    ]
    start = layer if reuse else 0
    out = ablator.run(
        batch,
        edits,
        replicas=len(chunk),
        start_layer=start,
        resid=clean.resid_pre[layer] if start else None,
    )
    for i, head in enumerate(chunk):
        readout = out[i] if len(chunk) > 1 else out
        store.add((kind, layer, head), batch_metrics(readout, batch, clean.readout))

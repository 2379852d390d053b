"""Effect metrics: pure functions from a pass's readout to per-sequence sums.

Every metric is a ratio ``sum(num) / sum(den)`` over its family's sequences, so that the
bootstrap can resample sequences and recompute it exactly: for a loss, ``num`` is a sequence's
summed next-token loss and ``den`` its number of scored tokens (a token-weighted mean); for the
others ``den`` is 1 (a mean over sequences). ``den`` never depends on the ablation.

Causal LMs (logits read at the scored rows only):

- ``loss_prose`` / ``loss_repeated``: cross-entropy of the next token, in nats.
- ``sv_logit_diff``: logit(correct verb form) - logit(wrong form) before the verb.
- ``loss_corpus`` (``--eval-corpus``): the next-token loss of the user's own sequences.
- a user task (:mod:`interp.ablate.tasks`): its own function of the logits at its positions, and
  of its per-sequence fields, one value per row.

Encoders (the MLM head of a sentence-embedding model is untrained, so logits are never used;
the sentence embedding is the mean of the final hidden states over valid tokens):

- ``embedding_cosine``: 1 - cos(embedding with the ablation, intact embedding); 0 when intact.
  Its gradient at the intact model is zero (a minimum), so attribution cannot estimate it.
- ``retrieval_margin``: can the embedding still find a sentence from a damaged copy of itself?
  For sentence ``i`` and its word-deleted view ``i'``, cos(e_i, e_i') minus the mean of
  cos(e_i, e_j') over the other sentences ``j`` of the batch. It needs no reference to the
  intact model (a model that maps everything to one point scores 0, not a perfect score), its
  gradient is informative, and it asks what sentence embeddings are for: telling sentences
  apart by content, robustly to surface damage.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from interp.ablate.catalogue import ENCODER, ENCODER_METRICS, SV_LOGIT_DIFF
from interp.ablate.evaluation import EvalBatch


@dataclass
class PerSeq:
    """One metric's contribution from one batch: ``num``/``den`` for sequences ``index``."""

    index: torch.Tensor  # long [seq]: EvalItem.index within the metric's family
    num: torch.Tensor  # float [seq]
    den: torch.Tensor  # float [seq]


def family_metrics(family: str) -> tuple[str, ...]:
    return ENCODER_METRICS if family == ENCODER else (family,)


def metric_sizes(sizes: dict[str, int]) -> dict[str, int]:
    """Corpus family sizes -> metric name -> number of sequences it is measured on."""
    return {m: n for family, n in sizes.items() for m in family_metrics(family)}


def batch_metrics(
    readout: torch.Tensor, batch: EvalBatch, clean: torch.Tensor | None = None
) -> dict[str, PerSeq]:
    """The metrics a batch carries, from one pass's readout (``clean``: the intact readout,
    which ``embedding_cosine`` compares against; the readout itself when it is the intact one)."""
    if batch.family == ENCODER:
        return encoder_metrics(readout, batch, readout if clean is None else clean)
    return {batch.family: causal_metric(readout, batch)}


def causal_metric(logits: torch.Tensor, batch: EvalBatch) -> PerSeq:
    """Per-sequence sums of a causal metric from logits ``[row, vocab]`` at the batch's rows."""
    logits = _at_least_fp32(logits)
    rows = torch.arange(len(batch.row_target), device=logits.device)
    target = logits[rows, batch.row_target.to(logits.device)]
    if batch.score is not None:  # a user task: higher = worse, one value per scored row
        fields = {name: values.to(logits.device) for name, values in batch.row_fields.items()}
        value = batch.score(logits, batch.row_target.to(logits.device), **fields).to(logits.dtype)
    elif batch.family == SV_LOGIT_DIFF:
        if batch.row_wrong is None:
            raise ValueError("an agreement batch carries each row's wrong verb")
        value = target - logits[rows, batch.row_wrong.to(logits.device)]
    else:
        value = torch.logsumexp(logits, dim=-1) - target
    where = batch.row_batch.to(logits.device)
    num = torch.zeros(len(batch), device=logits.device, dtype=value.dtype).index_add(
        0, where, value
    )
    den = torch.zeros(len(batch), device=logits.device, dtype=value.dtype).index_add(
        0, where, torch.ones_like(value)
    )
    return PerSeq(batch.index, num, den)


def mean_pool(hidden: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Sentence embeddings ``[batch, d_model]``: mean of the final hidden states over valid tokens."""
    hidden = _at_least_fp32(hidden)
    mask = valid.to(hidden.device, hidden.dtype).unsqueeze(-1)
    return (hidden * mask).sum(1) / mask.sum(1)


def _at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    """bf16 / fp16 readouts are summed in fp32; fp64 (tests) stays fp64."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def encoder_metrics(
    hidden: torch.Tensor, batch: EvalBatch, clean: torch.Tensor
) -> dict[str, PerSeq]:
    sent, view = ~batch.is_view, batch.is_view
    emb = mean_pool(hidden, batch.valid)
    ref = mean_pool(clean, batch.valid)
    a, b = emb[sent.to(emb.device)], emb[view.to(emb.device)]
    ones = torch.ones(len(a))
    if clean is hidden:  # the intact pass itself: exactly 0, not 1 - cos(x, x) rounding
        cosine = torch.zeros(len(a), device=emb.device)
    else:
        cosine = 1 - F.cosine_similarity(a, ref[sent.to(emb.device)], dim=-1)
    sim = F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T  # [sentence, view]
    n = len(a)
    others = (sim.sum(1) - sim.diagonal()) / max(n - 1, 1)
    margin = sim.diagonal() - (others if n > 1 else 0)
    index = batch.index[sent]
    return {
        "embedding_cosine": PerSeq(index, cosine, ones),
        "retrieval_margin": PerSeq(index, margin, ones),
    }

"""Effect metrics: pure functions from a pass's readout to per-sequence sums.

Every metric is a ratio ``sum(num) / sum(den)`` over its eval set's sequences, so that the
bootstrap can resample sequences and recompute it exactly: for a loss, ``num`` is a sequence's
summed next-token loss and ``den`` its number of scored tokens (a token-weighted mean); for the
others ``den`` is 1 (a mean over sequences). ``den`` never depends on the ablation.

Causal LMs (logits read at the scored rows only):

- ``loss_prose`` / ``loss_repeated``: cross-entropy of the next token, in nats.
- ``kl_prose``: the KL divergence of the ablated model's next-token distribution from the
  intact model's, ``sum p_intact (log p_intact - log p_ablated)``, at the same positions as
  ``loss_prose``, in nats (ACDC's metric, Conmy et al. 2023): how much of the model's behaviour
  is kept. It is 0 for the intact model and positive otherwise, so, unlike a loss, it cannot
  improve when a damaged model becomes confident in another way.
- ``sv_logit_diff``: logit(correct verb form) - logit(wrong form) before the verb.
- ``sv_prob``: the probability of the correct form between the two, ``sigmoid(sv_logit_diff)``
  per sentence: bounded, so a model cannot gain by growing the difference without limit.
- ``loss_corpus`` / ``kl_corpus`` (``--eval-corpus``): the same two on the user's own sequences.
- a user task (:mod:`interp.ablate.tasks`): its own function of the logits at its positions, and
  of its per-sequence fields, one value per row.

Encoders (the MLM head of a sentence-embedding model is untrained, so logits are never used;
the sentence embedding is the mean of the final hidden states over valid tokens):

- ``embedding_cosine``: 1 - cos(embedding with the ablation, intact embedding); 0 when intact.
  Its gradient at the intact model is zero (a minimum), so attribution cannot estimate it.
- ``retrieval_margin``: can the embedding still find a sentence from a damaged copy of itself?
  For sentence ``i`` and its word-deleted view ``i'``, cos(e_i, e_i') minus the mean of
  cos(e_i, e_j') over the other sentences ``j`` of its retrieval group (a fixed group of
  ``interp.ablate.evaluation.RETRIEVAL_GROUP`` sentences, so that neither the pass size nor the
  round changes who the distractors are; none: 0). It needs no reference to the
  intact model (a model that maps everything to one point scores 0, not a perfect score), its
  gradient is informative, and it asks what sentence embeddings are for: telling sentences
  apart by content, robustly to surface damage.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from interp.ablate.batches import EvalBatch
from interp.ablate.catalogue import ENCODER, KL_OF, PROB_OF, SV_LOGIT_DIFF, eval_set_metrics

__all__ = ["PerSeq", "batch_metrics", "eval_set_metrics", "metric_sizes"]


@dataclass
class PerSeq:
    """One metric's contribution from one batch: ``num``/``den`` for sequences ``index``."""

    index: torch.Tensor  # long [seq]: EvalItem.index within the metric's eval set
    num: torch.Tensor  # float [seq]
    den: torch.Tensor  # float [seq]


def metric_sizes(sizes: dict[str, int]) -> dict[str, int]:
    """Eval-set sizes -> metric name -> number of sequences it is measured on."""
    return {m: n for eval_set, n in sizes.items() for m in eval_set_metrics(eval_set)}


def batch_metrics(
    readout: torch.Tensor, batch: EvalBatch, clean: torch.Tensor | None = None
) -> dict[str, PerSeq]:
    """The metrics a batch carries, from one pass's readout (``clean``: the intact readout,
    which ``embedding_cosine`` compares against; the readout itself when it is the intact one)."""
    if batch.eval_set == ENCODER:
        return encoder_metrics(readout, batch, readout if clean is None else clean)
    value = causal_values(readout, batch)
    out = {batch.eval_set: _per_seq(value, batch)}
    if batch.eval_set in KL_OF:
        out[KL_OF[batch.eval_set]] = kl_metric(readout, batch, clean)
    if batch.eval_set in PROB_OF:  # each row's logit difference -> P(correct | one of the two)
        out[PROB_OF[batch.eval_set]] = _per_seq(torch.sigmoid(value), batch)
    return out


def kl_metric(logits: torch.Tensor, batch: EvalBatch, clean: torch.Tensor | None) -> PerSeq:
    """Per-sequence sums of ``KL(intact || this pass)`` over the batch's rows (0 for the intact
    pass itself: ``clean`` None). Each row's KL is clamped at 0: a pass that leaves a row's
    distribution as it was rounds to +-3e-7 in float32, and a divergence below zero would give
    a head that changes nothing a negative effect, and an interval below zero in the report."""
    where = batch.row_batch.to(logits.device)
    dtype = _at_least_fp32(logits).dtype
    den = torch.zeros(len(batch), device=logits.device, dtype=dtype).index_add(
        0, where, torch.ones(len(where), device=logits.device, dtype=dtype)
    )
    if clean is None:
        return PerSeq(batch.index, torch.zeros_like(den), den)
    log_p = F.log_softmax(_at_least_fp32(clean).to(logits.device), dim=-1)
    log_q = F.log_softmax(_at_least_fp32(logits), dim=-1)
    value = (log_p.exp() * (log_p - log_q)).sum(-1).clamp_min(0)
    num = torch.zeros_like(den).index_add(0, where, value.to(dtype))
    return PerSeq(batch.index, num, den)


def causal_metric(logits: torch.Tensor, batch: EvalBatch) -> PerSeq:
    """Per-sequence sums of a causal metric from logits ``[row, vocab]`` at the batch's rows."""
    return _per_seq(causal_values(logits, batch), batch)


def causal_values(logits: torch.Tensor, batch: EvalBatch) -> torch.Tensor:
    """A causal metric's value at each of the batch's rows, from logits ``[row, vocab]``."""
    logits = _at_least_fp32(logits)
    rows = torch.arange(len(batch.row_target), device=logits.device)
    target = logits[rows, batch.row_target.to(logits.device)]
    if batch.score is not None:  # a user task: higher = worse, one value per scored row
        fields = {name: values.to(logits.device) for name, values in batch.row_fields.items()}
        value = batch.score(logits, batch.row_target.to(logits.device), **fields).to(logits.dtype)
    elif batch.eval_set == SV_LOGIT_DIFF:
        if batch.row_wrong is None:
            raise ValueError("an agreement batch carries each row's wrong verb")
        value = target - logits[rows, batch.row_wrong.to(logits.device)]
    else:
        value = torch.logsumexp(logits, dim=-1) - target
    return value


def _per_seq(value: torch.Tensor, batch: EvalBatch) -> PerSeq:
    """Per-sequence sums of per-row ``value`` and of the rows' count."""
    where = batch.row_batch.to(value.device)
    num = torch.zeros(len(batch), device=value.device, dtype=value.dtype).index_add(0, where, value)
    den = torch.zeros(len(batch), device=value.device, dtype=value.dtype).index_add(
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
    group = batch.group.to(emb.device)
    mine, theirs = group[sent.to(emb.device)], group[view.to(emb.device)]
    same = (mine[:, None] == theirs[None, :]).to(sim.dtype)
    # views are in their sentences' order: the diagonal is each one's own
    n_others = same.sum(1) - 1
    others = ((sim * same).sum(1) - sim.diagonal()) / n_others.clamp(min=1)
    margin = sim.diagonal() - others
    index = batch.index[sent]
    return {
        "embedding_cosine": PerSeq(index, cosine, ones),
        "retrieval_margin": PerSeq(index, margin, ones),
    }

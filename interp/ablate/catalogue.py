"""What the ablate stage measures, by name: ablation kinds, metrics and estimators.

Torch-free on purpose: configs validate against these names and the report reads a metric's
orientation without loading the modelling stack. The definitions live in
:mod:`interp.ablate.values` (kinds) and :mod:`interp.ablate.metrics` (metrics).
"""

from __future__ import annotations

from typing import Literal, get_args

Kind = Literal["zero", "mean", "resample"]
KINDS: tuple[Kind, ...] = get_args(Kind)

# Estimators of every head's effect (the ``estimator`` of their effects rows), the default first:
# the one that agreed best with exact ablation on the packaged models (benchmarks/estimators.py).
# attribution: first-order attribution patching (interp.ablate.attribution);
# integrated: integrated gradients over the clean -> ablated path (interp.ablate.integrated);
# atp_star: AtP*, attribution with the QK fix and GradDrop (interp.ablate.atp_star).
Estimator = Literal["attribution", "integrated", "atp_star"]
ESTIMATORS: tuple[Estimator, ...] = get_args(Estimator)
# The estimators --top-k ranks heads by besides the stage's own (attribution first: it gives the means)
SECOND_OPINIONS: tuple[Estimator, ...] = ("attribution", "integrated")

# Causal-LM eval sets: each names its evaluation sequences and its first metric (an eval set
# of prose or of the user's sequences also carries a KL metric, agreement its probability).
LOSS_PROSE, LOSS_REPEATED, SV_LOGIT_DIFF = "loss_prose", "loss_repeated", "sv_logit_diff"
# Behaviour kept: the KL divergence of the ablated model's next-token distribution from the intact
# model's at every scored position (bounded below by 0, which only the intact model reaches, so a
# broken model cannot score better), and the probability of the right verb form between the two.
KL_PROSE, KL_CORPUS, SV_PROB = "kl_prose", "kl_corpus", "sv_prob"
ENCODER = "encoder"  # the eval set of encoder batches; its metrics are ENCODER_METRICS
CAUSAL_METRICS = (LOSS_PROSE, KL_PROSE, LOSS_REPEATED, SV_LOGIT_DIFF, SV_PROB)
ENCODER_METRICS = ("embedding_cosine", "retrieval_margin")
# Next-token loss on the user's own sequences (--eval-corpus; causal LMs only: an encoder reads
# them as the sentences of its ENCODER_METRICS instead of the shipped prose).
CORPUS = "loss_corpus"
METRICS = CAUSAL_METRICS + (CORPUS, KL_CORPUS) + ENCODER_METRICS
# The metrics each eval set's sequences are read for (a user task's eval set: its own one).
EVAL_SET_METRICS = {
    LOSS_PROSE: (LOSS_PROSE, KL_PROSE),
    LOSS_REPEATED: (LOSS_REPEATED,),
    SV_LOGIT_DIFF: (SV_LOGIT_DIFF, SV_PROB),
    CORPUS: (CORPUS, KL_CORPUS),
    ENCODER: ENCODER_METRICS,
}
KL_OF = {LOSS_PROSE: KL_PROSE, CORPUS: KL_CORPUS}  # eval set -> its KL metric
PROB_OF = {SV_LOGIT_DIFF: SV_PROB}  # eval set -> the probability read from its logit difference
# The KL metrics compare with the intact model (as embedding_cosine does): the removable share
# (how much can be removed) reads the first of them the run measured.
BEHAVIOUR_METRICS = (KL_CORPUS, KL_PROSE, "embedding_cosine")


def eval_set_metrics(eval_set: str) -> tuple[str, ...]:
    """The metrics an eval set's sequences are read for."""
    return EVAL_SET_METRICS.get(eval_set, (eval_set,))


# +1: the metric grows when the model gets worse (a loss); -1: it shrinks (a margin).
ORIENTATION = {
    LOSS_PROSE: 1,
    KL_PROSE: 1,
    LOSS_REPEATED: 1,
    SV_LOGIT_DIFF: -1,
    SV_PROB: -1,
    CORPUS: 1,
    KL_CORPUS: 1,
    "embedding_cosine": 1,
    "retrieval_margin": -1,
}
# Which metrics have a useful gradient at the intact model (attribution can estimate them). The KL
# metrics have none (the intact model is their minimum); sv_prob is read beside sv_logit_diff.
HAS_GRADIENT = {
    LOSS_PROSE: True,
    KL_PROSE: False,
    LOSS_REPEATED: True,
    SV_LOGIT_DIFF: True,
    SV_PROB: False,
    CORPUS: True,
    KL_CORPUS: False,
    "embedding_cosine": False,
    "retrieval_margin": True,
}

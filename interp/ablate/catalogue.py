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
# integrated: integrated gradients over the clean -> ablated path (interp.ablate.integrated).
Estimator = Literal["attribution", "integrated"]
ESTIMATORS: tuple[Estimator, ...] = get_args(Estimator)

# Causal-LM metrics: each also names its own evaluation sequences (batched apart).
LOSS_PROSE, LOSS_REPEATED, SV_LOGIT_DIFF = "loss_prose", "loss_repeated", "sv_logit_diff"
ENCODER = "encoder"  # the encoder's evaluation sequences; both ENCODER_METRICS read them
CAUSAL_METRICS = (LOSS_PROSE, LOSS_REPEATED, SV_LOGIT_DIFF)
ENCODER_METRICS = ("embedding_cosine", "retrieval_margin")
# Next-token loss on the user's own sequences (--eval-corpus; causal LMs only: an encoder reads
# them as the sentences of its ENCODER_METRICS instead of the shipped prose).
CORPUS = "loss_corpus"
METRICS = CAUSAL_METRICS + (CORPUS,) + ENCODER_METRICS

# +1: the metric grows when the model gets worse (a loss); -1: it shrinks (a margin).
ORIENTATION = {
    LOSS_PROSE: 1,
    LOSS_REPEATED: 1,
    SV_LOGIT_DIFF: -1,
    CORPUS: 1,
    "embedding_cosine": 1,
    "retrieval_margin": -1,
}
# Which metrics have a useful gradient at the intact model (attribution can estimate them).
HAS_GRADIENT = {
    LOSS_PROSE: True,
    LOSS_REPEATED: True,
    SV_LOGIT_DIFF: True,
    CORPUS: True,
    "embedding_cosine": False,
    "retrieval_margin": True,
}

"""What the ablate stage measures, by name: ablation kinds, metric families and metrics.

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

# Causal-LM metric families: each names its evaluation sequences and the one metric read on them.
PROSE, REPEATED, SV = "loss_prose", "loss_repeated", "sv_logit_diff"
ENCODER = "encoder"  # the family of encoder batches; its metrics are ENCODER_METRICS
CAUSAL_METRICS = (PROSE, REPEATED, SV)
ENCODER_METRICS = ("embedding_cosine", "retrieval_margin")
# Next-token loss on the user's own sequences (--eval-corpus; causal LMs only: an encoder reads
# them as the sentences of its ENCODER_METRICS instead of the shipped prose).
CORPUS = "loss_corpus"
METRICS = CAUSAL_METRICS + (CORPUS,) + ENCODER_METRICS

# +1: the metric grows when the model gets worse (a loss); -1: it shrinks (a margin).
ORIENTATION = {
    PROSE: 1,
    REPEATED: 1,
    SV: -1,
    CORPUS: 1,
    "embedding_cosine": 1,
    "retrieval_margin": -1,
}
# Which metrics have a useful gradient at the intact model (attribution can estimate them).
HAS_GRADIENT = {
    PROSE: True,
    REPEATED: True,
    SV: True,
    CORPUS: True,
    "embedding_cosine": False,
    "retrieval_margin": True,
}

"""The models the experiments train, and how they read a model's heads with the toolkit's stages.

One recipe for the grammar language (experiments 1, 4, 5 and 6 share it, so that a model trained
by one is loaded from the cache by the next): a 2-layer attention-only GPT-2, d_model 64, the
sinusoid-started positions and the 0.06 init that let the toy's induction heads form in minutes,
trained on :class:`interp.synthetic.tasks.grammar.GrammarTask`. Quick mode shrinks the training,
never the code path.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from interp import CollectConfig
from interp.synthetic.cache import Job
from interp.synthetic.tasks.grammar import GrammarTask
from interp.synthetic.train import Architecture, Training

GRAMMAR_ARCH = Architecture(
    n_layers=2, n_heads=4, d_model=64, n_ctx=72, attn_only=True, init_std=0.06, positions="sinusoid"
)
FULL_STEPS, QUICK_STEPS = 3000, 300
# The probes every grammar model is classified on: repeated random words and grammar sentences
# (the shipped prose is out of the model's vocabulary, so it is left out).
PROBES = CollectConfig(suites=("repeated", "syntax"), n_repeated=48, n_syntax=300, n_bootstrap=50)
QUICK_PROBES = CollectConfig(
    suites=("repeated", "syntax"), n_repeated=16, n_syntax=60, n_bootstrap=10
)


def grammar_training(
    quick: bool, seed: int, checkpoints: bool = True, steps: int | None = None
) -> Training:
    """The grammar recipe's training; ``checkpoints``: every 250 steps (quick: three)."""
    steps = steps or (QUICK_STEPS if quick else FULL_STEPS)
    kept = tuple(range(0, steps, max(1, steps // 2 if quick else 250))) if checkpoints else ()
    return Training(steps=steps, batch_size=32, lr=3e-3, seed=seed, checkpoints=kept)


def grammar_job(quick: bool, seed: int, **arch: object) -> Job:
    """A grammar model of the shared recipe (``arch`` overrides fields of GRAMMAR_ARCH)."""
    return Job(
        GrammarTask(), dataclasses.replace(GRAMMAR_ARCH, **arch), grammar_training(quick, seed)
    )


def probes(quick: bool) -> CollectConfig:
    return QUICK_PROBES if quick else PROBES


def read_heads(model: object, quick: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The toolkit's collect and classify stages on one model: (roles table, per-head lifts and ``sink_mass``)."""
    from interp.classify.matrix import SINK_MASS, head_frames
    from interp.classify.stage import classify
    from interp.collect.stage import collect

    result = collect(model, probes(quick), progress=False)
    roles = classify(result.features, result.replicates, result.names).roles
    matrix, sinks = head_frames(result.features)
    return roles, matrix.join(sinks[SINK_MASS]).reset_index()

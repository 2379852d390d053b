"""Ablation on SmolLM2: the heads the classifier labels induction and previous token carry the
repeated-token loss.

Each group (the heads of ``smollm2_roles`` with that primary role) is zero-ablated together and
compared with the mean over 10 random groups of the same size drawn from the heads with
neither label (:func:`interp.ablate.groups.role_vs_random`).
"""

from __future__ import annotations

import pytest
import torch

from interp.ablate.catalogue import LOSS_REPEATED
from interp.ablate.evaluation import build_corpus
from interp.ablate.forward import Ablator
from interp.ablate.groups import role_vs_random
from interp.ablate.sweep import reuse_error

pytestmark = pytest.mark.slow

NAMED = ("induction", "previous_token")


@pytest.fixture(scope="module")
def setting(smollm2):
    old = torch.get_num_threads()
    torch.set_num_threads(1)  # a shared 2-core box: see interp.executors.threads
    corpus = build_corpus(
        smollm2,
        n_prose=0,
        n_repeated=8,
        repeated_lengths=(12,),
        n_syntax=0,
        seed=0,
        max_tokens=4096,
    )
    yield Ablator(smollm2), corpus
    torch.set_num_threads(old)


def test_restarting_at_a_layer_is_exact_on_smollm2(setting):
    ablator, corpus = setting
    batch = corpus.batches[0]
    assert reuse_error(ablator, batch, ablator.clean(batch, keep_resid=True)) == 0.0


@pytest.mark.parametrize("role", NAMED)
def test_labelled_heads_raise_repeated_loss_5x_more_than_random_heads(setting, smollm2_roles, role):
    ablator, corpus = setting
    others = tuple(r for r in NAMED if r != role)
    check = role_vs_random(
        ablator, corpus, smollm2_roles, role, LOSS_REPEATED, exclude=others, n_draws=10
    )
    assert check.rise > 0
    assert check.ratio >= 5, (
        f"{role} {check.heads}: +{check.rise:.3f} nats vs random +{check.random_mean:.3f}"
    )

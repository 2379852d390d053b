"""Ablation on SmolLM2: the named induction and previous-token heads carry repeated-token loss.

The heads are the ones DESIGN.md names (induction L18H6, L17H3, L17H4; previous token L16H0,
L11H1); once the classifier labels them, the lead swaps in the classifier's heads. Each group
is ablated together (zero) and compared with the mean over 10 random groups of the same size
drawn from the other heads.
"""

from __future__ import annotations

import random

import pytest
import torch

from interp.ablation.corpus import REPEATED, build_corpus
from interp.ablation.forward import Runner
from interp.ablation.metrics import batch_metrics
from interp.ablation.sweep import reuse_error
from interp.ablation.values import edits_for

pytestmark = pytest.mark.slow

INDUCTION = [(18, 6), (17, 3), (17, 4)]
PREVIOUS_TOKEN = [(16, 0), (11, 1)]
N_DRAWS = 10


@pytest.fixture(scope="module")
def setting(smollm2):
    old = torch.get_num_threads()
    torch.set_num_threads(1)  # a shared 2-core box: see interp.ablate.stage_threads
    corpus = build_corpus(smollm2, n_prose=0, n_repeated=8, repeated_lengths=(12,), n_syntax=0, seed=0,
                          max_tokens=4096)
    runner = Runner(smollm2)
    cleans = [runner.clean(b, keep_resid=True) for b in corpus.batches]
    yield smollm2, corpus, runner, cleans
    torch.set_num_threads(old)


def loss_repeated(setting, heads: list[tuple[int, int]]) -> float:
    """loss_repeated with ``heads`` zero-ablated together (rerun from the lowest one's layer)."""
    _, corpus, runner, cleans = setting
    num = den = 0.0
    for batch, clean in zip(corpus.batches, cleans):
        if heads:
            start = min(layer for layer, _ in heads)
            out = runner.run(batch, edits_for("zero", heads, batch, None, None), start_layer=start,
                             resid=clean.resid_pre[start] if start else None)
        else:
            out = clean.readout
        per = batch_metrics(out, batch)[REPEATED]
        num, den = num + float(per.num.sum()), den + float(per.den.sum())
    return num / den


def random_rise(setting, size: int, base: float) -> float:
    model = setting[0]
    others = [(l, h) for l in range(model.n_layers) for h in range(model.n_heads) if (l, h) not in INDUCTION + PREVIOUS_TOKEN]
    rng = random.Random(0)
    return sum(loss_repeated(setting, rng.sample(others, size)) - base for _ in range(N_DRAWS)) / N_DRAWS


def test_restarting_at_a_layer_is_exact_on_smollm2(setting):
    _, corpus, runner, cleans = setting
    assert reuse_error(runner, corpus.batches[0], cleans[0]) == 0.0


@pytest.mark.parametrize("name,heads", [("induction", INDUCTION), ("previous_token", PREVIOUS_TOKEN)])
def test_named_heads_raise_repeated_loss_5x_more_than_random_heads(setting, name, heads):
    base = loss_repeated(setting, [])
    rise = loss_repeated(setting, heads) - base
    random_mean = random_rise(setting, len(heads), base)
    assert rise > 0
    assert rise >= 5 * max(random_mean, 1e-6), f"{name}: +{rise:.3f} nats vs random +{random_mean:.3f}"

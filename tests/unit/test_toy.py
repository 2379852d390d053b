"""The toy attention-only model: data, cache round trip, and (slow) that induction heads emerge."""

from __future__ import annotations

import math

import pytest
import torch

from interp import CollectConfig
from interp.collect.stage import collect
from interp.model.load import load_model
from interp.synthetic.toy import SEQ_LEN, VOCAB, copy_batch, half_losses, repeated_batch, toy_cached


def test_repeated_batch_layout():
    pool = torch.arange(4, 4 + len(VOCAB))
    tokens = repeated_batch(3, 5, pool, bos=0, gen=torch.Generator().manual_seed(0))
    assert tokens.shape == (3, 11)
    assert (tokens[:, 0] == 0).all()
    assert torch.equal(tokens[:, 1:6], tokens[:, 6:])
    assert ((tokens[:, 1:] >= 4) & (tokens[:, 1:] < 4 + len(VOCAB))).all()


def test_copy_batch_repeats_an_earlier_stretch():
    tokens, copied = copy_batch(
        16, torch.arange(4, 4 + len(VOCAB)), bos=0, gen=torch.Generator().manual_seed(0)
    )
    assert tokens.shape == copied.shape == (16, 1 + SEQ_LEN)
    assert (tokens[:, 0] == 0).all() and not copied[:, :2].any()
    starts = set()
    for seq, mask in zip(tokens, copied):
        first = int(mask.nonzero()[0])  # the repeat's second token
        assert mask[first:].all()
        # some distance explains every copied token, and its predecessor
        assert any(
            torch.equal(seq[first - 1 :], seq[first - 1 - d : len(seq) - d])
            for d in range(1, first)
        )
        starts.add(first)
    assert len(starts) > 3  # the repeat starts in different places


def test_half_losses_split():
    tokens = torch.tensor([[0, 5, 6, 7, 5, 6, 7]])
    logits = torch.zeros(1, 7, 10)
    logits[0, torch.arange(3, 6), tokens[0, 4:]] = (
        100.0  # perfect on the repeat after its first token
    )
    first, rep = half_losses(logits, tokens, half=3)
    assert first.item() == pytest.approx(math.log(10))
    assert rep.item() == pytest.approx(0.0, abs=1e-6)


def test_cache_round_trip(tmp_path):
    made = toy_cached(tmp_path, steps=2, progress=False)
    files = {p.name for p in tmp_path.iterdir()}
    assert {"config.json", "model.safetensors", "toy.json", "tokenizer.json"} <= files
    assert not [f for f in files if f.endswith((".bin", ".pt", ".pkl", ".pth"))]
    again = toy_cached(tmp_path, steps=2, progress=False)
    assert again.curve == made.curve and again.first_half_loss == made.first_half_loss
    tokens = torch.tensor([[0] + list(range(4, 14)) * 2])
    with torch.inference_mode():
        a = made.model.bridge(tokens)
        b = again.model.bridge(tokens)
    torch.testing.assert_close(a, b)
    # the cache is an ordinary Hugging Face model directory
    plain = load_model(str(tmp_path))
    assert (plain.n_layers, plain.n_heads, plain.bos_policy) == (2, 4, "tokenizer")
    with torch.inference_mode():
        torch.testing.assert_close(plain.bridge(tokens), a)


@pytest.fixture(scope="module")
def trained():
    torch.manual_seed(0)
    return toy_cached(progress=False)  # trains once (a few minutes on 2 cores), then loads


@pytest.mark.slow
def test_repeated_half_is_learned(trained):
    assert trained.first_half_loss > 0.8 * math.log(
        len(VOCAB)
    )  # the random half stays unpredictable
    assert trained.repeated_half_loss < 0.3 * trained.first_half_loss
    assert (
        trained.curve[-1]["repeated"] < trained.curve[0]["repeated"] / 3
    )  # on the training data too


@pytest.mark.slow
def test_induction_and_previous_token_heads_emerge(trained):
    config = CollectConfig(suites=("repeated",), n_repeated=48, n_bootstrap=10)
    table = collect(trained.model, config, suites=[], progress=False).features
    induction = table[(table.feature == "induction") & (table.layer == 1)]
    previous = table[(table.feature == "previous_token") & (table.layer == 0)]
    assert induction.value.max() > 0.5, induction
    assert previous.value.max() > 0.5, previous
    # the heads do not just do everything: the best induction head is not a previous-token head
    best = induction.loc[induction.value.idxmax(), "head"]
    prev_of_best = table[
        (table.feature == "previous_token") & (table.layer == 1) & (table["head"] == best)
    ]
    assert prev_of_best.value.item() < 0.5

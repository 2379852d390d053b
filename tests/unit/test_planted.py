"""Planted models: each hand-set head must score exactly its role, and an unplanned head its baseline."""

from __future__ import annotations

import pytest
import torch

from interp import CollectConfig
from interp.collect.features import STATIC_FEATURES
from interp.collect.stage import collect
from interp.probes.align import Aligner
from interp.probes.base import NATURAL, Sentence, Suite
from interp.synthetic.planted import (
    PLANTABLE,
    Planted,
    build_tokenizer,
    planted_model,
    successor_pairs,
    truth,
)

PLAN = {
    (0, 0): "previous_token",
    (0, 1): "current_token",
    (0, 2): "first_token",
    (0, 3): "delimiter",
    (1, 0): "induction",
    (1, 1): "duplicate_token",
    (1, 2): "broad",
}  # (1, 3) is left unplanned
TEXTS = (
    "The cat sees the dog. The dog runs, and the bird sings!",
    "Then he finds a small red fish; it is happy: yes.",
    "Is the old teacher here? No, she was in the green house.",
    "We like the tree, but they like the house. You sleep!",
)
SUITE = Suite(
    "planted-text", NATURAL, tuple(Sentence(t, source=f"text:{i}") for i, t in enumerate(TEXTS))
)
CONFIG = CollectConfig(
    suites=("repeated",), n_repeated=12, repeated_lengths=(8, 16, 24), n_bootstrap=10
)
MASS = [
    f for f in STATIC_FEATURES if f not in ("broad", "next_token")
]  # next_token: no queries in a causal model


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return planted_model(PLAN)


@pytest.fixture(scope="module")
def features(model):
    table = collect(model, CONFIG, suites=[SUITE], progress=False).features
    return table.set_index(["layer", "head", "feature"])


def test_tokenizer_offsets_and_punctuation(model):
    tok = model.tokenizer
    assert model.bos_policy == "tokenizer" and model.causal
    enc = tok("The cat, the dog?!", return_offsets_mapping=True)
    assert tok.convert_ids_to_tokens(enc.input_ids) == [
        "<bos>",
        "the",
        "cat",
        ",",
        "the",
        "dog",
        "?",
        "!",
    ]
    assert enc.offset_mapping[3] == (7, 8)
    seq = Aligner(model).encode(Sentence("the cat, the dog?!"), SUITE)
    assert seq.is_delim.tolist() == [False, False, False, True, False, False, True, True]
    assert seq.is_special.tolist() == [True] + [False] * 7


@pytest.mark.parametrize(
    "layer, head, role", [(l, h, r) for (l, h), r in PLAN.items() if r != "broad"]
)
def test_planted_head_scores_one(features, layer, head, role):
    row = features.loc[(layer, head, role)]
    assert row["n"] > 20
    assert row["value"] == pytest.approx(1.0, abs=1e-3)
    assert row["baseline"] < 0.6  # the feature is informative on these probes


@pytest.mark.parametrize("head", [2, 3])
def test_uniform_head_scores_baseline(features, head):
    """A broad head (planted or unplanned) sits exactly on the baseline of every mass feature."""
    for feature in MASS:
        row = features.loc[(1, head, feature)]
        if row["n"] == 0:  # positions from the end: a causal query never sees them
            continue
        assert row["value"] == pytest.approx(row["baseline"], abs=1e-6), feature
    assert features.loc[(1, head, "broad"), "value"] == pytest.approx(1.0, abs=1e-6)


def test_sharp_heads_are_not_broad(features):
    for layer, head in [(0, 0), (0, 1)]:
        assert features.loc[(layer, head, "broad"), "value"] < 1e-3
    # the planted sink: everything on the first position, so every row's sink mass is 1
    assert (features.loc[(0, 2), "sink_mass"].dropna() > 1 - 1e-6).all()


def test_planted_patterns(model):
    tok = model.tokenizer
    ids = tok("the cat sees the dog . the cat runs , and the cat", return_tensors="pt").input_ids
    names = [f"blocks.{l}.attn.hook_pattern" for l in range(2)]
    with torch.inference_mode():
        _, cache = model.bridge.run_with_cache(ids, names_filter=lambda n: n in names)
    p0, p1 = cache[names[0]][0], cache[names[1]][0]  # [head, q, k]
    n = ids.shape[1]
    eye = torch.eye(n)
    prev = torch.diag(torch.ones(n - 1), -1)
    prev[0, 0] = 1.0  # BOS can only see itself
    torch.testing.assert_close(p0[0], prev, atol=1e-5, rtol=0)
    torch.testing.assert_close(p0[1], eye, atol=1e-5, rtol=0)
    torch.testing.assert_close(p0[2][:, 0], torch.ones(n), atol=1e-5, rtol=0)
    # delimiter: the query after "," (index 11) splits between "." (6) and "," (10)
    assert p0[3, 11, 6].item() == pytest.approx(0.5, abs=1e-5) and p0[
        3, 11, 10
    ].item() == pytest.approx(0.5, abs=1e-5)
    # induction: the last "cat" (13) attends to what followed the earlier "cat"s: "sees" (3), "runs" (9)
    assert p1[0, 13, 3].item() == pytest.approx(0.5, abs=1e-5) and p1[
        0, 13, 9
    ].item() == pytest.approx(0.5, abs=1e-5)
    # duplicate: the last "cat" attends to the earlier "cat"s (2, 8)
    assert p1[1, 13, 2].item() == pytest.approx(0.5, abs=1e-5) and p1[
        1, 13, 8
    ].item() == pytest.approx(0.5, abs=1e-5)
    uniform = torch.tril(torch.ones(n, n)) / torch.arange(1, n + 1)[:, None]
    torch.testing.assert_close(p1[2], uniform, atol=1e-5, rtol=0)
    torch.testing.assert_close(p1[3], uniform, atol=1e-5, rtol=0)


def test_induction_inserts_previous_token_head():
    model = planted_model({(1, 1): "induction"}, n_layers=2, n_heads=2)
    assert "L0H0=previous_token" in model.name
    ids = torch.tensor([[model.bos_token_id] + [10, 20, 30, 10, 20, 30]])
    with torch.inference_mode():
        _, cache = model.bridge.run_with_cache(
            ids, names_filter=lambda n: n.endswith("hook_pattern")
        )
    pattern = cache["blocks.1.attn.hook_pattern"][0, 1]
    assert pattern[4, 2].item() == pytest.approx(1.0, abs=1e-5)
    assert pattern[6, 4].item() == pytest.approx(1.0, abs=1e-5)


def test_plan_validation():
    with pytest.raises(ValueError, match="cannot be planted"):
        planted_model({(0, 0): "syntactic"})
    with pytest.raises(ValueError, match="earlier layer"):
        planted_model({(0, 1): "induction"})
    with pytest.raises(ValueError, match="outside"):
        planted_model({(2, 0): "broad"})
    with pytest.raises(ValueError, match="no free head"):
        planted_model({(0, 0): "broad", (1, 0): "induction"}, n_layers=2, n_heads=1)
    assert set(PLAN.values()) == set(PLANTABLE)


def test_build_tokenizer_is_shared():
    tok = build_tokenizer(("w0", "w1", "."))
    assert tok("w1 w0.").input_ids == [0, 5, 4, 6]


WRITERS = {
    (0, 0): Planted("previous_token", "zero"),
    (1, 0): Planted("previous_token", "copy"),
    (1, 1): Planted("broad", "suppress", 2.0),
    (1, 2): Planted("previous_token", "successor"),
}  # (0, 1..3) and (1, 3) unplanned


@pytest.fixture(scope="module")
def writers():
    return planted_model(WRITERS)


def ov_circuit(model, layer, head):
    """[token read, token written]: the head's OV circuit through the embedding and unembedding."""
    b = model.bridge
    return (b.W_E @ b.W_V[layer, head] @ b.W_O[layer, head] @ b.W_U).detach()


def test_written_ov_circuits_are_what_was_planted(writers):
    vocab = writers.tokenizer.get_vocab()
    eye = torch.eye(len(vocab))
    torch.testing.assert_close(ov_circuit(writers, 1, 0), eye)
    torch.testing.assert_close(ov_circuit(writers, 1, 1), -2 * eye)
    successor = torch.zeros_like(eye)
    for a, b in successor_pairs():
        successor[vocab[a], vocab[b]] = 1.0
    assert successor[vocab["sunday"], vocab["monday"]] == 1 and successor[vocab["ten"]].sum() == 0
    torch.testing.assert_close(ov_circuit(writers, 1, 2), successor)
    for layer, head in [(0, 0), (0, 1), (1, 3)]:  # planted zero, unplanned
        assert not ov_circuit(writers, layer, head).any()
        assert (
            not writers.bridge.W_O[layer, head].any() and not writers.bridge.W_V[layer, head].any()
        )


def test_a_head_that_writes_a_constant_writes_but_says_nothing_about_tokens():
    model = planted_model({(0, 0): "previous_token"}, n_layers=1)
    assert not ov_circuit(model, 0, 0).any()
    ids = model.tokenizer("the cat sees the dog", return_tensors="pt").input_ids
    with torch.inference_mode():
        _, cache = model.bridge.run_with_cache(ids, names_filter=lambda n: n.endswith("hook_z"))
        z = cache["blocks.0.attn.hook_z"][0]  # [pos, head, d_head]
        out = z[:, 0] @ model.bridge.W_O[0, 0]
    torch.testing.assert_close(out.norm(dim=-1), torch.full((ids.shape[1],), 2**0.5))
    assert not z[:, 1:].any()  # the unplanned heads write nothing


def test_writers_predict_what_they_were_planted_to(writers):
    tok = writers.tokenizer
    ids = tok("it was monday .", return_tensors="pt").input_ids
    with torch.inference_mode():
        logits = writers.bridge(ids)[0]
    # at "monday" the previous-token heads look at "was"; at "." at "monday": the copy head says
    # monday, the successor head tuesday, and the broad suppressor takes 2/5 from every token seen
    assert tok.convert_ids_to_tokens(int(logits[3].argmax())) == "was"
    assert tok.convert_ids_to_tokens(logits[4].topk(2).indices.tolist()) == ["tuesday", "monday"]
    assert logits[4, tok.convert_tokens_to_ids(".")] < 0
    assert logits[4, tok.convert_tokens_to_ids("dog")] == pytest.approx(0.0, abs=1e-6)  # unseen


def test_truth_lists_every_head_and_unplanned_heads_write_nothing():
    heads = truth(WRITERS)
    assert len(heads) == 8 and heads[(0, 1)] == Planted("broad", "zero")
    assert heads[(1, 1)].write_role == "copy_suppression" and heads[(1, 1)].looks == "broad"
    assert heads[(0, 0)].write_role == "inactive" and heads[(1, 2)].write_role == "successor"
    assert Planted("induction").write_role is None
    assert truth({(1, 0): "induction"})[(0, 0)] == Planted("previous_token", "previous")


def test_write_plan_validation():
    with pytest.raises(ValueError, match="last layer"):
        planted_model({(0, 0): Planted("previous_token", "copy")})
    with pytest.raises(ValueError, match="one key"):
        planted_model({(0, 0): Planted("broad", "inhibit")})
    with pytest.raises(ValueError, match="at most one"):
        planted_model(
            {
                (0, 0): Planted("previous_token", "inhibit"),
                (0, 1): Planted("first_token", "inhibit"),
            }
        )
    with pytest.raises(ValueError, match="choose from"):
        planted_model({(1, 0): Planted("broad", "shout")})


def test_a_sink_takes_its_share_beside_a_single_target():
    model = planted_model({(0, 0): Planted("previous_token", sink=0.3)}, n_layers=1)
    ids = model.tokenizer("the cat sees the dog", return_tensors="pt").input_ids
    with torch.inference_mode():
        _, cache = model.bridge.run_with_cache(
            ids, names_filter=lambda n: n.endswith("hook_pattern")
        )
    p = cache["blocks.0.attn.hook_pattern"][0, 0]
    assert p[3, 2].item() == pytest.approx(0.7, abs=1e-5) and p[3, 0].item() == pytest.approx(
        0.3, abs=1e-5
    )
    assert p[1, 0].item() == pytest.approx(1.0, abs=1e-5)  # q-1 is the first position itself
    with pytest.raises(ValueError, match="share of attention"):
        planted_model({(0, 0): Planted("previous_token", sink=1.0)}, n_layers=1)
    with pytest.raises(ValueError, match="no sink"):  # its one-hot would be two tokens
        planted_model({(0, 0): Planted("previous_token", "inhibit", sink=0.2)}, n_layers=1)

"""The weight scores as pure functions (interp.weights.ov, composition, ordinals): exact values on
hand-built weights."""

from __future__ import annotations

import pytest
import torch

from interp.weights import composition, ov
from interp.weights.ordinals import ordinal_sequences
from interp.weights.read import HeadWeights, normalise


def circuit(embed, unembed, w_v, w_o):
    """(reads, writes) of one head: E W_V and W_O U."""
    return (embed @ w_v)[None], (w_o @ unembed)[None]


@pytest.fixture
def embed():
    """Six tokens in eight dimensions, orthonormal rows."""
    q, _ = torch.linalg.qr(torch.randn(8, 6))
    return q.T


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_identity_copies_and_minus_identity_suppresses(embed, sign):
    reads, writes = circuit(embed, embed.T, torch.eye(8), sign * torch.eye(8))
    assert ov.copying(reads, writes).item() == pytest.approx(sign, abs=1e-6)
    top, bottom = ov.self_ranks(reads, writes, k=1)
    assert top.all().item() is (sign > 0) and bottom.all().item() is (sign < 0)
    assert not (top & bottom).any()


def test_any_embedding_read_through_its_own_transpose_copies_with_score_one():
    embed = torch.randn(40, 8)  # not orthonormal: E^T E is still positive definite
    reads, writes = circuit(embed, embed.T, torch.eye(8), torch.eye(8))
    assert ov.copying(reads, writes).item() == pytest.approx(1.0, abs=1e-6)


def test_a_head_that_writes_nothing_scores_zero_everywhere(embed):
    reads, writes = circuit(embed, embed.T, torch.eye(8), torch.zeros(8, 8))
    assert ov.copying(reads, writes).item() == 0.0
    top, bottom = ov.self_ranks(reads, writes, k=1)
    assert not top.any() and not bottom.any()  # ties count against the token
    assert not ov.successor_hits(reads, writes, [[0, 1, 2, 3]]).any()
    weights = torch.poisson(torch.ones(5, 3))
    assert (ov.copying_replicates(reads, writes, weights) == 0).all()


def test_a_shift_by_one_is_a_successor_and_no_copier():
    n = 7
    embed = torch.eye(n)  # one-hot tokens
    shift = torch.diag(torch.ones(n - 1), 1)  # token i -> token i + 1
    reads, writes = circuit(embed, embed.T, torch.eye(n), shift)
    assert ov.successor_hits(reads, writes, [[0, 1, 2], [3, 4, 5, 6]]).all()
    assert ov.copying(reads, writes).item() == 0.0  # trace 0: nilpotent, whatever rounding says
    assert not ov.self_ranks(reads, writes, k=1)[0].any()
    # read the other way round, the same circuit predicts the item before
    backwards = [[2, 1, 0], [6, 5, 4, 3]]
    assert not ov.successor_hits(reads, writes, backwards).any()


def test_successor_needs_a_strict_maximum_over_its_own_sequence_only():
    embed = torch.eye(4)
    # token 0 -> 1 and 3 equally: 3 is not in the sequence, so 1 wins; token 1 -> 0 and 2 tie
    w_o = torch.tensor(
        [[0.0, 1.0, 0.0, 1.0], [1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
    )
    reads, writes = circuit(embed, embed.T, torch.eye(4), w_o)
    assert ov.successor_hits(reads, writes, [[0, 1, 2]]).tolist() == [[True, False]]


def test_top_and_bottom_ranks_count_ties_against_the_token():
    # a 3 x 3 circuit written out: row 0's own logit ties with one other; row 2's is lowest
    target = torch.tensor([[1.0, 1.0, 0.0], [0.0, 2.0, 1.0], [3.0, 2.0, -1.0]])
    reads, writes = target[None], torch.eye(3)[None]
    top, bottom = ov.self_ranks(reads, writes, k=1)
    assert top.tolist() == [[False, True, False]]
    assert bottom.tolist() == [[False, False, True]]
    top, _ = ov.self_ranks(reads, writes, k=2)
    assert top.tolist() == [[True, True, False]]


def test_copying_replicates_resample_blocks_of_tokens(embed):
    torch.manual_seed(1)
    reads, writes = circuit(embed, torch.randn(8, 6), torch.randn(8, 3), torch.randn(3, 8))
    ones = torch.ones(1, 3)  # every block once: the full sample
    assert torch.allclose(ov.copying_replicates(reads, writes, ones)[0], ov.copying(reads, writes))
    only_first = torch.tensor([[1.0, 0.0, 0.0]])  # blocks of 2 tokens: rows 0 and 1
    expected = ov.copying(reads[:, :2], writes[:, :, :2])
    assert torch.allclose(ov.copying_replicates(reads, writes, only_first)[0], expected)


def random_heads(n_layers=3, n_heads=4, n_kv=2, d_model=16, d_head=4):
    return HeadWeights(
        torch.randn(n_layers, n_heads, d_model, d_head),
        torch.randn(n_layers, n_kv, d_model, d_head),
        torch.randn(n_layers, n_kv, d_model, d_head),
        torch.randn(n_layers, n_heads, d_head, d_model),
        centres=False,
        folded="",
    )


def test_composition_equals_the_frobenius_ratios_with_grouped_query_heads():
    heads = random_heads()
    found = composition.all_scores(heads)
    for reader in (1, 2):
        for head in range(4):
            w_q, w_k = heads.w_q[reader, head], heads.w_k[reader, head // 2]
            qk = w_q @ w_k.T
            ov_reader = heads.w_v[reader, head // 2] @ heads.w_o[reader, head]
            for writer in range(reader):
                for source in range(4):
                    ov_writer = heads.w_v[writer, source // 2] @ heads.w_o[writer, source]
                    for k, x in enumerate((qk, qk.T, ov_reader)):
                        expected = (ov_writer @ x).norm() / (ov_writer.norm() * x.norm())
                        got = found[k, reader, head, writer, source]
                        assert got.item() == pytest.approx(expected.item(), rel=1e-4)
    assert found[:, 0].isnan().all()  # layer 0 reads no earlier head
    assert found[:, 1, :, 1:].isnan().all()  # nor a head of its own layer or a later one


def test_composition_with_a_head_that_writes_nothing_is_zero():
    heads = random_heads()
    heads.w_o[0, 1] = 0.0
    found = composition.all_scores(heads)
    assert (found[:, 1:, :, 0, 1] == 0).all()
    assert (found[:, 1:, :, 0, 0] > 0).all()


def test_composition_is_largest_when_a_reader_reads_exactly_what_a_writer_writes():
    d_model = 8
    basis = torch.eye(d_model)
    w_v = basis[:, :2]  # reads dims 0, 1
    w_o = basis[2:4]  # writes dims 2, 3
    reader_k = basis[:, 2:4]  # keys read dims 2, 3: exactly the writer's output
    reader_q = basis[:, 4:6]
    writer = composition.Packed(d_model)(composition.writer_grams(w_v[None], w_o[None]), True)
    reader = composition.reader_grams("k", reader_q[None], reader_k[None], w_v[None], w_o[None])
    score = composition.scores(writer, composition.Packed(d_model)(reader, False))
    assert score.item() == pytest.approx(2**-0.5)  # 1 / sqrt(rank) for isometries of rank 2
    reader = composition.reader_grams(
        "q", reader_q[None], reader_k[None], w_v[None], w_o[None]
    )  # queries read dims 4, 5: nothing the writer wrote
    assert composition.scores(writer, composition.Packed(d_model)(reader, False)).item() == 0.0


def test_random_composition_scores_sit_near_one_over_the_root_of_the_width():
    scores = composition.random_scores("k", 200, 64, 8, torch.Generator().manual_seed(0))
    assert scores.mean().item() == pytest.approx(64**-0.5, rel=0.05)


def test_normalise_centres_for_a_layer_norm_and_keeps_zero_rows():
    x = torch.tensor([[1.0, 2.0, 3.0, 6.0], [0.0, 0.0, 0.0, 0.0]])
    out = normalise(x, centres=True)
    assert torch.allclose(out[0].mean(), torch.tensor(0.0), atol=1e-6)
    assert torch.allclose(out[0].pow(2).mean(), torch.tensor(1.0))
    assert (out[1] == 0).all()
    assert torch.allclose(normalise(x, centres=False)[0].pow(2).mean(), torch.tensor(1.0))


def test_ordinal_sequences_are_runs_of_single_tokens():
    from interp.synthetic.planted import build_tokenizer

    tok = build_tokenizer(("1", "2", "3", "5", "6", "monday", "tuesday", "wednesday", "a", "b"))
    found = {o.name: tok.convert_ids_to_tokens(list(o.ids)) for o in ordinal_sequences(tok, 100)}
    # 1 2 3 is a run; 5 6 is too short; a b too; "Monday" lower-cases to the same ids: once
    assert found == {
        "numbers (lower)": ["1", "2", "3"],
        "days (lower)": ["monday", "tuesday", "wednesday"],
    }
    assert ordinal_sequences(tok, limit=5) == []  # ids beyond the unembedding are no items

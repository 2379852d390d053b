"""Task generators (interp.synthetic.tasks.forced) and the intervention hypotheses (interp.synthetic.identify):
every target follows from the tokens by the task's rule; every ideal pattern is exact."""

from __future__ import annotations

import pytest
import torch

from interp.synthetic.identify import hypotheses, role_of
from interp.synthetic.planted import build_tokenizer
from interp.synthetic.tasks.forced import NUMBERS, SEQ_LEN, TASKS, UNSEEN_WORDS, Ids, position_of
from interp.synthetic.toy import VOCAB


@pytest.fixture(scope="module")
def ids():
    return Ids.of(build_tokenizer(VOCAB))


def batch(name, ids, seed=0, n=16):
    return TASKS[name].make(n, torch.Generator().manual_seed(seed), ids, seed)


def task_ids(name):
    words = TASKS[name].words
    return Ids.of(build_tokenizer(words), words)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_task_starts_with_bos_and_never_shows_the_answer_words(name):
    ids = task_ids(name)
    b = batch(name, ids)
    assert (b.tokens[:, 0] == ids.bos).all()
    assert b.tokens.shape == b.targets.shape == b.mask.shape
    assert not torch.isin(b.tokens[:, 1:], torch.tensor([ids.no, ids.yes])).any()
    assert b.mask.any(1).all()
    if name not in ("induction", "unseen"):  # next-token prediction reads BOS too
        assert not b.mask[:, 0].any()


def test_induction_is_next_token_prediction(ids):
    b = batch("induction", ids)
    assert torch.equal(b.targets[:, :-1], b.tokens[:, 1:]) and not b.mask[:, -1].any()


def test_copy_targets_the_previous_word(ids):
    b = batch("copy", ids)
    assert b.tokens.shape[1] == 1 + SEQ_LEN
    assert torch.equal(b.targets[:, 2:], b.tokens[:, 1:-1]) and not b.mask[:, :2].any()


def test_duplicates_says_yes_exactly_after_an_earlier_copy(ids):
    b = batch("duplicates", ids)
    for row, target in zip(b.tokens.tolist(), b.targets.tolist()):
        for q in range(1, len(row)):
            assert target[q] == (ids.yes if row[q] in row[1:q] else ids.no)
    assert (
        0.3 < float((b.targets[b.mask] == ids.yes).float().mean()) < 0.8
    )  # both answers are common


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_position_targets_one_fixed_position(ids, seed):
    k = position_of(seed)
    b = batch("position", ids, seed)
    assert (b.targets[b.mask] == b.tokens[:, k : k + 1].expand_as(b.tokens)[b.mask]).all()
    assert b.mask[:, k + 1 :].all() and not b.mask[:, : k + 1].any()


def test_majority_follows_the_running_count_and_skips_ties(ids):
    b = batch("majority", ids)
    even = set(ids.pool[::2].tolist())
    for row, target, mask in zip(b.tokens.tolist(), b.targets.tolist(), b.mask.tolist()):
        lead = 0
        for q in range(1, len(row)):
            lead += 1 if row[q] in even else -1
            assert mask[q] == (lead != 0)
            if lead:
                assert target[q] == (ids.no if lead > 0 else ids.yes)


def test_hypotheses_are_exact_causal_distributions():
    tokens = torch.tensor([[0, 5, 6, 5, 7, 6]])  # BOS a b a c b
    h = hypotheses(tokens)
    for name, p in h.items():
        assert torch.allclose(p.sum(-1), torch.ones(1, 6)), name
        assert (p.triu(1) == 0).all(), name  # never looks ahead
    assert h["previous_token"][0, 4, 3] == 1.0 and h["current_token"][0, 4, 4] == 1.0
    assert (
        h["duplicate_token"][0, 3, 1] == 1.0 and h["duplicate_token"][0, 2, 0] == 1.0
    )  # no copy: sink
    assert h["duplicate_token"][0, 5, 2] == 1.0
    assert h["induction"][0, 3, 2] == 1.0  # after the earlier a came b
    assert (
        h["induction"][0, 5, 4] == 0.0 and h["induction"][0, 5, 3] == 1.0
    )  # after the earlier b came a
    assert torch.allclose(h["broad"][0, 4], torch.tensor([0.0, 0.25, 0.25, 0.25, 0.25, 0.0]))
    assert torch.allclose(h["local"][0, 5], torch.tensor([0.0, 0.0, 1 / 3, 1 / 3, 1 / 3, 0.0]))
    assert h["local"][0, 1, 0] == 1.0  # nothing before the first word but BOS: the sink
    assert h["position:2"][0, 1, 0] == 1.0 and h["position:2"][0, 5, 2] == 1.0
    assert role_of("position:2") == "positional" and role_of("induction") == "induction"


def test_successor_targets_the_next_number():
    ids = task_ids("successor")
    tok = build_tokenizer(NUMBERS)
    b = batch("successor", ids, n=8)
    words = [tok.convert_ids_to_tokens(row.tolist()) for row in b.tokens]
    targets = [tok.convert_ids_to_tokens(row.tolist()) for row in b.targets]
    for w, t, m in zip(words, targets, b.mask):
        for q in torch.nonzero(m)[:, 0].tolist():
            assert int(t[q]) == int(w[q - 1]) + 1
    assert not (b.tokens == tok.convert_tokens_to_ids("127")).any()  # it has no successor


def test_unseen_targets_a_word_not_yet_seen():
    ids = task_ids("unseen")
    b = batch("unseen", ids, n=8)
    words = set(ids.pool[:UNSEEN_WORDS].tolist())
    for row, target, mask in zip(b.tokens.tolist(), b.targets.tolist(), b.mask.tolist()):
        assert set(row[1:]) == words and len(row) == 1 + UNSEEN_WORDS
        for q, scored in enumerate(mask):
            if scored:
                assert target[q] in words - set(row[1 : q + 1])

"""An encoder's retrieval margin reads fixed groups of sentences, not whatever shares a batch."""

from __future__ import annotations

import pytest
import torch

from interp.ablate.batches import EvalItem, make_batches
from interp.ablate.catalogue import ENCODER
from interp.ablate.evaluation import RETRIEVAL_GROUP, build_corpus
from interp.ablate.forward import Ablator
from interp.ablate.metrics import encoder_metrics
from interp.ablate.sequential import rounds

pytestmark = pytest.mark.usefixtures("one_thread")


def _items(groups: list[int]) -> list[EvalItem]:
    empty = torch.zeros(0, dtype=torch.long)
    out = []
    for i, group in enumerate(groups):
        for is_view in (False, True):
            out.append(
                EvalItem(torch.tensor([5]), ENCODER, i, empty, empty, is_view=is_view, group=group)
            )
    return out


def test_a_sentences_distractors_are_the_other_views_of_its_group():
    """Sentences 0, 1 in one group and 2, 3 in another, all four in one batch: each margin is
    cos(own view) minus the mean cosine with its group's other views. Over the whole batch,
    sentence 0's distractors would be views 1 to 3 and its margin 1 - 1/3."""
    (batch,) = make_batches(_items([0, 0, 2, 2]), max_tokens=1000, pad_id=0)
    assert batch.index.tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
    assert batch.is_view.tolist() == [False] * 4 + [True] * 4
    x, y = [1.0, 0.0], [0.0, 1.0]
    sentences = [x, y, x, y]
    views = [x, y, y, x]
    hidden = torch.tensor(sentences + views).unsqueeze(1)  # [batch, pos=1, d_model]
    margin = encoder_metrics(hidden, batch, hidden)["retrieval_margin"]
    assert margin.index.tolist() == [0, 1, 2, 3]
    assert margin.num.tolist() == [1.0, 1.0, -1.0, -1.0]


def _margins(model, max_tokens: int) -> dict[int, float]:
    corpus = build_corpus(model, 20, 0, (6,), 0, 0, max_tokens)
    ablator = Ablator(model)
    out = {}
    for batch in corpus.batches:
        hidden = ablator.clean(batch).readout
        per = encoder_metrics(hidden, batch, hidden)["retrieval_margin"]
        out.update(zip(per.index.tolist(), per.num.tolist()))
    return out


def test_the_margin_is_the_same_whatever_the_pass_size(bert):
    small, large = _margins(bert, 64), _margins(bert, 100_000)
    assert sorted(small) == sorted(large) == list(range(20))
    for i in small:
        assert small[i] == pytest.approx(large[i], abs=1e-6)


def test_a_group_is_never_cut_by_a_batch_or_a_round(bert):
    corpus = build_corpus(bert, 20, 0, (6,), 0, 0, 64)
    members: dict[int, set[tuple[int, bool]]] = {}
    for it in corpus.items:
        members.setdefault(it.group, set()).add((it.index, it.is_view))
    # 20 sentences: two groups of 8, the last one takes the 4 left over
    assert {g: len(m) // 2 for g, m in members.items()} == {0: RETRIEVAL_GROUP, 8: 12}
    for part in rounds(corpus, 10, 64, 0):
        for batch in part.batches:
            held = {(int(i), bool(v)) for i, v in zip(batch.index, batch.is_view)}
            for group in set(batch.group.tolist()):
                assert members[group] <= held

"""The corpus's frequent token types, the frequent_token features and the rule that names the role."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from feature_inputs import REPEATED, seq
from test_features import base, mean, onehot

from interp import CollectConfig
from interp.classify.frequent import FREQUENT, lifts, name_frequent, relabel
from interp.classify.reference.frequent_heads import figures, measure
from interp.collect.features import context, frequent_token
from interp.collect.stage import build_suites, collect, encode_all
from interp.probes.batch import make_batch
from interp.probes.frequent import frequent_types, mark_frequent


def test_frequent_types_cover_the_share_of_text_tokens_most_frequent_first():
    text = [seq([1, 5, 5, 5, 6, 6, 7, 8])]  # ordinary tokens: 5 x3, 6 x2, 7, 8 (BOS is special)
    assert frequent_types(text, share=0.4) == [5]  # 3 of 7 >= 2.8
    assert frequent_types(text, share=0.5) == [5, 6]  # 3 < 3.5, then 5 of 7
    assert frequent_types(text, share=1.0) == [5, 6, 7, 8]


def test_ties_go_to_the_smaller_id_and_repeated_tokens_do_not_count():
    text = seq([1, 9, 4, 9, 4, 3])
    noise = seq([1, 3, 3, 3, 3, 3, 3], kind=REPEATED)
    assert frequent_types([text, noise], share=0.4) == [4]  # 4 and 9 tie at 2: 4 first
    assert frequent_types([text, noise], share=0.6) == [4, 9]
    assert frequent_types([noise]) == []


def test_marking_ranks_the_frequent_types_but_never_a_special_token():
    s = seq([5, 5, 6, 5, 7, 6], special=(0,))
    assert mark_frequent([s], share=0.8) == [5, 6]
    assert s.frequent_rank.tolist() == [-1, 0, 1, 0, -1, 1]


def test_a_corpus_without_text_marks_nothing():
    noise = seq([1, 3, 3, 4], kind=REPEATED)
    assert mark_frequent([noise]) == []
    assert noise.frequent_rank.tolist() == [-1, -1, -1, -1]


def test_unknown_tokens_are_no_type_of_the_text():
    s = seq([1, 0, 0, 0, 5, 6, 5])  # 0: the tokenizer's unknown id
    assert frequent_types([s], share=0.4, unknown=0) == [5]  # 2 of the 3 known tokens
    assert frequent_types([s], share=0.4) == [0]


def test_collect_records_the_types_it_marked(llama):
    config = CollectConfig(n_syntax=8, n_repeated=2, max_sentences=8, n_bootstrap=10, threads=1)
    seqs, _, marked = encode_all(llama, config, build_suites(config))
    assert marked == frequent_types(seqs, unknown=llama.tokenizer.unk_token_id) and marked
    ranked = {int(t): int(r) for q in seqs for t, r in zip(q.tokens, q.frequent_rank) if r >= 0}
    assert sorted(ranked, key=ranked.get) == marked  # each marked token carries its type's rank
    result = collect(llama, config, progress=False)
    assert result.frequent_types == [llama.tokenizer.decode([t]) for t in marked]


def test_feature_mass_and_baseline_on_the_frequent_keys():
    s = seq([1, 5, 9, 5, 9, 7])
    assert mark_frequent([s], share=0.8) == [5, 9]  # 5 and 9 tie at 2 of 5: 5 ranks first
    batch = make_batch([s], [0], causal=True, pad_id=0)
    sums = frequent_token(onehot(batch, lambda q: 1), context(batch))  # all on the first 5
    assert sums.count.tolist() == [4.0]  # queries 2..5 see a frequent key other than themselves
    assert mean(sums) == pytest.approx(1.0)
    # uniform over the visible non-sink keys, q among them but never its own target: at q = 2..5
    # the frequent keys before q out of the q keys
    assert base(sums) == pytest.approx((1 / 2 + 2 / 3 + 3 / 4 + 4 / 5) / 4)


def test_an_unmarked_batch_has_no_frequent_queries():
    batch = make_batch([seq([1, 5, 5, 5])], [0], causal=True, pad_id=0)
    assert frequent_token(onehot(batch, lambda q: 1), context(batch)).count.tolist() == [0.0]


def test_lift_is_the_preference_over_uniform_as_a_share_of_the_room_left():
    values = np.array([[0.7, 0.3], [0.4, 0.3], [0.5, 1.0]])
    out = lifts(values, ["frequent_token", "x"], np.array([[0.4, 0.1], [0.4, 0.1], [1.0, 0.1]]))
    assert out[:2] == pytest.approx([0.5, 0.0]) and np.isnan(out[2])
    assert np.isnan(lifts(values, ["x", "y"], np.zeros(2))).all()


def test_relabel_names_only_unexplained_and_broad_heads():
    labels = np.array(["unexplained", "unexplained", "previous_token", "mixed", "broad"])
    lift = np.array([0.2, 0.19, 0.9, 0.8, np.nan])
    assert relabel(labels, lift).tolist() == [
        FREQUENT,
        "unexplained",
        "previous_token",
        "mixed",
        "broad",
    ]


def test_name_frequent_sets_role_and_confidence_and_keeps_the_second_role():
    roles = pd.DataFrame(
        {
            "layer": [0, 0, 1, 1],
            "head": [0, 1, 0, 1],
            "role": ["unexplained", "unexplained", "local", "broad"],
            "confidence": [0.6, 0.7, 0.8, 0.9],
            "second_role": ["delimiter", np.nan, np.nan, np.nan],
        }
    )
    features = pd.DataFrame(
        {
            "layer": [0, 0, 1, 1, 0],
            "head": [0, 1, 0, 1, 0],
            "feature": [FREQUENT, FREQUENT, FREQUENT, FREQUENT, "local"],
            "value": [0.7, 0.45, 0.9, 0.55, 0.1],
            "baseline": [0.4, 0.4, 0.4, 0.4, 0.3],
        }
    )
    out = name_frequent(roles, features)  # lifts 0.5, 0.083, 0.83, 0.25
    assert out["role"].tolist() == [FREQUENT, "unexplained", "local", FREQUENT]
    assert out["confidence"].tolist() == [1.0, 0.7, 0.8, 1.0]
    assert out["second_role"].tolist()[::3] == ["delimiter", "broad"]


def test_planted_frequent_token_heads_are_found_and_near_misses_are_not():
    """Heads known by construction, labelled by the whole classify stage (a seed of its own)."""
    heads = measure(seed=3, per_template=24, bank_per_role=2)
    got = figures(heads)
    assert got["claims"] >= 15
    assert got["precision"] >= 0.9 and got["recall"] >= 0.9
    near = heads[(heads["template"] == "near") & (heads["planted"] < 0.1)]
    assert (near["role"] != FREQUENT).mean() >= 0.9

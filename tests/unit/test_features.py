"""Feature functions on hand-built patterns, with exact expected values."""

from __future__ import annotations

import math

import pytest
import torch

from interp.accumulate import FeatureAccumulator
from interp.features import (
    FEATURE_FAMILIES, MASS_FEATURES, broad, context, delimiter, duplicate_token, first_token, induction,
    fixed_rule_counts, local, next_token, previous_token, syntactic,
)
from interp.probes.batch import make_batch

from feature_inputs import NATURAL, REPEATED, SYNTAX, seq


def uniform(batch, causal=True):
    """The no-preference head: uniform attention over the keys each query may see."""
    ctx = context(batch)
    p = ctx.allowed.float()
    p = p / p.sum(-1, keepdim=True).clamp(min=1)
    return p[:, None], ctx  # one head


def onehot(batch, key_of_query):
    """Each query puts all its mass on key_of_query(q) (clamped to 0)."""
    n, width = batch.tokens.shape
    p = torch.zeros(n, 1, width, width)
    for q in range(width):
        p[:, 0, q, max(0, min(width - 1, key_of_query(q)))] = 1.0
    return p


def mean(sums, head=0):
    return float(sums.value[:, head].sum() / sums.count.sum())


def base(sums):
    return float(sums.baseline.sum() / sums.count.sum())


@pytest.fixture
def causal_batch():
    # BOS, 4 words, a comma, 2 words, a period; a second shorter sequence padded.
    a = seq([1, 10, 11, 12, 13, 5, 14, 15, 6], delim=(5, 8))
    b = seq([1, 20, 21, 7], delim=(3,))
    return make_batch([a, b], [0, 1], causal=True, pad_id=0)


def test_perfect_previous_token_head_scores_one(causal_batch):
    ctx = context(causal_batch)
    sums = previous_token(onehot(causal_batch, lambda q: q - 1), ctx)
    assert mean(sums) == pytest.approx(1.0)
    # eligible queries: content tokens whose predecessor is content (not BOS): 7 in a, 2 in b
    assert sums.count.tolist() == [7.0, 2.0]
    # baseline: mean of 1/(q+1) over those queries
    expected = sum(1 / (q + 1) for q in range(2, 9)) + sum(1 / (q + 1) for q in range(2, 4))
    assert base(sums) == pytest.approx(expected / 9)


def test_perfect_first_token_head_scores_one(causal_batch):
    sums = first_token(onehot(causal_batch, lambda q: 0), context(causal_batch))
    assert mean(sums) == pytest.approx(1.0)
    assert sums.count.tolist() == [8.0, 3.0]


def test_uniform_head_scores_its_baseline_on_every_mass_feature(causal_batch):
    pattern, ctx = uniform(causal_batch)
    for name, fn in MASS_FEATURES.items():
        if name == "broad":
            continue
        sums = fn(pattern, ctx)
        if sums.count.sum() == 0:
            continue
        assert mean(sums) == pytest.approx(base(sums), abs=1e-6), name  # float32 patterns


def test_uniform_head_is_perfectly_broad(causal_batch):
    pattern, ctx = uniform(causal_batch)
    assert mean(broad(pattern, ctx)) == pytest.approx(1.0)
    assert mean(broad(onehot(causal_batch, lambda q: 0), ctx)) == pytest.approx(0.0)


def test_features_never_write_into_the_pattern(causal_batch):
    pattern, ctx = uniform(causal_batch)
    before = pattern.clone()
    for fn in MASS_FEATURES.values():
        fn(pattern, ctx)
    syntactic(pattern, ctx)
    assert torch.equal(pattern, before)


def test_delimiter_mass_and_sequences_without_punctuation():
    with_punct = seq([1, 10, 5, 11, 12], delim=(2,))
    without = seq([1, 10, 11, 12])
    batch = make_batch([with_punct, without], [0, 1], causal=True, pad_id=0)
    ctx = context(batch)
    p = onehot(batch, lambda q: 2)  # everyone looks at position 2 (the comma in the first sequence)
    sums = delimiter(p, ctx)
    # queries that can see a delimiter other than themselves: positions 3, 4 of the first sequence
    assert sums.count.tolist() == [2.0, 0.0]
    assert mean(sums) == pytest.approx(1.0)


def test_duplicate_and_induction_on_a_repeated_sequence():
    # BOS a b c a b c: at the second a (q=4) the earlier copy is k=1, the induction target k=2
    s = seq([1, 10, 11, 12, 10, 11, 12], family=REPEATED)
    batch = make_batch([s], [0], causal=True, pad_id=0)
    ctx = context(batch)
    dup = duplicate_token(onehot(batch, lambda q: q - 3), ctx)
    ind = induction(onehot(batch, lambda q: q - 2), ctx)
    assert dup.count.tolist() == [3.0] and mean(dup) == pytest.approx(1.0)
    assert ind.count.tolist() == [3.0] and mean(ind) == pytest.approx(1.0)
    # induction baseline: one target among q+1 visible keys
    assert base(ind) == pytest.approx((1 / 5 + 1 / 6 + 1 / 7) / 3)


def test_no_repeats_no_positions_and_family_gating():
    natural = seq([1, 10, 11, 10, 11])  # repeats, but natural text is not read by induction
    norepeat = seq([1, 10, 11, 12], family=REPEATED)
    batch = make_batch([natural, norepeat], [0, 1], causal=True, pad_id=0)
    ctx = context(batch)
    assert induction(onehot(batch, lambda q: q), ctx).count.sum() == 0
    assert duplicate_token(onehot(batch, lambda q: q), ctx).count.sum() == 0


def test_length_one_and_all_padding_but_one_token():
    one = seq([1])
    two = seq([1, 10])
    batch = make_batch([one, two], [0, 1], causal=True, pad_id=0)
    ctx = context(batch)
    p = onehot(batch, lambda q: 0)
    for name, fn in MASS_FEATURES.items():
        sums = fn(p, ctx)
        assert sums.count[0] == 0, name  # a lone BOS has no eligible query
        assert torch.isfinite(sums.value).all() and torch.isfinite(sums.baseline).all(), name


def test_encoder_next_token_and_causal_has_none():
    s = seq([101, 10, 11, 12, 102], special=(0, 4), delim=(4,))
    enc = make_batch([s], [0], causal=False, pad_id=0)
    sums = next_token(onehot(enc, lambda q: q + 1), context(enc))
    assert sums.count.tolist() == [2.0] and mean(sums) == pytest.approx(1.0)
    assert base(sums) == pytest.approx(1 / 5)
    causal = make_batch([s], [0], causal=True, pad_id=0)
    assert next_token(onehot(causal, lambda q: q), context(causal)).count.sum() == 0


def test_local_window_counts_only_nearby_content_keys():
    s = seq([1, 10, 11, 12, 13, 14])
    batch = make_batch([s], [0], causal=True, pad_id=0)
    ctx = context(batch, local_window=2)
    sums = local(onehot(batch, lambda q: q - 2), ctx)
    # q=1 sees only BOS (not content): no target; q=2..5 have 1, 2, 2, 2 targets
    assert sums.count.tolist() == [4.0]
    assert mean(sums) == pytest.approx(3 / 4)  # q=2's q-2 is BOS, not local


def test_syntactic_accuracy_and_best_offset_baseline():
    # words: 0 the, 1 dog, 2 runs ; arcs det(0->1), nsubj(1->2); relation ids 0=det, 1=nsubj
    s = seq([1, 10, 11, 12], family=SYNTAX, words=[-1, 0, 1, 2], arcs=[(0, 1, 0), (1, 2, 1)])
    batch = make_batch([s], [0], causal=True, pad_id=0)
    ctx = context(batch, relations=("det", "nsubj"))
    correct, arcs = syntactic(onehot(batch, lambda q: q - 1), ctx)
    # causal: only head2dep arcs are visible (det: query 'dog' -> 'the'; nsubj: query 'runs' -> 'dog')
    slots = {"det:dep2head": 0, "det:head2dep": 1, "nsubj:dep2head": 2, "nsubj:head2dep": 3}
    assert arcs[0].tolist() == [0.0, 1.0, 0.0, 1.0]
    assert correct[0, slots["det:head2dep"], 0] == 1 and correct[0, slots["nsubj:head2dep"], 0] == 1


def test_syntactic_baseline_is_the_best_fixed_offset_or_word_position():
    # nsubj arcs (dependent, head, relation 0); the verb queries its subject (head2dep).
    # Three sentences have the subject at word 0, 2-4 words back; one at word 1, 2 words back.
    sentences = [(3, 0), (4, 0), (5, 0), (4, 1)]  # (number of words, subject word); the verb is last
    seqs = [seq(list(range(1, n + 2)), family=SYNTAX, words=[-1, *range(n)], arcs=[(subj, n - 1, 0)])
            for n, subj in sentences]
    batch = make_batch(seqs, list(range(len(seqs))), causal=True, pad_id=0)
    ctx = context(batch, relations=("nsubj",))
    head2dep = 1
    counts = {rule: c for (slot, rule), c in fixed_rule_counts(ctx).items() if slot == head2dep}
    # every word is its own token, so "the nearest word spelled like the subject" is always right
    # too, but that is a different rule (form) for each subject token: (2,) three times, (3,) once
    assert counts == {("offset", -2): 2, ("offset", -3): 1, ("offset", -4): 1, ("word", 0): 3, ("word", 1): 1,
                      ("nearest", (2,)): 3, ("nearest", (3,)): 1}
    acc = FeatureAccumulator(n_layers=1, n_heads=1, relations=("nsubj",), n_bootstrap=10, seed=0)
    acc.start_batch(ctx)
    acc.add_layer(0, onehot(batch, lambda q: q - 1), ctx)
    table = acc.table().set_index("feature")
    # "two words back" is right on 2 of 4 arcs, "the first word" on 3 of 4
    assert table.loc["syntactic:nsubj:head2dep", "baseline"] == pytest.approx(0.75)


def test_syntactic_baseline_includes_the_nearest_word_of_a_given_form():
    # obj arcs from the verb (last word) to a relative "that" (token 7), 1-3 words back; the last
    # sentence has a second "that" nearer the verb, so the rule misses there.
    THAT = 7
    sentences = [[10, THAT, 11, 12], [10, 13, THAT, 11, 12], [10, 13, 14, THAT, 12], [10, 13, 14, 15, THAT, 16, THAT, 12]]
    golds = [1, 2, 3, 4]
    seqs = [seq([1, *words], family=SYNTAX, words=[-1, *range(len(words))], arcs=[(g, len(words) - 1, 0)])
            for words, g in zip(sentences, golds)]
    batch = make_batch(seqs, list(range(len(seqs))), causal=True, pad_id=0)
    counts = {rule: c for (slot, rule), c in fixed_rule_counts(context(batch, relations=("obj",))).items() if slot == 1}
    assert counts[("nearest", (THAT,))] == 3
    assert max(c for rule, c in counts.items() if rule[0] != "nearest") == 2  # offset -2
    # in an encoder the nearest "that" may also follow the query: here none does
    enc = make_batch(seqs, list(range(len(seqs))), causal=False, pad_id=0)
    counts = {rule: c for (slot, rule), c in fixed_rule_counts(context(enc, relations=("obj",))).items() if slot == 1}
    assert counts[("nearest", (THAT,))] == 3


def test_accumulator_table_means_cis_and_counts(causal_batch):
    acc = FeatureAccumulator(n_layers=1, n_heads=1, relations=(), n_bootstrap=50, seed=0)
    ctx = context(causal_batch)
    acc.start_batch(ctx)
    acc.add_layer(0, onehot(causal_batch, lambda q: q - 1), ctx)
    table = acc.table().set_index("feature")
    assert table.loc["previous_token", "value"] == pytest.approx(1.0)
    assert table.loc["previous_token", "n"] == 9
    assert table.loc["previous_token", "ci_low"] <= 1.0 <= table.loc["previous_token", "ci_high"] + 1e-12
    assert math.isnan(table.loc["next_token", "value"])  # causal: no eligible query, NaN not -1
    assert set(table.index) >= set(FEATURE_FAMILIES)
    with pytest.raises(RuntimeError):
        acc.add_layer(0, onehot(causal_batch, lambda q: q - 1), ctx)

"""Feature functions on hand-built patterns, with exact expected values."""

from __future__ import annotations

import math

import pytest
import torch
from feature_inputs import REPEATED, SYNTAX, seq

from interp.collect.accumulator import FeatureAccumulator
from interp.collect.features import (
    FEATURE_PROBE_KINDS,
    MASS_FEATURES,
    broad,
    context,
    delimiter,
    duplicate_token,
    first_token,
    induction,
    local,
    next_token,
    position,
    previous_token,
)
from interp.collect.syntax import fixed_rule_counts, syntactic
from interp.probes.batch import make_batch


def uniform(batch, sink: float = 0.0):
    """The no-preference head: uniform attention over the non-sink keys each query may see, with
    ``sink`` of every query's mass on the first position (all of it where nothing else is visible)."""
    ctx = context(batch)
    open_keys = (ctx.allowed & ~ctx.sink[:, None, :]).float()
    p = open_keys / open_keys.sum(-1, keepdim=True).clamp(min=1) * (1 - sink)
    p[..., 0] += torch.where(open_keys.sum(-1) > 0, sink, 1.0) * ctx.allowed[..., 0]
    return p[:, None], ctx  # one head


def onehot(batch, key_of_query):
    """Each query puts all its mass on key_of_query(q) (clamped to 0)."""
    n, width = batch.tokens.shape
    p = torch.zeros(n, 1, width, width)
    for q in range(width):
        p[:, 0, q, max(0, min(width - 1, key_of_query(q)))] = 1.0
    return p


def sinking(batch, pattern, sink):
    """``pattern`` with ``sink`` of every query's mass moved onto the first position."""
    out = pattern * (1 - sink)
    out[..., 0] += sink
    return out * batch.valid[:, None, :, None]


def mean(sums, head=0):
    """The score: mass on the targets over the non-sink mass."""
    return float(sums.value[:, head].sum() / sums.weight[:, head].sum())


def base(sums, head=0):
    return float(sums.baseline[:, head].sum() / sums.weight[:, head].sum())


def sink_mass(sums, head=0):
    return float(sums.sink[:, head].sum() / sums.count.sum())


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
    # baseline: one target among the q non-sink keys 1..q, averaged over those queries
    expected = sum(1 / q for q in range(2, 9)) + sum(1 / q for q in range(2, 4))
    assert base(sums) == pytest.approx(expected / 9)
    assert sink_mass(sums) == 0.0


def test_sink_and_previous_token_split_sixty_forty(causal_batch):
    """60% on the first position, 40% on q-1: previous_token 1.0 off the sink, sink mass 0.6."""
    ctx = context(causal_batch)
    pattern = sinking(causal_batch, onehot(causal_batch, lambda q: q - 1), 0.6)
    prev = previous_token(pattern, ctx)
    assert mean(prev) == pytest.approx(1.0)
    assert sink_mass(prev) == pytest.approx(0.6)
    # the head-level sink mass: 0.6, except at q=1 whose q-1 is the first position itself (2 such queries of 11)
    assert mean(first_token(pattern, ctx)) == pytest.approx((9 * 0.6 + 2 * 1.0) / 11)
    # the raw mass on q-1 is value * (1 - sink)
    assert float(prev.value.sum() / prev.count.sum()) == pytest.approx(0.4)


def test_perfect_first_token_head_scores_one(causal_batch):
    sums = first_token(onehot(causal_batch, lambda q: 0), context(causal_batch))
    assert mean(sums) == pytest.approx(1.0)
    assert sums.count.tolist() == [8.0, 3.0]
    # its baseline: the uniform share of the first position, 1/(q+1)
    assert base(sums) == pytest.approx(
        (sum(1 / (q + 1) for q in range(1, 9)) + sum(1 / (q + 1) for q in range(1, 4))) / 11
    )


@pytest.mark.parametrize("sink", [0.0, 0.5, 0.9])
def test_uniform_head_scores_its_baseline_on_every_mass_feature(causal_batch, sink):
    pattern, ctx = uniform(causal_batch, sink)
    for name, fn in MASS_FEATURES.items():
        if name in ("broad", "first_token"):
            continue
        sums = fn(pattern, ctx)
        if sums.count.sum() == 0:
            continue
        assert mean(sums) == pytest.approx(base(sums), abs=1e-6), name  # float32 patterns


def test_uniform_head_is_perfectly_broad(causal_batch):
    pattern, ctx = uniform(causal_batch)
    assert mean(broad(pattern, ctx)) == pytest.approx(1.0)
    assert mean(broad(onehot(causal_batch, lambda q: q), ctx)) == pytest.approx(0.0)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("sink", [0.0, 0.7])
def test_uniform_over_content_keys_is_broad_at_every_length(causal, sink):
    """Entropy over the content keys, normalised by their number: 1.0 from 4 to 256 keys,
    whatever the head puts on BOS / [CLS] and [SEP]."""
    for n_keys in (4, 5, 8, 16, 64, 256):
        body = list(range(10, 10 + n_keys - (1 if causal else 2)))
        s = seq(
            [1, *body] + ([] if causal else [2]), special=(0,) if causal else (0, len(body) + 1)
        )
        batch = make_batch([s], [0], causal=causal, pad_id=0)
        ctx = context(batch)
        keys = (ctx.allowed & ctx.content[:, None, :]).float()
        p = keys / keys.sum(-1, keepdim=True).clamp(min=1)
        p = sinking(batch, p[:, None], sink)
        sums = broad(p, ctx)
        assert mean(sums) == pytest.approx(1.0, abs=1e-5), n_keys
        assert base(sums) == 1.0


def test_duplicate_head_that_also_attends_to_itself_and_the_sink():
    # BOS a b a c a: the third a (q=5) has copies at 1 and 3; the second (q=3) at 1
    s = seq([1, 10, 11, 10, 12, 10], kind=REPEATED)
    batch = make_batch([s], [0], causal=True, pad_id=0)
    ctx = context(batch)
    p = torch.zeros(1, 1, 6, 6)
    for q in range(6):
        p[0, 0, q, 0] = 0.5 if q else 1.0
        p[0, 0, q, q] += 0.0 if q == 0 else 0.2
    p[0, 0, 3, 1] = 0.3
    p[0, 0, 5, 1] = p[0, 0, 5, 3] = 0.15
    for q in (1, 2, 4):
        p[0, 0, q, 0] += 0.3  # no copy: back to the sink
    sums = duplicate_token(p, ctx)
    assert sums.count.tolist() == [2.0]
    assert mean(sums) == pytest.approx(1.0)  # all the mass off the sink and q itself is on copies
    assert sink_mass(sums) == pytest.approx(0.5)
    # baseline: 1 copy among the 2 keys other than BOS and q (q=3), 2 among 4 (q=5)
    assert base(sums) == pytest.approx((1 / 2 + 2 / 4) / 2)


def test_position_features_exact():
    # BOS then 9 words: a head that always looks at position 2
    s = seq(list(range(1, 11)))
    batch = make_batch([s], [0], causal=True, pad_id=0)
    ctx = context(batch, local_window=3)
    sums = position(sinking(batch, onehot(batch, lambda q: 2 if q >= 2 else q), 0.5), ctx, k=2)
    # queries further than 3 from position 2: q = 6..9
    assert sums.count.tolist() == [4.0]
    assert mean(sums) == pytest.approx(1.0)
    assert base(sums) == pytest.approx(sum(1 / q for q in range(6, 10)) / 4)
    assert position(onehot(batch, lambda q: 2), ctx, k=3).value.sum() == 0.0
    # a causal query cannot see the end: no positions from the end
    assert position(onehot(batch, lambda q: q), ctx, from_end=1).count.sum() == 0
    enc = make_batch(
        [seq([101, *range(10, 18), 102], special=(0, 9), delim=(9,))], [0], causal=False, pad_id=0
    )
    last_word = 8  # one before [SEP]
    sums = position(onehot(enc, lambda q: last_word), context(enc), from_end=1)
    assert sums.count.tolist() == [4.0] and mean(sums) == pytest.approx(1.0)  # q = 1..4


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
    s = seq([1, 10, 11, 12, 10, 11, 12], kind=REPEATED)
    batch = make_batch([s], [0], causal=True, pad_id=0)
    ctx = context(batch)
    dup = duplicate_token(onehot(batch, lambda q: q - 3), ctx)
    ind = induction(onehot(batch, lambda q: q - 2), ctx)
    assert dup.count.tolist() == [3.0] and mean(dup) == pytest.approx(1.0)
    assert ind.count.tolist() == [3.0] and mean(ind) == pytest.approx(1.0)
    # induction baseline: one target among the q-1 keys other than BOS and q itself
    assert base(ind) == pytest.approx((1 / 3 + 1 / 4 + 1 / 5) / 3)


def test_no_repeats_no_positions_and_kind_gating():
    natural = seq([1, 10, 11, 10, 11])  # repeats, but natural text is not read by induction
    norepeat = seq([1, 10, 11, 12], kind=REPEATED)
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
    assert base(sums) == pytest.approx(1 / 4)  # one of the 4 keys other than [CLS]
    causal = make_batch([s], [0], causal=True, pad_id=0)
    assert next_token(onehot(causal, lambda q: q), context(causal)).count.sum() == 0


def test_local_window_counts_only_nearby_content_keys():
    s = seq([1, 10, 11, 12, 13, 14, 15])
    batch = make_batch([s], [0], causal=True, pad_id=0)
    ctx = context(batch, local_window=2)
    sums = local(onehot(batch, lambda q: q - 2), ctx)
    # a query counts where it sees content beyond the window too: q=4..6 (q=1..3 see only their window)
    assert sums.count.tolist() == [3.0]
    assert mean(sums) == pytest.approx(1.0)
    # baseline: 2 targets among the q non-sink keys
    assert base(sums) == pytest.approx((2 / 4 + 2 / 5 + 2 / 6) / 3)
    sums = local(onehot(batch, lambda q: q - 3), ctx)
    assert mean(sums) == pytest.approx(0.0)


def test_syntactic_accuracy_and_best_offset_baseline():
    # words: 0 the, 1 dog, 2 runs ; arcs det(0->1), nsubj(1->2); relation ids 0=det, 1=nsubj
    s = seq([1, 10, 11, 12], kind=SYNTAX, words=[-1, 0, 1, 2], arcs=[(0, 1, 0), (1, 2, 1)])
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
    sentences = [
        (3, 0),
        (4, 0),
        (5, 0),
        (4, 1),
    ]  # (number of words, subject word); the verb is last
    seqs = [
        seq(list(range(1, n + 2)), kind=SYNTAX, words=[-1, *range(n)], arcs=[(subj, n - 1, 0)])
        for n, subj in sentences
    ]
    batch = make_batch(seqs, list(range(len(seqs))), causal=True, pad_id=0)
    ctx = context(batch, relations=("nsubj",))
    head2dep = 1
    counts = {rule: c for (slot, rule), c in fixed_rule_counts(ctx).items() if slot == head2dep}
    # every word is its own token, so "the nearest word spelled like the subject" is always right
    # too, but that is a different rule (form) for each subject token: (2,) three times, (3,) once
    assert counts == {
        ("offset", -2): 2,
        ("offset", -3): 1,
        ("offset", -4): 1,
        ("word", 0): 3,
        ("word", 1): 1,
        ("nearest", (2,)): 3,
        ("nearest", (3,)): 1,
    }
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
    sentences = [
        [10, THAT, 11, 12],
        [10, 13, THAT, 11, 12],
        [10, 13, 14, THAT, 12],
        [10, 13, 14, 15, THAT, 16, THAT, 12],
    ]
    golds = [1, 2, 3, 4]
    seqs = [
        seq(
            [1, *words],
            kind=SYNTAX,
            words=[-1, *range(len(words))],
            arcs=[(g, len(words) - 1, 0)],
        )
        for words, g in zip(sentences, golds)
    ]
    batch = make_batch(seqs, list(range(len(seqs))), causal=True, pad_id=0)
    counts = {
        rule: c
        for (slot, rule), c in fixed_rule_counts(context(batch, relations=("obj",))).items()
        if slot == 1
    }
    assert counts[("nearest", (THAT,))] == 3
    assert max(c for rule, c in counts.items() if rule[0] != "nearest") == 2  # offset -2
    # in an encoder the nearest "that" may also follow the query: here none does
    enc = make_batch(seqs, list(range(len(seqs))), causal=False, pad_id=0)
    counts = {
        rule: c
        for (slot, rule), c in fixed_rule_counts(context(enc, relations=("obj",))).items()
        if slot == 1
    }
    assert counts[("nearest", (THAT,))] == 3


def test_accumulator_table_means_cis_and_counts(causal_batch):
    acc = FeatureAccumulator(n_layers=1, n_heads=1, relations=(), n_bootstrap=50, seed=0)
    ctx = context(causal_batch)
    acc.start_batch(ctx)
    acc.add_layer(0, onehot(causal_batch, lambda q: q - 1), ctx)
    table = acc.table().set_index("feature")
    assert table.loc["previous_token", "value"] == pytest.approx(1.0)
    assert table.loc["previous_token", "n"] == 9
    assert (
        table.loc["previous_token", "ci_low"]
        <= 1.0
        <= table.loc["previous_token", "ci_high"] + 1e-12
    )
    assert table.loc["previous_token", "sink_mass"] == 0.0
    assert table.loc["first_token", "value"] == pytest.approx(
        2 / 11
    )  # q=1 of each sequence looks at BOS
    assert math.isnan(table.loc["next_token", "value"])  # causal: no eligible query, NaN not -1
    assert set(table.index) >= set(FEATURE_PROBE_KINDS)
    with pytest.raises(RuntimeError):
        acc.add_layer(0, onehot(causal_batch, lambda q: q - 1), ctx)

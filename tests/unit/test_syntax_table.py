"""The syntax table on a hand-made treebank with hand-built heads: exact accuracies, arcs,
baselines, ranks, and every treebank scored on its own (the features read one choice of them).

Two corpora of two sentences each, one token per word, an encoder (every arc scored both ways):

    syntax   S1  the dog runs .          det 0->1, nsubj 1->2              (runs: root)
             S2  the cat sees the dog    det 0->1, nsubj 1->2, det 3->4, obj 4->2   (sees: root)
    user:tb  S3  dogs see cats           nsubj 0->1, obj 2->1              (see: root)
             S4  the big dog sleeps      det 0->2, amod 1->2, nsubj 2->3   (sleeps: root)

Head "gold" puts all of a word's attention on its gold head (the root on its first dependent);
head "prev" on the word before (word 0 on word 1). Layer 0 holds (gold, prev), layer 1 (prev, gold).
"""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from feature_inputs import SYNTAX, seq

from interp.collect.accumulator import FeatureAccumulator
from interp.collect.features import context
from interp.collect.shards import Treebanks
from interp.collect.syntax_table import SyntaxAccumulator, feature_corpora, rule_name
from interp.probes.batch import make_batch

RELATIONS = ("det", "nsubj", "obj", "amod")
CLS, SEP, DOT = 1, 2, 13
IDS = {
    "the": 10,
    "dog": 11,
    "runs": 12,
    ".": DOT,
    "cat": 14,
    "sees": 15,
    "dogs": 16,
    "see": 17,
    "cats": 18,
    "big": 19,
    "sleeps": 20,
}
# (corpus, words, arcs as (dependent, head, relation))
SENTENCES = (
    ("syntax", "the dog runs .", ((0, 1, "det"), (1, 2, "nsubj"))),
    (
        "syntax",
        "the cat sees the dog",
        ((0, 1, "det"), (1, 2, "nsubj"), (3, 4, "det"), (4, 2, "obj")),
    ),
    ("user:tb", "dogs see cats", ((0, 1, "nsubj"), (2, 1, "obj"))),
    ("user:tb", "the big dog sleeps", ((0, 2, "det"), (1, 2, "amod"), (2, 3, "nsubj"))),
)
CORPORA = ("syntax", "user:tb")


def sequences():
    out = []
    for corpus, text, arcs in SENTENCES:
        words = text.split()
        tokens = [CLS, *(IDS[w] for w in words), SEP]
        s = seq(
            tokens,
            SYNTAX,
            delim=[i + 1 for i, w in enumerate(words) if w == "."],
            special=(0, len(tokens) - 1),
            words=[-1, *range(len(words)), -1],
            arcs=[(d, h, RELATIONS.index(r)) for d, h, r in arcs],
        )
        s.suite = corpus
        out.append(s)
    return out


def target_word(text: str, arcs: tuple, head: str, word: int) -> int:
    """The word a hand-built head attends to from ``word``."""
    if head == "prev":
        return word - 1 if word > 0 else 1
    gold = {d: h for d, h, _ in arcs}
    if word in gold:
        return gold[word]
    dependents = sorted(d for d, h, _ in arcs if h == word)
    return dependents[0] if dependents else 0


def patterns(batch, layer: int) -> torch.Tensor:
    """[batch, head, q, k]: one-hot on the target word's token; special tokens on the first position."""
    n, width = batch.tokens.shape
    kinds = ("gold", "prev") if layer == 0 else ("prev", "gold")
    p = torch.zeros(n, 2, width, width)
    for b, i in enumerate(batch.index.tolist()):
        _, text, arcs = SENTENCES[i]
        for h, kind in enumerate(kinds):
            for q in range(width):
                w = int(batch.word_of_token[b, q])
                p[
                    b,
                    h,
                    q,
                    0 if w < 0 else int(batch.word_pos[b][target_word(text, arcs, kind, w)]),
                ] = 1.0
    return p


def collect(groups=((0, 1, 2, 3),), pool=False, n_bootstrap=50):
    """The syntax table and the features table of the hand-built heads, batch by batch as collect() does."""
    seqs = sequences()
    treebanks = Treebanks.of(seqs, RELATIONS, pool)
    syntax = SyntaxAccumulator(
        2, 2, RELATIONS, treebanks.corpora, treebanks.corpus_of, n_bootstrap, seed=0
    )
    features = FeatureAccumulator(2, 2, treebanks.feature_relations, n_bootstrap, seed=0)
    for group in groups:
        batch = make_batch([seqs[i] for i in group], list(group), causal=False, pad_id=0)
        ctx = context(batch, RELATIONS)
        narrowed = treebanks.for_features(ctx)
        syntax.start_batch(ctx)
        features.start_batch(narrowed)
        for layer in range(2):
            syntax.add_layer(layer, patterns(batch, layer), ctx)
            features.add_layer(layer, patterns(batch, layer), narrowed)
    return (
        syntax.table(in_features=treebanks.in_features, decode=lambda ids: "+".join(map(str, ids))),
        features.table(),
    )


def row(
    table: pd.DataFrame, corpus: str, relation: str, direction: str, rank: int = 1
) -> pd.Series:
    found = table.query(
        "corpus == @corpus and relation == @relation and direction == @direction and rank == @rank"
    )
    assert len(found) == 1, (corpus, relation, direction, rank)
    return found.iloc[0]


def accuracies(
    table: pd.DataFrame, corpus: str, relation: str, direction: str
) -> dict[tuple[int, int], float]:
    rows = table.query("corpus == @corpus and relation == @relation and direction == @direction")
    return {(int(r.layer), int(r.head)): float(r.accuracy) for r in rows.itertuples()}


@pytest.fixture(scope="module")
def tables():
    return collect()


# (corpus, relation, direction): arcs, sentences, accuracy of the gold head, of the previous-word
# head, and the share of arcs at each offset (partner word minus query word)
EXPECTED = {
    ("syntax", "det", "dep2head"): (3, 2, 1.0, 2 / 3, {1: 1.0}),
    ("syntax", "det", "head2dep"): (3, 2, 0.0, 1.0, {-1: 1.0}),
    ("syntax", "nsubj", "dep2head"): (2, 2, 1.0, 0.0, {1: 1.0}),
    ("syntax", "nsubj", "head2dep"): (2, 2, 1.0, 1.0, {-1: 1.0}),
    ("syntax", "obj", "dep2head"): (1, 1, 1.0, 0.0, {-2: 1.0}),
    ("syntax", "obj", "head2dep"): (1, 1, 0.0, 0.0, {2: 1.0}),
    ("user:tb", "det", "dep2head"): (1, 1, 1.0, 0.0, {2: 1.0}),
    ("user:tb", "det", "head2dep"): (1, 1, 0.0, 0.0, {-2: 1.0}),
    ("user:tb", "nsubj", "dep2head"): (2, 2, 1.0, 0.5, {1: 1.0}),
    ("user:tb", "nsubj", "head2dep"): (2, 2, 1.0, 1.0, {-1: 1.0}),
    ("user:tb", "obj", "dep2head"): (1, 1, 1.0, 1.0, {-1: 1.0}),
    ("user:tb", "obj", "head2dep"): (1, 1, 0.0, 0.0, {1: 1.0}),
    ("user:tb", "amod", "dep2head"): (1, 1, 1.0, 0.0, {1: 1.0}),
    ("user:tb", "amod", "head2dep"): (1, 1, 0.0, 1.0, {-1: 1.0}),
}


def test_every_treebank_relation_and_direction_has_its_own_rows(tables):
    syntax, _ = tables
    slots = set(zip(syntax["corpus"], syntax["relation"], syntax["direction"]))
    assert slots == set(EXPECTED)  # the built-in suite has no amod: no pooled slot, no empty one
    assert (
        syntax.groupby(["corpus", "relation", "direction"]).size().eq(3).all()
    )  # the best 3 of 4 heads
    assert list(dict.fromkeys(syntax["corpus"])) == list(CORPORA)


@pytest.mark.parametrize("slot", list(EXPECTED))
def test_exact_accuracies_arcs_and_baselines(tables, slot):
    syntax, _ = tables
    arcs, sentences, gold, prev, offsets = EXPECTED[slot]
    ranked = accuracies(syntax, *slot)
    everything = {(0, 0): gold, (1, 1): gold, (0, 1): prev, (1, 0): prev}
    # the best three, ties to the lower layer, then head
    best = sorted(everything, key=lambda lh: (-everything[lh], lh))[:3]
    assert list(ranked) == best
    assert ranked == pytest.approx({lh: everything[lh] for lh in best})
    first = row(syntax, *slot)
    assert (first.arcs, first.sentences) == (arcs, sentences)
    for d in (-3, -2, -1, 1, 2, 3):
        assert first[f"offset_{d}"] == pytest.approx(offsets.get(d, 0.0)), d
    ((d, share),) = offsets.items()
    assert first.best_rule == f"offset_{d}" and first.best_rule_accuracy == pytest.approx(share)


def test_intervals_hold_the_accuracy_and_are_exact_when_every_arc_agrees(tables):
    syntax, _ = tables
    assert (syntax["ci_low"] <= syntax["accuracy"] + 1e-12).all() and (
        syntax["accuracy"] <= syntax["ci_high"] + 1e-12
    ).all()
    perfect = syntax[syntax["accuracy"] == 1.0]
    assert (perfect["ci_low"] == 1.0).all() and (perfect["ci_high"] == 1.0).all()
    split = row(syntax, "syntax", "det", "dep2head", rank=3)  # prev: 2 of 3 arcs, over 2 sentences
    assert split.ci_low < split.accuracy < split.ci_high


def test_the_best_rule_breaks_ties_towards_an_offset(tables):
    """det head2dep in the built-in suite: "the word before" and "the nearest 'the'" both get all 3 arcs."""
    syntax, _ = tables
    assert row(syntax, "syntax", "det", "head2dep").best_rule == "offset_-1"
    assert rule_name(("nearest", (10,)), lambda ids: "the") == "nearest_the"
    assert rule_name(("word", 0)) == "word_0" and rule_name(("offset", -2)) == "offset_-2"


def test_features_read_the_builtin_suite_alone_and_agree_with_its_rows(tables):
    syntax, features = tables
    assert set(syntax.loc[syntax["in_features"] == 1, "corpus"]) == {"syntax"}
    syntactic = features[features["feature"].str.startswith("syntactic:")]
    assert set(syntactic["feature"]) == {
        f"syntactic:{r}:{d}" for r in ("det", "nsubj", "obj") for d in ("dep2head", "head2dep")
    }  # no amod: only the user's has it
    for r in syntax[syntax["corpus"] == "syntax"].itertuples():
        f = syntactic[
            (syntactic["feature"] == f"syntactic:{r.relation}:{r.direction}")
            & (syntactic["layer"] == r.layer)
            & (syntactic["head"] == r.head)
        ].iloc[0]
        assert (f["value"], f["n"], f["baseline"]) == (
            pytest.approx(r.accuracy),
            r.arcs,
            pytest.approx(r.best_rule_accuracy),
        )
        assert (f["ci_low"], f["ci_high"]) == (
            pytest.approx(r.ci_low),
            pytest.approx(r.ci_high),
        )  # the same draws


def test_pooling_is_explicit():
    syntax, features = collect(pool=True)
    assert set(syntax.loc[syntax["in_features"] == 1, "corpus"]) == set(CORPORA)
    det = features[
        (features["feature"] == "syntactic:det:dep2head")
        & (features["layer"] == 0)
        & (features["head"] == 1)
    ]
    assert int(det["n"].iloc[0]) == 4 and det["value"].iloc[0] == pytest.approx(
        2 / 4
    )  # 3 + 1 arcs pooled
    alone = accuracies(syntax, "syntax", "det", "dep2head")  # the syntax table never pools
    assert alone[(0, 1)] == pytest.approx(2 / 3)


def test_user_treebanks_feed_the_features_when_the_builtin_suite_is_absent():
    assert feature_corpora(("user:a", "user:b")) == ("user:a", "user:b")
    assert feature_corpora(("syntax", "user:a")) == ("syntax",)
    assert feature_corpora(("syntax", "user:a"), pool=True) == ("syntax", "user:a")
    assert feature_corpora(()) == ()


def test_streaming_in_batches_gives_the_same_table(tables):
    syntax, _ = tables
    split, _ = collect(groups=((3, 0), (1,), (2,)))
    columns = [
        "corpus",
        "relation",
        "direction",
        "rank",
        "layer",
        "head",
        "accuracy",
        "arcs",
        "sentences",
        "best_rule",
        "best_rule_accuracy",
    ]
    pd.testing.assert_frame_equal(split[columns], syntax[columns])


def test_unmeasured_heads_are_never_ranked():
    import numpy as np

    seqs = sequences()
    acc = SyntaxAccumulator(2, 2, RELATIONS, CORPORA, [0, 0, 1, 1], n_bootstrap=0)
    batch = make_batch(seqs, [0, 1, 2, 3], causal=False, pad_id=0)
    ctx = context(batch, RELATIONS)
    acc.start_batch(ctx)
    for layer in range(2):
        acc.add_layer(layer, patterns(batch, layer), ctx)
    measured = np.array([[False, True], [True, True]])
    table = acc.table(measured, top=4)
    assert not ((table["layer"] == 0) & (table["head"] == 0)).any()
    assert table.groupby(["corpus", "relation", "direction"]).size().eq(3).all()
    assert table["ci_low"].isna().all()  # no bootstrap replicates: no interval

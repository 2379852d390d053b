"""The features' raw share: how much of all its attention a head puts on the targets, sink
included, as TransformerLens' detect_head measures it (exact values on hand-built patterns, and
equality with detect_head itself on a tiny model and, slow, on SmolLM2)."""

from __future__ import annotations

import math

import pytest
import torch
from feature_inputs import NATURAL, REPEATED, seq

from interp.collect.accumulator import FeatureAccumulator
from interp.collect.features import context
from interp.probes.batch import make_batch

TL_FEATURES = {
    "previous_token": "previous_token_head",
    "duplicate_token": "duplicate_token_head",
    "induction": "induction_head",
}


def table(seqs, pattern_of):
    """The features table of one layer, one head, whose pattern is ``pattern_of(batch)``."""
    batch = make_batch(seqs, list(range(len(seqs))), causal=True, pad_id=0)
    ctx = context(batch)
    acc = FeatureAccumulator(1, 1, (), n_bootstrap=10)
    acc.start_batch(ctx)
    acc.add_layer(0, pattern_of(batch), ctx)
    return acc.table().set_index("feature")


def pattern(batch, key_of_query, sink=0.0):
    """Each valid query puts ``1 - sink`` on key_of_query(q) and ``sink`` on the first position."""
    n, width = batch.tokens.shape
    p = torch.zeros(n, 1, width, width)
    for q in range(width):
        p[:, 0, q, key_of_query(q)] += 1.0 - sink
        p[:, 0, q, 0] += sink
    return p * batch.valid[:, None, :, None]


def test_a_sink_heavy_previous_token_head_is_one_renormalised_and_small_raw():
    """0.9 on the sink, 0.1 on q-1: value 1.0, raw the mass on q-1 over every row, mean over sequences.
    Row 1's q-1 is the first position itself (detect_head counts it: all of that row's mass)."""
    a, b = seq([1, 10, 11, 12, 13, 14, 15, 16, 17]), seq([1, 20, 21, 22])
    rows = table([a, b], lambda batch: pattern(batch, lambda q: max(q - 1, 0), sink=0.9)).loc[
        "previous_token"
    ]
    assert rows["value"] == pytest.approx(1.0)
    assert rows["sink_mass"] == pytest.approx(0.9)
    # a: rows 0..8, row 1 holds 1.0 on position 0, rows 2..8 hold 0.1; b: rows 0..3
    assert rows["raw"] == pytest.approx(((1.0 + 7 * 0.1) / 9 + (1.0 + 2 * 0.1) / 4) / 2)


def test_raw_induction_counts_every_row_of_a_repeated_sequence():
    """[BOS] r r with r of 3 tokens: a perfect induction head scores 1.0 renormalised, 3 of 7 rows raw;
    one with 0.9 on the sink, a tenth of that."""
    s = seq([1, 10, 11, 12, 10, 11, 12], kind=REPEATED)

    def inducting(q):
        return q - 2 if q >= 4 else 0  # the token after the earlier copy of tok[q]

    perfect = table([s], lambda batch: pattern(batch, inducting)).loc["induction"]
    assert perfect["value"] == pytest.approx(1.0) and perfect["raw"] == pytest.approx(3 / 7)
    sinking = table([s], lambda batch: pattern(batch, inducting, sink=0.9)).loc["induction"]
    assert sinking["value"] == pytest.approx(1.0) and sinking["raw"] == pytest.approx(3 * 0.1 / 7)
    dup = table([s], lambda batch: pattern(batch, lambda q: q - 3 if q >= 4 else 0)).loc[
        "duplicate_token"
    ]
    assert dup["value"] == pytest.approx(1.0) and dup["raw"] == pytest.approx(3 / 7)


def test_raw_targets_are_detect_heads_patterns():
    """[BOS] 10 10 11: the token right after its own copy. detect_head's induction pattern holds q
    itself there (k = q, whose predecessor is q's token); ``value`` sets q aside and has no query."""
    s = seq([1, 10, 10, 11], kind=REPEATED)
    own = table([s], lambda batch: pattern(batch, lambda q: q))
    assert own.loc["induction", "raw"] == pytest.approx(1 / 4)  # row 2 on itself
    assert own.loc["induction", "n"] == 0 and math.isnan(own.loc["induction", "value"])
    assert own.loc["duplicate_token", "raw"] == 0.0  # a copy is an *earlier* key
    assert math.isnan(
        own.loc["current_token", "raw"]
    )  # it reads text only: no sequence here, not measured
    on_copy = table([s], lambda batch: pattern(batch, lambda q: 1 if q == 2 else 0)).loc[
        "duplicate_token"
    ]
    assert on_copy["raw"] == pytest.approx(1 / 4) and on_copy["value"] == pytest.approx(1.0)


def test_raw_reads_only_the_features_sequences_and_is_nan_for_entropy_and_syntax():
    text, rep = seq([1, 10, 11, 12]), seq([1, 20, 21, 22, 20, 21, 22], kind=REPEATED)
    t = table([text, rep], lambda batch: pattern(batch, lambda q: max(q - 1, 0)))
    # induction reads the repeated sequence only, where q-1 is never the token after the copy
    assert t.loc["induction", "raw"] == 0.0
    # previous_token reads both: every row q >= 1 is on q-1
    assert t.loc["previous_token", "raw"] == pytest.approx((3 / 4 + 6 / 7) / 2)
    # first_token: the sink over content queries (row 1 of each), over every row of the text and repeated sequences
    assert t.loc["first_token", "raw"] == pytest.approx((1 / 4 + 1 / 7) / 2)
    assert math.isnan(t.loc["broad", "raw"])


def test_raw_of_other_mass_features_is_value_mass_over_every_row():
    """current_token on text: the mass on q over the eligible queries (q >= 2 here), over all rows."""
    s = seq([1, 10, 11, 12, 13], kind=NATURAL)
    t = table([s], lambda batch: pattern(batch, lambda q: q, sink=0.5))
    assert t.loc["current_token", "value"] == pytest.approx(1.0)
    assert t.loc["current_token", "raw"] == pytest.approx(3 * 0.5 / 5)  # queries 2, 3, 4 of 5 rows


# --- detect_head itself ------------------------------------------------------------------------


PROMPTS = (
    "the cat sees the dog the cat sees the dog",
    "the bird sings , the bird sings",
    "the the dog runs and the dog runs !",
)  # lengths differ; "the the": k = q counts


PLAN = {
    (0, 0): "previous_token",
    (0, 1): "current_token",
    (0, 2): "first_token",
    (1, 0): "induction",
    (1, 1): "duplicate_token",
}  # (0, 3), (1, 2), (1, 3) attend uniformly


def test_raw_equals_detect_head_on_a_planted_model():
    """Same prompts, of several lengths: every head's raw previous_token, duplicate_token and
    induction equal detect_head's default score (mean over prompts) to 1e-6."""
    from transformer_lens.head_detector import detect_head

    from interp import CollectConfig
    from interp.collect.stage import collect
    from interp.probes.base import Sentence, Suite
    from interp.synthetic.planted import planted_model

    model = planted_model(PLAN)
    suite = Suite("prompts", REPEATED, tuple(Sentence(t) for t in PROMPTS))
    features = collect(
        model, CollectConfig(suites=(), n_bootstrap=10), suites=[suite], progress=False
    ).features
    for feature, head_name in TL_FEATURES.items():
        theirs = detect_head(model.bridge, list(PROMPTS), head_name).double()
        rows = features[features["feature"] == feature].sort_values(["layer", "head"])
        ours = torch.tensor(rows["raw"].to_numpy()).view(model.n_layers, model.n_heads)
        assert (ours - theirs).abs().max() < 1e-6, feature
        assert (
            theirs.max() - theirs.min() > 0.2
        )  # the planted heads stand out: the comparison can fail


@pytest.mark.slow
def test_raw_equals_detect_head_on_smollm2(smollm2):
    from transformer_lens.head_detector import detect_head

    from interp import CollectConfig
    from interp.collect.stage import collect
    from interp.probes.base import Sentence, Suite

    prompts = [
        "river apple stone cloud window garden river apple stone cloud window garden",
        "silver market letter candle forest silver market letter candle forest",
        "bridge orange pencil rabbit winter mirror ladder bridge orange pencil rabbit winter mirror ladder",
    ]
    suite = Suite("prompts", REPEATED, tuple(Sentence(t) for t in prompts))
    features = collect(
        smollm2, CollectConfig(suites=(), n_bootstrap=10), suites=[suite], progress=False
    ).features
    for feature, head_name in TL_FEATURES.items():
        theirs = detect_head(smollm2.bridge, prompts, head_name).double()
        rows = features[features["feature"] == feature].sort_values(["layer", "head"])
        ours = torch.tensor(rows["raw"].to_numpy()).view(smollm2.n_layers, smollm2.n_heads)
        assert (ours - theirs).abs().max() < 1e-6, feature
    induction = features[features["feature"] == "induction"].set_index(["layer", "head"])
    assert induction["raw"].idxmax() in {(18, 6), (17, 3), (17, 4)}  # the textbook induction heads

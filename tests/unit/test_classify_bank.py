"""The reference bank: synthetic patterns score exactly through the real feature code; the bank
and the shipped model are deterministic, versioned and not pickles."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from interp.classify.matrix import COLUMNS
from interp.classify.reference import MODEL_FILE, REFERENCE_VERSION
from interp.classify.reference import patterns as P
from interp.classify.reference.bank import build_bank, sample_specs, syntax_slots
from interp.classify.reference.fit import (
    default_classifier,
    fit_bank,
    load_bank,
    load_classifier,
    reference_dir,
    save_model,
)
from interp.classify.reference.probes import PAD, synthetic_sequences
from interp.collect.accumulator import FeatureAccumulator
from interp.collect.features import context
from interp.errors import RunError
from interp.probes.batch import bucket, make_batch
from interp.roles import LOOKS, UNEXPLAINED


def _score(causal: bool, builders: dict) -> pd.DataFrame:
    """Feature values (feature x head) of pattern builders over the synthetic corpus."""
    seqs, relations = synthetic_sequences(causal, seed=0, n_repeated=6, n_syntax=30, n_prose=10)
    acc = FeatureAccumulator(1, len(builders), relations, n_bootstrap=0)
    for group in bucket(seqs, 2048):
        ctx = context(make_batch([seqs[i] for i in group], group, causal, PAD), relations)
        acc.start_batch(ctx)
        acc.add_layer(0, torch.stack([fn(ctx) for fn in builders.values()], 1), ctx)
    table = acc.table()
    return table.pivot_table(index="feature", columns="head", values="value").set_axis(
        list(builders), axis=1
    )


@pytest.mark.parametrize("causal", [True, False])
def test_pure_archetype_patterns_score_exactly_one(causal):
    builders = {
        "previous_token": lambda c: P.offset(c, -1),
        "current_token": lambda c: P.offset(c, 0),
        "first_token": P.first,
        "delimiter": lambda c: P.delimiter(c, "all"),
        "duplicate_token": P.duplicate,
        "induction": P.induction,
        "local": lambda c: P.local(c, 3),
        "broad": P.broad,
        "position:2": lambda c: P.position(c, 2),
    }
    if not causal:
        builders["next_token"] = lambda c: P.offset(c, 1)
        builders["position:end-2"] = lambda c: P.position(c, None, 2)
    builders["same_token"] = P.same_token
    values = _score(causal, builders)
    for role in set(builders) - {"same_token"}:
        assert values.loc[role, role] == pytest.approx(1.0, abs=1e-6), role
    # the query itself is set aside: a head on q and its copies alike is all duplicate_token
    assert values.loc["duplicate_token", "same_token"] == pytest.approx(1.0, abs=1e-6)
    # a pure sink has no attention off the first position: its other features say nothing
    assert np.isnan(values.loc["previous_token", "first_token"])
    assert values.loc["previous_token", "broad"] == pytest.approx(
        values.loc["previous_token", "broad"]
    )


def test_syntactic_pattern_hits_its_relation():
    seqs, relations = synthetic_sequences(False, seed=0, n_repeated=0, n_syntax=30, n_prose=0)
    ctx = context(make_batch(seqs, list(range(len(seqs))), False, PAD), relations)
    from interp.collect.syntax import syntactic

    slot = 2  # relations[1], dep2head
    for hit, expected in ((1.0, 1.0), (0.5, 0.5)):
        correct, arcs = syntactic(P.syntactic(ctx, (slot,), "bos", hit, seed=1)[:, None], ctx)
        accuracy = float(correct[:, slot, 0].sum() / arcs[:, slot].sum())
        assert accuracy == pytest.approx(expected, abs=0.12)


@pytest.mark.parametrize("causal", [True, False])
def test_every_pattern_is_a_distribution_over_visible_keys(causal):
    seqs, relations = synthetic_sequences(causal, seed=0, n_repeated=4, n_syntax=10, n_prose=6)
    ctx = context(make_batch(seqs, list(range(len(seqs))), causal, PAD), relations)
    gen = torch.Generator().manual_seed(0)
    pats = [
        P.offset(ctx, -1),
        P.first(ctx),
        P.delimiter(ctx, "nearest", "uniform"),
        P.duplicate(ctx, "self"),
        P.duplicate(ctx, "bos", 0.4),
        P.same_token(ctx),
        P.induction(ctx),
        P.local(ctx, 2, 0.5),
        P.broad(ctx, True),
        P.far_offset(ctx, 6),
        P.position(ctx, 3),
        P.position(ctx, None, 1),
        P.token_class(ctx, 5, 1),
        P.dirichlet(ctx, 0.1, gen),
        P.random_logits(ctx, 4.0, gen),
        P.shuffled(ctx, P.offset(ctx, -1), gen),
    ]
    pats.append(P.mix(pats[:3], torch.tensor([0.5, 0.3, 0.2]), 0.5, ctx, gen, jitter=0.2))
    rows = ctx.batch.valid
    for pattern in pats:
        assert (pattern[~ctx.allowed] == 0).all()
        np.testing.assert_allclose(pattern.sum(-1)[rows].numpy(), 1.0, atol=1e-5)


def test_same_token_spreads_over_the_query_and_its_earlier_copies():
    from interp.probes.base import REPEATED, ProbeSequence

    tokens = torch.tensor([0, 7, 8, 7, 7])  # BOS a b a a
    n = len(tokens)
    seq = ProbeSequence(
        tokens=tokens,
        suite="t",
        kind=REPEATED,
        is_delim=torch.zeros(n, dtype=torch.bool),
        is_special=torch.arange(n) == 0,
        word_of_token=torch.full((n,), -1),
        word_pos=torch.zeros(0, dtype=torch.long),
        arcs=torch.zeros(0, 3, dtype=torch.long),
        source="t",
    )
    ctx = context(make_batch([seq], [0], True, PAD), ())
    p = P.same_token(ctx)[0]
    expected = torch.zeros(n, n)
    expected[0, 0] = expected[1, 1] = expected[2, 2] = 1.0  # first sightings attend to themselves
    expected[3, [1, 3]] = 0.5
    expected[4, [1, 3, 4]] = 1 / 3
    torch.testing.assert_close(p, expected)


def test_shuffled_keeps_each_rows_masses():
    seqs, relations = synthetic_sequences(True, seed=0, n_repeated=2, n_syntax=4, n_prose=2)
    ctx = context(make_batch(seqs, list(range(len(seqs))), True, PAD), relations)
    base = P.local(ctx, 3, 0.5)
    out = P.shuffled(ctx, base, torch.Generator().manual_seed(0))
    torch.testing.assert_close(out.sort(-1).values, base.sort(-1).values)


def test_specs_cover_every_role_and_label_rules():
    import random

    slots = syntax_slots(True)
    specs = sample_specs(random.Random(0), True, slots, per_role=4)
    labels = {s.label for s in specs}
    # the classifier names non-sink attention: first_token is the sink rule's
    assert labels == set(LOOKS) - {"next_token", "first_token"} | {UNEXPLAINED}
    for s in specs:
        assert sum(s.weights) == pytest.approx(1.0, abs=1e-3)
        if s.template == "several":
            assert max(s.weights) <= 0.42 + 1e-3 and s.label == UNEXPLAINED
            kinds = {
                k for k, _ in s.components
            }  # current_token beside a copy role is one copy head
            assert not (
                {"duplicate", "same_token", "induction"} & kinds
                and ("offset", (0, "self")) in s.components
            )
        if (
            s.template == "sink" and s.label != UNEXPLAINED
        ):  # labelled with the role beside the sink
            assert s.components[0][0] != "first" and s.components[1][0] == "first"


def test_build_bank_is_deterministic_and_complete():
    a = build_bank(seed=3, per_role=2)
    b = build_bank(seed=3, per_role=2)
    pd.testing.assert_frame_equal(a, b)
    assert list(a.columns) == list(COLUMNS) + [
        "sink_mass",
        "label",
        "second",
        "template",
        "mask",
        "seed",
        "spec",
        "head_id",
    ]
    assert set(a["mask"]) == {"causal", "encoder"}
    assert not a[list(COLUMNS)].isna().any().any()
    assert "next_token" not in set(a.loc[a["mask"] == "causal", "label"])


# --- the shipped reference -------------------------------------------------------------------------


def test_shipped_model_is_json_and_versioned():
    data = json.loads((reference_dir() / MODEL_FILE).read_text())
    assert data["version"] == REFERENCE_VERSION
    assert data["held_out"]["accuracy"] > 0.9 and data["held_out"]["ece"] < 0.05
    clf = default_classifier()
    assert set(clf.classes_) == set(LOOKS) - {"first_token"} | {UNEXPLAINED}
    assert list(clf.feature_names_in_) == list(COLUMNS)


def test_other_versions_are_refused(tmp_path):
    path = tmp_path / "model.json"
    save_model(default_classifier(), path)
    data = json.loads(path.read_text())
    data["version"] = "0.0.1"
    path.write_text(json.dumps(data))
    with pytest.raises(RunError, match="version"):
        load_classifier(path)
    assert (
        load_classifier(path, version=None).classes_.tolist()
        == default_classifier().classes_.tolist()
    )
    with pytest.raises(RunError, match="no classifier model"):
        load_classifier(tmp_path / "missing.json")


def test_refitting_the_shipped_bank_reproduces_the_shipped_model():
    bank = load_bank()
    assert len(bank) == json.loads((reference_dir() / MODEL_FILE).read_text())["n_bank"]
    refit = fit_bank(bank)
    X = bank[list(COLUMNS)]
    agree = (refit.predict(X) == default_classifier().predict(X)).mean()
    assert agree > 0.99
    np.testing.assert_allclose(
        refit.predict_proba(X), default_classifier().predict_proba(X), atol=0.02
    )


def test_a_copy_head_that_also_attends_to_itself_is_labelled_by_the_copy():
    from interp.classify.reference.bank import _pair_labels

    assert _pair_labels("current_token", "duplicate_token") == ("duplicate_token", "current_token")
    assert _pair_labels("current_token", "induction") == ("induction", "current_token")
    assert _pair_labels("current_token", "local") == ("current_token", "local")
    assert _pair_labels("duplicate_token", "current_token") == ("duplicate_token", "current_token")


def test_the_bank_also_holds_its_heads_as_a_run_without_syntax_probes():
    bank = build_bank(seed=3, per_role=2)
    plain = bank[~bank["template"].str.endswith(":no-syntax")]
    bare = bank[bank["template"].str.endswith(":no-syntax")]
    assert len(bare) == (plain["label"] != "syntactic").sum()
    assert (bare["syntactic"] == 0.0).all() and "syntactic" not in set(bare["label"])
    cols = [c for c in COLUMNS if c != "syntactic"]
    np.testing.assert_array_equal(
        bare[cols].to_numpy(), plain[plain["label"] != "syntactic"][cols].to_numpy()
    )

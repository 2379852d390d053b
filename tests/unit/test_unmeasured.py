"""What was not measured: the roles table's ``unmeasured`` column and role (interp.classify.unmeasured),
the sink mass per suite, and a skipped suite recorded by the collect stage and said by the report."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from feature_inputs import REPEATED, seq
from test_classify import features_table, sharp

from interp.classify.reference.fit import default_classifier
from interp.classify.stage import classify
from interp.classify.unmeasured import missing_columns, undecided
from interp.collect.features import context
from interp.collect.sinks import SuiteSinks
from interp.probes.batch import make_batch

HEADS = {
    (0, 0): sharp(
        previous_token=1.0, local=1.0
    ),  # a previous-token head: its own feature is measured
    (0, 1): sharp(
        broad=0.2
    ),  # sharp attention no measured feature explains: unexplained when all is measured
    (0, 2): sharp(induction=0.9, broad=0.1),  # an induction head
    (0, 3): sharp(broad=0.5, sink_mass=0.97),  # a sink: first_token by the sink rule
}
REPEATED_FEATURES = ["duplicate_token", "induction"]


def without(table: pd.DataFrame, features: list[str]) -> pd.DataFrame:
    """The table as a run whose suite for ``features`` was skipped: no positions, NaN values."""
    table = table.copy()
    gone = table["feature"].isin(features)
    table.loc[gone, ["value", "baseline", "sink_mass"]] = np.nan
    table.loc[gone, "n"] = 0
    return table


def test_everything_measured_gives_the_usual_roles_and_no_flag():
    roles = classify(features_table(HEADS)).roles.set_index(["layer", "head"])
    assert roles["role"].to_dict() == {
        (0, 0): "previous_token",
        (0, 1): "unexplained",
        (0, 2): "induction",
        (0, 3): "first_token",
    }
    assert roles["unmeasured"].isna().all() and roles["confidence"].notna().all()


def test_a_skipped_repeated_suite_leaves_no_confident_unexplained_head():
    roles = classify(without(features_table(HEADS), REPEATED_FEATURES)).roles.set_index(
        ["layer", "head"]
    )
    assert (roles["unmeasured"] == "duplicate_token induction").all()
    assert roles["role"].to_dict() == {
        (0, 0): "previous_token",
        (0, 1): "unmeasured",
        (0, 2): "unmeasured",
        (0, 3): "first_token",
    }
    for head in [(0, 1), (0, 2)]:  # no role, so no confidence, scores, second role or stability
        row = roles.loc[head]
        assert (
            math.isnan(row["confidence"])
            and pd.isna(row["second_role"])
            and math.isnan(row["stability"])
        )
        assert row.filter(like="score_").isna().all()
    assert roles.loc[(0, 0), "confidence"] > 0.5  # it rests on previous_token, which was measured
    assert roles.loc[(0, 3), "confidence"] == 1.0
    assert "unexplained" not in set(roles["role"])


def test_missing_columns_are_the_inputs_without_positions():
    table = features_table(HEADS)
    assert (
        missing_columns(table) == ()
    )  # next_token: a causal model cannot have it, current_token has positions
    assert missing_columns(without(table, REPEATED_FEATURES)) == ("duplicate_token", "induction")
    no_syntax = table[~table["feature"].str.startswith("syntactic:")]
    assert missing_columns(no_syntax) == ("syntactic",)
    text = [
        f
        for f in table["feature"].unique()
        if not f.startswith("syntactic:") and f not in REPEATED_FEATURES
    ]
    no_text = without(table, text)
    assert missing_columns(
        no_text
    ) == (  # none of these has positions: nothing tells the model causal
        "previous_token",
        "current_token",
        "next_token",
        "delimiter",
        "local",
        "positional",
        "broad",
    )
    assert "next_token" not in missing_columns(no_text, causal=True)  # the manifest says so
    few = table.copy()
    few.loc[few["feature"].str.startswith("position:"), "n"] = (
        19  # under MIN_QUERIES (20) positions each
    )
    assert missing_columns(few) == ("positional",)


def test_a_label_is_undecided_only_when_a_corner_of_the_missing_box_changes_it():
    from interp.classify.matrix import head_matrix

    matrix = head_matrix(features_table(HEADS))
    clf = default_classifier()
    primary = np.array(["previous_token", "unexplained", "induction", "first_token"])
    assert undecided(clf, matrix, primary, ()).tolist() == [False] * 4
    # induction missing: the unexplained head could be an induction head; the induction head's own input is gone
    assert undecided(clf, matrix, primary, ("induction",)).tolist() == [False, True, True, False]


def test_sink_mass_per_suite_from_hand_built_patterns():
    """Two suites: a head with 0.9 on the first position on prose and 0.2 on repeated tokens."""
    prose, rep = seq([1, 10, 11, 12]), seq([1, 20, 21, 20, 21], kind=REPEATED)
    batch = make_batch([prose, rep], [0, 1], causal=True, pad_id=0)
    ctx = context(batch)
    sinks = SuiteSinks(1, 1, ["prose", "repeated"])
    sinks.start_batch(ctx)
    sink = torch.tensor([0.9, 0.2])[:, None, None]
    p = torch.zeros(2, 1, 5, 5)
    p[..., 0] = sink
    p[..., 1] = 1 - sink
    p[:, :, 0, 0], p[:, :, 0, 1] = 1.0, 0.0
    sinks.add_layer(0, p * batch.valid[:, None, :, None], ctx)
    table = sinks.table().set_index("suite")
    # content queries: positions 1.. of each; at position 1 the only other key is the first position
    assert table.loc["prose", "sink_mass"] == pytest.approx(0.9) and table.loc["prose", "n"] == 3
    assert (
        table.loc["repeated", "sink_mass"] == pytest.approx(0.2) and table.loc["repeated", "n"] == 4
    )
    roles = classify(features_table({(0, 0): {}}), sinks=sinks.table()).roles
    assert roles.loc[0, "sink_mass_prose"] == pytest.approx(0.9) and roles.loc[
        0, "sink_mass_repeated"
    ] == pytest.approx(0.2)


def test_a_model_that_cannot_encode_english_records_the_skips_and_flags_its_heads(tmp_path):
    """A tokenizer without <unk> over ten words: prose and syntax are skipped (recorded with the
    reason in the manifest, said in the report's summary); repeated tokens still run; no head is
    a confident 'unexplained'."""
    from test_vocab import model_with, word_tokenizer

    from interp import CollectConfig
    from interp.pipeline.execute import run_pipeline
    from interp.pipeline.options import RunOptions
    from interp.pipeline.results import load_run
    from interp.report.summary import report_summary

    model, _ = model_with(word_tokenizer(unk=False))
    options = RunOptions(
        out_dir=str(tmp_path),
        run_name="skips",
        skip=("weights", "ablate", "report"),
        stages={
            "collect": CollectConfig(
                n_repeated=8, repeated_lengths=(6,), n_syntax=10, max_sentences=10, n_bootstrap=10
            )
        },
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = load_run(run_pipeline(options, model=model, progress=False))
    skipped = run.manifest["stages"]["collect"]["skipped_suites"]
    assert sorted(skipped) == ["prose", "syntax"]
    assert all(
        why.startswith("it cannot be expressed in this model's vocabulary")
        for why in skipped.values()
    )
    roles = run.roles
    text = "current_token delimiter syntactic local positional broad"
    assert (roles["unmeasured"] == text).all()
    assert not (roles["role"] == "unexplained").any()
    flagged = roles["role"] == "unmeasured"
    assert flagged.any() and roles.loc[flagged, "confidence"].isna().all()
    assert (
        roles.loc[~flagged, "role"]
        .isin(["previous_token", "duplicate_token", "induction", "first_token"])
        .all()
    )
    assert list(roles.filter(like="sink_mass_").columns) == ["sink_mass_repeated"]
    notes = report_summary(run)["measurement_notes"]
    assert notes[0].startswith(
        "Probe suite prose was skipped: it cannot be expressed in this model's vocabulary"
    )
    assert notes[-1].startswith(
        f"Not measured, so imputed as no preference: {text.replace(' ', ', ')}. "
        f"{int(flagged.sum())} of {len(roles)} heads"
    )

"""Classify stage on hand-built features tables: the feature matrix, labels, stability, clusters, run I/O."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from interp.classify.clusters import NO_STRUCTURE, cluster_unexplained, overview, verdict
from interp.classify.matrix import (
    BROAD_MISSING,
    COLUMNS,
    head_matrix,
    matrix_from_arrays,
    sink_shares,
)
from interp.classify.reference.fit import default_classifier
from interp.classify.stability import stability
from interp.classify.stage import ClassifyConfig, ClassifyResult, classify, run_stage
from interp.collect.config import FEATURES_VERSION
from interp.collect.features import STATIC_FEATURES
from interp.errors import RunError
from interp.pipeline import rundir
from interp.pipeline.results import load_run
from interp.pipeline.tables import ROLES_TABLE
from interp.roles import SCORED_ROLES, UNEXPLAINED

# What a head with no preference scores on each static feature (a causal model: next_token and
# the positions from the end have no eligible query, so their value and baseline are NaN).
BASELINES = {
    "previous_token": 0.1,
    "current_token": 0.1,
    "next_token": np.nan,
    "first_token": 0.1,
    "delimiter": 0.15,
    "frequent_token": 0.4,
    "duplicate_token": 0.05,
    "induction": 0.05,
    "local": 0.3,
    "broad": 1.0,
    **{
        name: (np.nan if "end" in name else 0.06)
        for name in STATIC_FEATURES
        if name.startswith("position:")
    },
}
SYNTAX = {"syntactic:nsubj:head2dep": (0.25, 400), "syntactic:det:dep2head": (0.6, 400)}


def features_table(heads: dict[tuple[int, int], dict[str, float]]) -> pd.DataFrame:
    """A features table: every head scores its baseline (broad: 0.95) unless ``heads`` says
    otherwise; a head's ``sink_mass`` (default 0.3) is its first_token value and every row's sink."""
    rows = []
    for (layer, head), values in heads.items():
        sink = values.get("sink_mass", 0.3)
        for name in STATIC_FEATURES:
            base = BASELINES[name]
            default = {"broad": 0.95, "first_token": sink}.get(name, base)
            rows.append(
                {
                    "layer": layer,
                    "head": head,
                    "feature": name,
                    "value": values.get(name, default),
                    "baseline": base,
                    "sink_mass": sink,
                    "ci_low": np.nan,
                    "ci_high": np.nan,
                    "n": 0 if math.isnan(base) else 1000,
                }
            )
        for name, (base, n) in SYNTAX.items():
            rows.append(
                {
                    "layer": layer,
                    "head": head,
                    "feature": name,
                    "value": values.get(name, base),
                    "baseline": base,
                    "sink_mass": sink,
                    "ci_low": np.nan,
                    "ci_high": np.nan,
                    "n": n,
                }
            )
    return pd.DataFrame(rows)


def sharp(**values: float) -> dict[str, float]:
    """A head whose non-sink mass is all where ``values`` say: every other mass feature scores 0,
    entropy 0 unless given (the syntactic scores stay at their fixed-rule baselines)."""
    out = {
        name: 0.0
        for name in STATIC_FEATURES
        if name != "first_token" and not math.isnan(BASELINES[name])
    }
    return {**out, **values}


# Idealised heads of a causal model.
HEADS = {
    (0, 0): sharp(previous_token=1.0, local=1.0),
    (0, 1): sharp(broad=0.5, sink_mass=0.97),  # all but 3% on the sink
    (0, 2): {},  # uniform attention
    (0, 3): sharp(current_token=1.0),
    (0, 4): sharp(**{"position:2": 1.0}),
    (1, 0): sharp(induction=0.9, broad=0.1),
    (1, 1): sharp(duplicate_token=0.9, broad=0.1),
    (1, 2): sharp(previous_token=1.0, local=1.0, sink_mass=0.6),  # 60% sink, 40% on q-1
    (1, 3): {"syntactic:nsubj:head2dep": 0.9, "broad": 0.6},
}
EXPECTED = {
    (0, 0): "previous_token",
    (0, 1): "first_token",
    (0, 2): "broad",
    (0, 3): "current_token",
    (0, 4): "positional",
    (1, 0): "induction",
    (1, 1): "duplicate_token",
    (1, 2): "previous_token",
    (1, 3): "syntactic",
}


# --- the feature matrix -------------------------------------------------------------------------


def test_head_matrix_lifts_exact():
    m = head_matrix(
        features_table(
            {(0, 0): {"previous_token": 0.55, "broad": 0.8, "syntactic:nsubj:head2dep": 0.9}}
        )
    )
    row = m.loc[(0, 0)]
    assert list(m.columns) == list(COLUMNS)
    assert row["previous_token"] == pytest.approx((0.55 - 0.1) / 0.9)  # = 0.5
    assert row["current_token"] == pytest.approx(0.0)  # at its baseline
    assert row["next_token"] == 0.0  # NaN (causal) -> no preference
    assert row["broad"] == pytest.approx(0.8)  # entropy, not a lift
    # best syntactic lift, shrunk by two binomial standard errors of the fixed-rule baseline:
    # nsubj (0.9 - 0.25 - 2 sqrt(0.25 * 0.75 / 400)) / 0.75; det sits at its baseline
    assert row["syntactic"] == pytest.approx((0.9 - 0.25 - 2 * math.sqrt(0.25 * 0.75 / 400)) / 0.75)
    assert row["positional"] == pytest.approx(0.0)  # every position at its baseline
    assert "first_token" not in m.columns  # the sink is not a column: the sink rule reads it


def test_sink_shares_follow_each_columns_feature():
    table = features_table({(0, 0): sharp(**{"position:3": 1.0}, sink_mass=0.5)})
    table.loc[table["feature"] == "position:3", "sink_mass"] = 0.2
    shares = sink_shares(table).loc[(0, 0)]
    assert shares["sink:positional"] == pytest.approx(0.2)  # the best position's queries
    assert shares["sink:previous_token"] == pytest.approx(0.5)
    assert shares["sink_mass"] == pytest.approx(0.5)  # the first_token value


def test_head_matrix_imputation_rules():
    values = np.array([[np.nan, np.nan, 0.5]])
    names = ["induction", "broad", "syntactic:det:dep2head"]
    m = matrix_from_arrays(values, names, np.array([0.05, 1.0, 1.0]), np.array([0, 0, 500]))
    col = dict(zip(COLUMNS, m[0]))
    assert col["induction"] == 0.0 and col["broad"] == BROAD_MISSING
    assert col["syntactic"] == 0.0  # baseline 1: no head can beat it, feature skipped
    assert col["previous_token"] == 0.0  # absent feature


def test_head_matrix_skips_relations_with_few_arcs():
    m = matrix_from_arrays(
        np.array([[1.0]]), ["syntactic:obj:dep2head"], np.array([0.2]), np.array([5])
    )
    assert m[0, COLUMNS.index("syntactic")] == 0.0


def test_head_matrix_rejects_bad_tables():
    with pytest.raises(ValueError, match="lacks columns"):
        head_matrix(pd.DataFrame({"layer": [0]}))
    with pytest.raises(ValueError, match="empty"):
        head_matrix(features_table({(0, 0): {}}).iloc[:0])


# --- labels from the shipped model ---------------------------------------------------------------


@pytest.fixture(scope="module")
def result() -> ClassifyResult:
    return classify(features_table(HEADS), truth=EXPECTED)


def test_idealised_heads_get_their_roles(result):
    got = {(r.layer, r.head): r.role for r in result.roles.itertuples()}
    assert got == EXPECTED


def test_roles_table_schema(result):
    roles = result.roles
    assert list(roles.columns) == ROLES_TABLE.names + [f"score_{r}" for r in SCORED_ROLES]
    scores = roles[[f"score_{r}" for r in SCORED_ROLES]].to_numpy()
    np.testing.assert_allclose(scores.sum(1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(roles["confidence"], scores.max(1))
    assert roles["stability"].isna().all()  # no replicates
    assert list(zip(roles["layer"], roles["head"])) == sorted(HEADS)


def test_sink_mass_and_second_role(result):
    roles = result.roles.set_index(["layer", "head"])
    assert roles.loc[(1, 2), "sink_mass"] == pytest.approx(0.6)
    assert (
        roles.loc[(1, 2), "second_role"] == "first_token"
    )  # a previous-token head that mostly sinks
    assert pd.isna(
        roles.loc[(0, 0), "second_role"]
    )  # local is implied by previous_token, not a second role
    assert roles.loc[(0, 1), "confidence"] == 1.0  # the sink rule decides first_token


def test_summary_counts_and_confusion(result):
    counts = result.counts
    assert counts.sum() == len(HEADS) and counts["previous_token"] == 2 and counts[UNEXPLAINED] == 0
    assert result.share_unexplained == 0.0
    assert result.per_layer.loc[0, "broad"] == 1
    truth_rows = result.summary[result.summary["scope"] == "truth"]
    assert (truth_rows["share"] == 1.0).all()
    assert result.confusion.loc["previous_token", "previous_token"] == 2


def test_off_catalogue_heads_are_unexplained():
    # sharp attention (entropy 0.2) that no feature explains: a fixed far offset, say
    res = classify(
        features_table({(0, 0): sharp(broad=0.2), (0, 1): sharp(broad=0.3, sink_mass=0.5)})
    )
    assert set(res.roles["role"]) == {UNEXPLAINED}


def test_config_validation():
    with pytest.raises(ValueError):
        ClassifyConfig(min_cluster_size=1)
    with pytest.raises(ValueError):
        ClassifyConfig(max_replicates=0)
    with pytest.raises(ValueError):
        ClassifyConfig(second_min_lift=1.5)
    with pytest.raises(ValueError):
        ClassifyConfig(cluster_distance=0.0)
    with pytest.raises(ValueError):
        ClassifyConfig(reference_version="")
    with pytest.raises(RunError, match="reference version"):
        classify(features_table(HEADS), config=ClassifyConfig(reference_version="0.0.0"))


def test_second_min_lift_override():
    two = {(0, 0): sharp(previous_token=0.6, current_token=0.4, local=0.6, broad=0.4)}
    assert classify(features_table(two)).roles["second_role"].iloc[0] == "current_token"
    res = classify(features_table(two), config=ClassifyConfig(second_min_lift=0.9))
    assert pd.isna(res.roles["second_role"].iloc[0])


# --- stability --------------------------------------------------------------------------------------


def _replicates(
    table: pd.DataFrame, n: int, jitter: dict[tuple[int, int, str], np.ndarray]
) -> tuple[np.ndarray, list[str]]:
    names = list(pd.unique(table["feature"]))
    n_layers, n_heads = table["layer"].max() + 1, table["head"].max() + 1
    reps = np.zeros((n, n_layers, len(names), n_heads))
    for row in table.itertuples():
        reps[:, row.layer, names.index(row.feature), row.head] = row.value
    for (layer, head, feature), values in jitter.items():
        reps[:, layer, names.index(feature), head] = values
    return reps, names


def test_stability_exact_share():
    table = features_table(HEADS)
    # head (0, 0) attends uniformly in 3 of 10 replicates
    jitter = {
        (0, 0, f): np.array([v] * 7 + [BASELINES[f]] * 3)
        for f, v in HEADS[(0, 0)].items()
        if f != "broad"
    }
    jitter[(0, 0, "broad")] = np.array([0.0] * 7 + [0.95] * 3)
    reps, names = _replicates(table, 10, jitter)
    res = classify(table, reps, names)
    stab = res.roles.set_index(["layer", "head"])["stability"]
    assert stab[(0, 0)] == pytest.approx(0.7)
    assert (stab.drop((0, 0)) == 1.0).all()
    assert (
        classify(table, reps, names, ClassifyConfig(max_replicates=5)).roles["stability"].iloc[0]
        == 1.0
    )


def lifted(**lifts: float) -> dict[str, float]:
    """Raw feature values whose lifts over BASELINES are ``lifts`` (mass features)."""
    return {f: BASELINES[f] + lift * (1 - BASELINES[f]) for f, lift in lifts.items()}


def test_a_mixed_head_is_stable_where_the_same_roles_hold():
    blend = lifted(delimiter=0.4, local=0.3, previous_token=0.2) | {"broad": 0.75}
    table = features_table({(0, 0): blend})
    # 5 replicates as the data; 2 with more on the window (the same blend, other shares); 3 with
    # more on the previous token (delimiter + previous_token: another blend, still unexplained to
    # the classifier alone)
    local = lifted(local=0.35)["local"]
    previous = lifted(previous_token=0.35)["previous_token"]
    jitter = {
        (0, 0, "local"): np.array([blend["local"]] * 8 + [local] * 2),
        (0, 0, "previous_token"): np.array([blend["previous_token"]] * 7 + [previous] * 3),
    }
    reps, names = _replicates(table, 10, jitter)
    roles = classify(table, reps, names).roles
    assert roles["role"].iloc[0] == "mixed"
    assert roles["components"].iloc[0] == "delimiter 0.37 + local 0.26"
    assert roles["stability"].iloc[0] == pytest.approx(0.7)


def test_stability_without_replicates_is_nan():
    primary = pd.Series(
        ["broad"], index=pd.MultiIndex.from_tuples([(0, 0)], names=["layer", "head"])
    )
    assert stability(default_classifier(), None, None, np.zeros(0), None, primary).isna().all()
    with pytest.raises(ValueError, match="names"):
        classify(features_table(HEADS), np.zeros((2, 2, 11, 4)))
    with pytest.raises(ValueError, match="shape"):
        classify(features_table(HEADS), np.zeros((2, 2, 5, 4)), ["a", "b", "c"])


# --- clusters -----------------------------------------------------------------------------------------


def test_unexplained_heads_cluster_by_profile():
    rng = np.random.default_rng(0)
    index = pd.MultiIndex.from_tuples([(0, h) for h in range(10)], names=["layer", "head"])
    matrix = pd.DataFrame(0.0, index=index, columns=list(COLUMNS) + ["sink_mass"])
    matrix["broad"] = 0.9
    # heads 0-2: a sharp group with some first-token mass; heads 3-5: a sharp group on delimiters-ish
    matrix["sink_mass"] = 0.2
    matrix.loc[[(0, 0), (0, 1), (0, 2)], ["sink_mass", "broad"]] = [[0.6, 0.3]] * 3
    matrix.loc[[(0, 3), (0, 4), (0, 5)], ["delimiter", "broad"]] = [[0.3, 0.2]] * 3
    matrix.loc[[(0, 6)], ["induction", "broad"]] = [[0.5, 0.1]]  # a singleton
    matrix += rng.normal(0, 0.01, matrix.shape)
    roles = pd.Series(["unexplained"] * 7 + ["broad"] * 3, index=index)
    clusters = cluster_unexplained(matrix, roles, distance=3.0)
    assert list(clusters.columns) == ["cluster", "layer", "head", "description", "silhouette"]
    groups = {frozenset(g["head"]) for _, g in clusters.groupby("cluster")}
    assert groups == {frozenset({0, 1, 2}), frozenset({3, 4, 5})}
    # described by what sets each group apart from the other unexplained heads (heads 3-6 for the first)
    first = clusters[clusters["head"] == 0]["description"].iloc[0]
    assert first == (
        "more sink_mass (mass 0.60 vs 0.20), less delimiter (lift 0.00 vs 0.22), "
        "less induction (lift 0.00 vs 0.13)"
    )
    assert clusters["silhouette"].between(0.7, 0.9).all()  # two tight groups far apart
    assert verdict(clusters, 7) == (
        "6 heads of the 7 unexplained heads fall into 2 groups. The groups separate "
        "(mean silhouette 0.80; 1: far apart, 0: on the border between two groups)."
    )
    # silhouette-chosen groups find the same two
    auto = cluster_unexplained(matrix, roles)
    assert {frozenset(g["head"]) for _, g in auto.groupby("cluster")} == groups


def test_groups_cut_from_one_cloud_are_said_not_to_separate():
    """Unexplained heads drawn from one cloud (no groups at all): the silhouette still picks a
    number of groups, and the verdict says they do not separate; one group holding most heads is
    named as such."""
    index = pd.MultiIndex.from_tuples(
        [(layer, head) for layer in range(8) for head in range(5)], names=["layer", "head"]
    )
    rng = np.random.default_rng(1)
    matrix = pd.DataFrame(
        rng.normal(0.3, 0.1, (40, len(COLUMNS) + 1)),
        index=index,
        columns=list(COLUMNS) + ["sink_mass"],
    )
    clusters = cluster_unexplained(matrix, pd.Series(["unexplained"] * 40, index=index))
    mean = clusters["silhouette"].mean()
    assert clusters["cluster"].nunique() >= 2 and mean < NO_STRUCTURE
    assert verdict(clusters, 40).endswith(
        f"The groups do not separate (mean silhouette {mean:.2f}, under 0.25): the "
        "unexplained heads vary along a continuum that these groups only cut, so "
        "read each description as a tendency, not a kind of head."
    )
    lopsided = pd.DataFrame(
        {
            "cluster": [0] * 26 + [1] * 2,
            "layer": range(28),
            "head": 0,
            "description": "d",
            "silhouette": 0.1,
        }
    )
    assert verdict(lopsided, 28).startswith(
        "28 heads of the 28 unexplained heads fall into 2 groups. One group holds "
        "26 of them: on these features most unexplained heads look alike. The "
        "groups do not separate (mean silhouette 0.10"
    )
    assert verdict(lopsided.assign(silhouette=0.3)).endswith(
        "The groups separate only weakly (mean silhouette 0.30, under 0.5): a structure this weak may be an artefact "
        "of the clustering, so read each description as a tendency."
    )
    table = overview(lopsided)
    assert table[["cluster", "heads", "layers"]].values.tolist() == [
        [0, 26, "L0–L25"],
        [1, 2, "L26–L27"],
    ]
    assert table["members"].iloc[0] == " ".join(f"L{l}H0" for l in range(12)) + " … and 14 more"


def test_too_few_unexplained_heads_give_no_clusters():
    index = pd.MultiIndex.from_tuples([(0, 0), (0, 1)], names=["layer", "head"])
    matrix = pd.DataFrame(0.0, index=index, columns=list(COLUMNS) + ["sink_mass"])
    assert cluster_unexplained(matrix, pd.Series(["unexplained", "broad"], index=index)).empty


# --- the run directory ------------------------------------------------------------------------------------


def _stored(run_dir):
    """What the classify stage reads from a run: features, replicates, their names."""
    from interp.classify.stage import read_replicates

    return (rundir.read_table(run_dir, "features"), *read_replicates(run_dir))


def _run_dir(tmp_path, replicates: bool):
    rundir.write_manifest(tmp_path, {"stages": {}})
    table = features_table(HEADS)
    rundir.write_table(tmp_path, "features", table)
    if replicates:
        reps, names = _replicates(table, 4, {})
        np.savez(tmp_path / "feature_replicates.npz", values=reps, names=np.array(names))
    return tmp_path


@pytest.mark.parametrize("with_replicates", [False, True])
def test_classify_run_writes_tables_and_records_stage(tmp_path, with_replicates):
    run_dir = _run_dir(tmp_path, with_replicates)
    from interp.pipeline.stages import stage

    stage("classify").run(run_dir, None, ClassifyConfig(), progress=False)
    result = classify(*_stored(run_dir))
    assert stage("classify").done(run_dir, ClassifyConfig())
    loaded = load_run(run_dir)
    pd.testing.assert_frame_equal(loaded.roles, result.roles, check_dtype=False)
    assert (run_dir / "roles.csv").exists() and (run_dir / "role_summary.csv").exists()
    assert list(pd.read_csv(run_dir / "clusters.csv").columns) == [
        "cluster",
        "layer",
        "head",
        "description",
        "silhouette",
    ]
    summary = pd.read_csv(run_dir / "role_summary.csv")
    assert set(summary["scope"]) == {"model", "layer"}
    stage = json.loads((run_dir / "manifest.json").read_text())["stages"]["classify"]
    assert stage["config"]["reference_version"] == ClassifyConfig().reference_version
    assert result.roles["stability"].notna().all() == with_replicates


def test_classify_run_refuses_features_of_another_version(tmp_path):
    run_dir = _run_dir(tmp_path, replicates=False)
    rundir.record_stage(run_dir, "collect", {}, 1.0)  # as runs before features versions recorded it
    with pytest.raises(
        RunError, match=f"features version 1, this interp classifies version {FEATURES_VERSION}"
    ):
        run_stage(run_dir)
    assert not (run_dir / "roles.csv").exists()
    rundir.record_stage(run_dir, "collect", {"features_version": FEATURES_VERSION}, 1.0)
    run_stage(run_dir)
    assert (run_dir / "roles.csv").exists()


def test_classify_run_without_features_fails_clearly(tmp_path):
    rundir.write_manifest(tmp_path, {"stages": {}})
    with pytest.raises(RunError, match="no features table"):
        run_stage(tmp_path)

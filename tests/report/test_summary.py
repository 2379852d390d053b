"""The numbers the report states: effect choice, prunable share, head table, shape."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from interp.ablate.removable import removable_fraction
from interp.report import formatting as F
from interp.report import pruning_summary as P
from interp.report import summary as S


def effects_frame(rows):
    cols = [
        "layer",
        "head",
        "ablation",
        "metric",
        "baseline",
        "ablated",
        "delta",
        "delta_rel",
        "ci_low",
        "ci_high",
        "estimator",
    ]
    return pd.DataFrame([dict(zip(cols, r)) for r in rows])


def test_a_share_of_one_head_in_hundreds_is_not_shown_as_none():
    from interp.report.formatting import small_percent

    assert (
        small_percent(1 / 270) == "0.4%"
        and small_percent(0.67) == "67%"
        and small_percent(0.0) == "0%"
    )


def test_preference_orders_name_only_what_the_ablate_stage_writes():
    from interp.ablate.catalogue import KINDS, METRICS

    assert set(S.METRIC_PREFERENCE) == set(METRICS)
    assert set(S.ABLATION_PREFERENCE) == set(KINDS)


def test_choose_effect_prefers_exact_then_mean_then_loss_prose():
    eff = effects_frame(
        [
            (0, 0, "zero", "loss_prose", 2.0, 2.5, 0.5, 0.25, 0.4, 0.6, "exact"),
            (0, 0, "mean", "loss_repeated", 1.0, 1.2, 0.2, 0.2, 0.1, 0.3, "exact"),
            (0, 0, "mean", "loss_prose", 2.0, 2.1, 0.1, 0.05, 0.0, 0.2, "attribution"),
        ]
    )
    assert S.choose_effect(eff) == S.EffectChoice("mean", "loss_repeated", "exact")
    only_attr = eff[eff["estimator"] == "attribution"]
    assert S.choose_effect(only_attr) == S.EffectChoice("mean", "loss_prose", "attribution")
    assert S.choose_effect(only_attr, exact_only=True) is None
    assert S.choose_effect(None) is None and S.choose_effect(eff.iloc[:0]) is None


def pruning_frame(metric, values):
    n = len(values) - 1
    return pd.DataFrame(
        {
            "fraction_removed": np.arange(n + 1) / n,
            "heads_removed": np.arange(n + 1),
            "metric": metric,
            "value": values,
            "last_removed": [np.nan] + [f"L0H{i}" for i in range(n)],
        }
    )


def test_prunable_share_stops_at_the_first_step_past_tolerance():
    # loss: 0.5% worse, 0.9% worse, 3% worse, then back to 0.5% (a lucky step that must not count)
    pr = pruning_frame("loss_prose", [2.0, 2.01, 2.018, 2.06, 2.01])
    assert removable_fraction(pr, "loss_prose", 0.01) == pytest.approx(0.5)
    assert removable_fraction(pr, "loss_prose", 0.05) == pytest.approx(1.0)


def test_prunable_table_states_the_interval_and_an_improvement():
    # a logit difference rises 0.6%, then 4.4%, then falls 11% below intact: effects say lower is worse
    pr = pruning_frame("sv_logit_diff", [0.90, 0.9054, 0.9396, 0.80])
    eff = effects_frame([(0, 0, "mean", "sv_logit_diff", 0.9, 0.8, 0.1, 0.11, 0.05, 0.15, "exact")])
    assert P.worse_sign("sv_logit_diff", eff) == -1
    assert removable_fraction(pr, "sv_logit_diff", 0.01) == pytest.approx(
        1 / 3
    )  # 4.4% better is not within 1%
    assert removable_fraction(pr, "sv_logit_diff", 0.05) == pytest.approx(2 / 3)
    stage = {
        "sv_logit_diff": {
            "1%": {"share": 1 / 3, "ci_low": 0.0, "ci_high": 2 / 3},
            "5%": {"share": 1.0, "ci_low": 0.5, "ci_high": 1.0},
        }
    }  # 5%: another rule's share
    table = P.prunable_table(pr, eff, stage)
    assert table.columns.tolist() == [
        "metric",
        "within_1%",
        "within_1%_low",
        "within_1%_high",
        "within_5%",
        "within_5%_low",
        "within_5%_high",
        "improved_by",
        "improved_at",
    ]
    row = table.iloc[0]
    assert (row["within_1%_low"], row["within_1%_high"]) == (0.0, pytest.approx(2 / 3))
    assert math.isnan(row["within_5%_low"]) and math.isnan(
        row["within_5%_high"]
    )  # the stage said otherwise
    assert row["improved_by"] == pytest.approx(0.044) and row["improved_at"] == pytest.approx(2 / 3)
    assert P.improvement_notes(table.to_dict("records")) == [
        "sv_logit_diff improves as heads are removed: 4% better than the intact model with 67% of the heads removed. "
        "The prunable shares count only steps within ±1% / ±5% of the intact model, on either side."
    ]
    assert math.isnan(
        P.prunable_table(pr, eff).iloc[0]["within_1%_low"]
    )  # no manifest record: no interval
    worse = P.prunable_table(pruning_frame("loss_prose", [2.0, 2.01, 2.5]), None)
    assert (
        math.isnan(worse.iloc[0]["improved_by"])
        and P.improvement_notes(worse.to_dict("records")) == []
    )


def test_heads_never_ablated_exactly_are_listed():
    eff = effects_frame(
        [
            (la, he, "mean", "loss_prose", 2.0, 2.1, 0.1, 0.05, 0.0, 0.2, "attribution")
            for la in range(2)
            for he in range(2)
        ]
        + [(0, 1, "mean", "loss_prose", 2.0, 2.1, 0.1, 0.05, 0.0, 0.2, "exact")]
    )
    assert S.unmeasured_heads(eff, 2, 2) == ["L0H0", "L1H0", "L1H1"]
    assert S.unmeasured_heads(None, 2, 2) is None


def test_estimates_whose_interval_excludes_the_exact_effect_are_listed():
    eff = effects_frame(
        [
            (0, h, "mean", "loss_repeated", 2.0, 2.0, 1e-5, 0.0, 0.9e-5, 1.1e-5, "attribution")
            for h in range(2)
        ]
    ).assign(vs_exact=["outside", np.nan])
    assert S.estimate_misses(eff) == ["L0H0 loss_repeated (attribution, mean)"]
    assert S.estimate_misses(eff.drop(columns="vs_exact")) == [] and S.estimate_misses(None) == []


def test_head_table_has_one_exact_effect_column_per_metric():
    roles = pd.DataFrame(
        {
            "layer": [0, 0],
            "head": [0, 1],
            "role": ["induction", "unexplained"],
            "confidence": [0.9, 0.4],
            "second_role": [np.nan, np.nan],
            "stability": [1.0, 0.5],
        }
    )
    eff = effects_frame(
        [
            (0, 1, "mean", "loss_prose", 2.0, 2.3, 0.3, 0.15, 0.2, 0.4, "exact"),
            (0, 1, "mean", "loss_repeated", 1.0, 4.0, 3.0, 3.0, 2.5, 3.5, "exact"),
            (
                0,
                1,
                "zero",
                "loss_repeated",
                1.0,
                9.0,
                8.0,
                8.0,
                7.5,
                8.5,
                "exact",
            ),  # not the ablation shown
            (0, 0, "mean", "loss_prose", 2.0, 2.9, 0.9, 0.45, 0.8, 1.0, "attribution"),
            (0, 0, "mean", "sv_logit_diff", 1.0, 0.5, 0.5, 0.5, 0.4, 0.6, "attribution"),
        ]
    )
    table = S.head_table(roles, eff)
    # a previous-token head can matter for repeated text only: every metric has its column
    assert table.columns.tolist() == [
        "layer",
        "head",
        "role",
        "confidence",
        "second_role",
        "stability",
        "Δ loss_prose",
        "Δ loss_repeated",
    ]
    assert table.loc[1, ["Δ loss_prose", "Δ loss_repeated"]].tolist() == pytest.approx([0.3, 3.0])
    assert table.loc[0, ["Δ loss_prose", "Δ loss_repeated"]].isna().all(), (
        "estimates are not the head's exact effect"
    )
    assert S.head_table(None, None) is None


def test_head_shape_from_manifest_else_tables():
    frame = pd.DataFrame({"layer": [0, 5], "head": [2, 0]})
    assert S.head_shape({"model": {"n_layers": 30, "n_heads": 9}}, frame) == (30, 9)
    assert S.head_shape({}, frame, None) == (6, 3)
    assert S.head_shape({}, None) == (0, 0)


def test_fmt():
    assert [F.fmt(v) for v in (None, float("nan"), np.int64(3), 2.0, 0.12345, 1e-5, True, "x")] == [
        "",
        "",
        "3",
        "2",
        "0.123",
        "1.00e-05",
        "yes",
        "x",
    ]


def test_orientation_without_effects_comes_from_the_metric():
    assert P.worse_sign("sv_logit_diff", None) == -1
    assert P.worse_sign("loss_prose", None) == 1
    assert P.worse_sign("made_up_metric", None) == 1


def test_report_and_ablate_stage_state_the_same_prunable_share():
    from interp.ablate.removable import removable_summary

    pr = pd.concat(
        [
            pruning_frame("loss_prose", [2.0, 2.01, 2.0198, 2.06, 2.2]),
            pruning_frame("sv_logit_diff", [0.9, 0.899, 0.85, 0.8, 0.1]),
        ]
    )
    stage = removable_summary(pr)
    table = P.prunable_table(pr, None).set_index("metric")
    for metric in ("loss_prose", "sv_logit_diff"):
        assert table.loc[metric, "within_1%"] == stage[metric]["1%"]
        assert table.loc[metric, "within_5%"] == stage[metric]["5%"]
    assert stage["loss_prose"] == {"1%": 0.5, "5%": 0.75}  # +0.5%, +0.99%, +3%, +10%


def test_best_effects_takes_the_exact_row_where_a_head_has_one():
    eff = effects_frame(
        [
            (0, 0, "zero", "loss_prose", 2.0, 2.1, 0.1, 0.05, 0.0, 0.2, "attribution"),
            (0, 1, "zero", "loss_prose", 2.0, 2.5, 0.5, 0.25, 0.3, 0.6, "attribution"),
            (0, 1, "zero", "loss_prose", 2.0, 2.9, 0.9, 0.45, 0.8, 1.0, "exact"),
            (
                0,
                1,
                "mean",
                "loss_prose",
                2.0,
                2.2,
                0.2,
                0.1,
                0.1,
                0.3,
                "exact",
            ),  # preferred ablation
        ]
    )
    best = S.best_effects(eff)
    assert best[["layer", "head", "delta", "estimator"]].values.tolist() == [[0, 1, 0.2, "exact"]]
    best = S.best_effects(eff[eff["ablation"] == "zero"])
    assert best[["head", "delta", "ci_low", "estimator"]].values.tolist() == [
        [0, 0.1, 0.0, "attribution"],
        [1, 0.9, 0.8, "exact"],
    ]
    assert S.best_effects(None) is None


def test_audit_pairs_and_rank_agreement():
    rows = []
    for head, (estimate, exact) in enumerate([(0.1, 0.2), (0.3, 0.1), (0.5, 0.9), (0.7, 1.1)]):
        rows += [
            (0, head, "zero", "loss_repeated", 1.0, 1.0 + exact, exact, exact, 0.0, 0.0, "exact"),
            (
                0,
                head,
                "zero",
                "loss_repeated",
                1.0,
                1.0 + estimate,
                estimate,
                estimate,
                0.0,
                0.0,
                "attribution",
            ),
        ]
    rows.append(
        (1, 0, "zero", "loss_repeated", 1.0, 1.5, 0.5, 0.5, 0.0, 0.0, "attribution")
    )  # estimate only
    pairs = S.audit_pairs(effects_frame(rows))
    assert pairs.columns.tolist() == ["metric", "layer", "head", "estimate", "exact"]
    assert pairs["head"].tolist() == [0, 1, 2, 3] and pairs["layer"].tolist() == [0, 0, 0, 0]
    assert S.rank_agreement(pairs) == pytest.approx(0.8)  # ranks 1 2 3 4 vs 2 1 3 4
    assert math.isnan(S.rank_agreement(pairs.iloc[:2]))
    assert S.audit_pairs(effects_frame(rows[::2])) is None  # exact only


def test_model_name_comes_from_the_manifest():
    assert S.model_name({"model": {"name": "smollm2-135m"}}) == "smollm2-135m"
    assert S.model_name({}) == "an unnamed model"


def test_a_model_loaded_from_a_path_is_named_by_its_stem_and_keeps_its_path():
    gguf = {
        "model": {
            "name": "../models/SmolLM2-135M-Instruct.Q4_1.gguf",
            "source": "gguf",
            "spec": {"name": "/home/me/models/SmolLM2-135M-Instruct.Q4_1.gguf"},
        }
    }
    folder = {
        "model": {
            "name": "/data/ckpt/my-llama/",
            "source": "hf-dir",
            "spec": {"name": "/data/ckpt/my-llama"},
        }
    }
    hub = {"model": {"name": "HuggingFaceTB/SmolLM2-135M-Instruct", "source": "hub"}}
    assert S.model_name(gguf) == "SmolLM2-135M-Instruct.Q4_1"
    assert (
        S.model_path(gguf) == "/home/me/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    )  # the one a rerun loads
    assert (S.model_name(folder), S.model_path(folder)) == ("my-llama", "/data/ckpt/my-llama")
    assert (S.model_name(hub), S.model_path(hub)) == ("HuggingFaceTB/SmolLM2-135M-Instruct", None)
    assert S.model_path({"model": {"name": "smollm2-135m", "source": "packaged"}}) is None


def test_role_pruning_table_reads_the_role_rows():
    pruning = pd.DataFrame(
        {
            "fraction_removed": [0.0, 0.25, 0.5, 0.0],
            "heads_removed": [0, 1, 2, 0],
            "metric": ["loss_prose", "loss_prose", "loss_prose", "sv_logit_diff"],
            "value": [2.0, 2.1, 2.5, 1.0],
            "last_removed": [np.nan, "L0H0", "L0H0 L1H1", np.nan],
            "ci_low": [1.9, 2.0, 2.3, 0.9],
            "ci_high": [2.1, 2.2, 2.7, 1.1],
            "removed_by": ["effect", "effect", "role:first_token", "effect"],
        }
    )
    table = P.role_pruning_table(pruning, None)
    assert table[["role", "heads", "metric"]].values.tolist() == [["first_token", 2, "loss_prose"]]
    assert table[["worse", "worse_low", "worse_high"]].values.tolist()[0] == pytest.approx(
        [0.25, 0.15, 0.35]
    )
    assert P.role_pruning_table(pruning.drop(columns="removed_by"), None) is None


def test_role_pruning_states_a_divergence_from_the_intact_model_in_its_own_units():
    """KL is 0 at the intact model (1e-8 after rounding): a role's KL is its change in nats, and
    the report's table prints it as a number, not as a percentage of the intact value."""
    kl = pruning_frame("kl_prose", [1e-8, 0.004, 0.03]).assign(
        ci_low=np.nan, ci_high=np.nan, removed_by="effect"
    )
    role = pd.DataFrame(
        {
            "fraction_removed": [0.5],
            "heads_removed": [1],
            "metric": ["kl_prose"],
            "value": [0.15],
            "last_removed": ["L0H1"],
            "ci_low": [0.12],
            "ci_high": [0.2],
            "removed_by": ["role:copying"],
        }
    )
    loss = pruning_frame("loss_prose", [2.0, 2.1]).assign(removed_by="effect")
    loss_role = role.assign(metric="loss_prose", value=2.5, ci_low=2.3, ci_high=2.7)
    table = P.role_pruning_table(pd.concat([kl, role, loss, loss_role]), None)
    kl_row = table[table["metric"] == "kl_prose"].iloc[0]
    assert [kl_row["worse"], kl_row["worse_low"], kl_row["worse_high"]] == pytest.approx(
        [0.15, 0.12, 0.2], abs=1e-7
    )
    from interp.report.document import _role_pruning_table

    shown = _role_pruning_table(table)
    cells = dict(zip(shown.columns, (c.text for c in shown.rows[0])))
    assert cells["loss_prose"] == "25% (15% … 35%)"
    assert cells["kl_prose"] == "0.15 (0.12 … 0.2)"


def test_the_estimators_own_corpus_is_stated_only_where_it_is_larger():
    sweep = {
        "loss_prose": {"n_sequences": 9, "n_scored": 137},
        "sv_logit_diff": {"n_sequences": 24, "n_scored": 24},
    }
    wide = {
        "loss_prose": {"n_sequences": 18, "n_scored": 310},
        "sv_logit_diff": {"n_sequences": 310, "n_scored": 306},
    }
    manifest = {"stages": {"ablate": {"corpus": sweep, "estimator_corpus": wide}}}
    assert S.estimator_reads(manifest) == (
        "The estimates that chose the exactly-ablated heads read more sequences than the exact sweep: scored "
        "positions on each metric's sequences, the exact sweep's in brackets: loss_prose 310 (137), sv_logit_diff 306 (24)."
    )
    assert (
        S.estimator_reads({"stages": {"ablate": {"corpus": sweep, "estimator_corpus": sweep}}})
        is None
    )
    assert S.estimator_reads({"stages": {"ablate": {"corpus": sweep}}}) is None
    # a sweep's corpus made for many rounds, its estimator on the first of them: nothing more read
    made = {
        f: {"n_sequences": 10 * n["n_sequences"], "n_scored": 10 * n["n_scored"]}
        for f, n in sweep.items()
    }
    assert (
        S.estimator_reads({"stages": {"ablate": {"corpus": made, "estimator_corpus": sweep}}})
        is None
    )
    assert S.estimator_reads({}) is None


def test_the_pruning_headline_reads_the_kl_curve():
    """A loss that improves as heads go must not make the model look prunable: the headline is the
    KL divergence from the intact model (absolute nats: 0 at the intact model), listed first."""
    pr = pd.concat(
        [
            pruning_frame("loss_prose", [2.0, 1.9, 1.5, 1.2]),  # improves by 40%
            # the intact step of a real curve rounds away from 0 (a pass over other batches)
            pruning_frame("kl_prose", [1e-8, 0.004, 0.03, 0.4]),
        ]
    )
    table = P.prunable_table(pr, None).to_dict("records")
    assert [r["metric"] for r in table] == ["kl_prose", "loss_prose"]
    top = P.headline(table)
    assert top["metric"] == "kl_prose"
    assert top["within_1%"] == pytest.approx(1 / 3) and top["within_5%"] == pytest.approx(2 / 3)
    assert not P.improved_row(top) and P.improved_row(table[1])
    corpus = pd.concat([pr, pruning_frame("kl_corpus", [0.0, 0.02, 0.03, 0.04])])
    assert P.headline(P.prunable_table(corpus, None).to_dict("records"))["metric"] == "kl_corpus"
    only_loss = P.prunable_table(pruning_frame("loss_prose", [2.0, 2.01, 2.5]), None)
    assert P.headline(only_loss.to_dict("records"))["metric"] == "loss_prose"
    assert P.headline(None) is None
    from interp.report.document import _cards

    cards = _cards({"shape": (2, 3), "role_counts": None, "prunable": table}).items
    assert [c.value for c in cards[1:]] == ["33% / 67%", "0% / 0%"]
    assert cards[1].label.startswith("of heads removable keeping the behaviour: KL from the intact")
    assert (
        cards[2].label == "prunable within 1% / 5% of loss_prose (improves as heads go: see below)"
    )


def test_precision_counts_say_how_many_more_positions_the_widest_open_effect_needs():
    effects = pd.DataFrame(
        {
            "layer": 0,
            "head": [0, 1, 2, 3],
            "ablation": "mean",
            "metric": "loss_repeated",
            "estimator": "exact",
            "delta": [1.0, 2.0, 1.0, 0.5],
            "ci_low": [0.95, 1.4, 0.7, 0.3],
            "ci_high": [1.05, 2.6, 1.3, 0.7],
            "vs_tolerance": "above",
            # head 2 is as wide as head 1 needs, but its prose ran out: more rounds cannot help
            "precision": ["met", "rounds", "corpus", "rounds"],
        }
    )
    (row,) = S.precision_counts(effects)
    assert (row["met"], row["rounds"], row["corpus"]) == (1, 2, 1)
    # head 1: (0.6 / 0.2)^2 = 9; head 3: (0.2 / 0.05)^2 = 16
    assert row["more_positions"] == pytest.approx(16.0)
    (loose,) = S.precision_counts(effects, rel=0.2)
    # head 1: (0.6 / 0.4)^2 = 2.25; head 3: (0.2 / 0.1)^2 = 4
    assert loose["more_positions"] == pytest.approx(4.0)


def test_role_pruning_reads_the_paired_change_interval_where_the_table_has_it():
    pruning = pd.DataFrame(
        {
            "fraction_removed": [0.0, 0.5],
            "heads_removed": [0, 2],
            "metric": ["loss_prose", "loss_prose"],
            "value": [2.0, 2.5],
            "last_removed": [np.nan, "L0H0 L1H1"],
            "ci_low": [1.0, 1.5],
            "ci_high": [3.0, 3.5],
            "change_low": [0.0, 0.4],
            "change_high": [0.0, 0.6],
            "removed_by": ["effect", "role:first_token"],
        }
    )
    table = P.role_pruning_table(pruning, None)
    # the change 0.5 (0.4 .. 0.6) over the intact 2.0, not the level's (1.5 .. 3.5) minus 2.0
    assert table[["worse", "worse_low", "worse_high"]].values.tolist()[0] == pytest.approx(
        [0.25, 0.2, 0.3]
    )
    # a run written before the change columns: the level's interval, as then
    old = P.role_pruning_table(pruning.drop(columns=["change_low", "change_high"]), None)
    assert old[["worse_low", "worse_high"]].values.tolist()[0] == pytest.approx([-0.25, 0.75])

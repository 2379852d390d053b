"""Figures: each needs its table, keeps to the head-grid convention, and copes with odd tokens."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from fakes import REPEATED, fake_exemplars
from matplotlib.collections import PolyCollection, QuadMesh
from matplotlib.patches import Rectangle

from interp.collect.exemplars import Exemplars, Probe
from interp.pipeline.results import load_run
from interp.report import effect_plots as E
from interp.report import exemplar_plots as X
from interp.report import feature_plots, plots
from interp.report.figures import png_bytes, role_code
from interp.roles import ROLE_NAMES


def test_each_figure_is_skipped_without_its_table(tmp_path):
    assert plots.plot_role_map(None, tmp_path) is None
    assert plots.plot_role_counts(pd.DataFrame(), tmp_path) is None
    assert plots.plot_sink_by_layer(None, tmp_path) is None
    assert feature_plots.plot_feature_heatmaps(None, tmp_path) is None
    assert E.plot_effect_maps(None, tmp_path) is None
    assert E.plot_effect_vs_role(None, None, tmp_path) is None
    assert E.plot_estimator_audit(None, None, tmp_path) is None
    assert E.plot_score_vs_effect(None, None, tmp_path) is None
    assert E.plot_pruning(None, tmp_path) is None
    assert X.plot_exemplars(None, None, None, tmp_path) is None
    assert not list(tmp_path.iterdir())


def test_role_map_reads_top_down_for_a_30_by_9_model_with_its_sink_map(make_fake_run, tmp_path):
    roles = load_run(make_fake_run(tmp_path, n_layers=30, n_heads=9, tables=("roles",))).roles
    fig = plots.role_map_figure(roles, (30, 9))
    ax, sink = fig.axes[0], fig.axes[1]
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"L{i}" for i in range(30)]
    assert [t.get_text() for t in ax.get_xticklabels()] == [f"H{i}" for i in range(9)]
    bottom, top = ax.get_ylim()
    assert bottom > top, "layer 0 is at the top"
    assert fig.get_size_inches()[1] >= 30 * 0.3, "rows tall enough for their labels"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[-1].endswith("unexplained") and len(legend) == roles["role"].nunique()
    assert sink.get_title() == "sink mass"
    mesh = next(c for c in sink.collections if isinstance(c, QuadMesh))
    first = roles.sort_values(["layer", "head"])["sink_mass"].to_numpy().reshape(30, 9)
    np.testing.assert_allclose(np.ma.getdata(mesh.get_array()).reshape(30, 9), first)


def test_role_map_cell_text_and_colour_follow_role_and_confidence():
    roles = pd.DataFrame(
        {
            "layer": [0, 0],
            "head": [0, 1],
            "role": ["induction", "unexplained"],
            "confidence": [1.0, 0.5],
        }
    )
    fig = plots.role_map_figure(roles, (1, 3))
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["Ind 1", "? .50"]  # the third head has no row: no text
    mesh = next(c for c in fig.axes[0].collections if isinstance(c, QuadMesh))
    colours = mesh.get_facecolors()[:, :3]
    np.testing.assert_allclose(
        colours[0], [0xD6 / 255, 0x27 / 255, 0x28 / 255], atol=1e-6
    )  # induction, sure
    np.testing.assert_allclose(
        colours[1], 0.65 * np.array([0xB0 / 255] * 3) + 0.35, atol=1e-6
    )  # paler


def test_no_two_roles_share_a_role_map_code():
    codes = {role: role_code(role) for role in ROLE_NAMES}
    assert len(set(codes.values())) == len(codes)
    assert (codes["first_token"], codes["frequent_token"]) == ("FT", "FrT")  # catalogue order
    assert (codes["induction"], codes["inactive"], codes["unexplained"]) == ("Ind", "Ina", "?")
    assert role_code("first_tail") == "FiT"  # a role outside the catalogue takes a free code


def test_feature_facets_split_into_figures_of_twelve(make_fake_run, tmp_path):
    run = load_run(make_fake_run(tmp_path, tables=("features",)))
    many = pd.concat(
        [run.features.assign(feature=lambda f, i=i: f["feature"] + f":{i}") for i in range(3)]
    )
    saved = feature_plots.plot_feature_heatmaps(many, tmp_path / "figs", (4, 3))
    assert len(saved) == 3 and all(s.png.exists() and s.svg.exists() for s in saved)  # 33 features


def test_few_features_on_a_small_grid_are_annotated(make_fake_run, tmp_path):
    run = load_run(make_fake_run(tmp_path, tables=("features",)))
    two = run.features[run.features["feature"].isin(["induction", "previous_token"])]
    fig = feature_plots._features_figure(two, ["previous_token", "induction"], (4, 3), "t")
    values = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert len(values) == 2 * 12 and "0.60" in values and "-0.00" not in values


def effects_of(rows):
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


QUICK = effects_of(
    [  # a --quick run: attribution for every head, exact for one, and a metric with exact only
        (0, 0, "zero", "loss_prose", 2.0, 2.1, 0.1, 0.05, 0.0, 0.2, "attribution"),
        (0, 1, "zero", "loss_prose", 2.0, 2.5, 0.5, 0.25, 0.3, 0.6, "attribution"),
        (0, 1, "zero", "loss_prose", 2.0, 2.9, 0.9, 0.45, 0.8, 1.0, "exact"),
        (0, 0, "zero", "loss_repeated", 1.0, 1.4, 0.4, 0.4, 0.3, 0.5, "exact"),
    ]
)


def test_effect_maps_one_facet_per_metric_exact_where_present(tmp_path):
    fig = E._effect_maps_figure(E.S.best_effects(QUICK), (1, 2), "zero")
    maps = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title().split("\n")[0] for ax in maps] == ["loss_prose", "loss_repeated"]
    prose = maps[0]
    assert "exact for 1 heads (outlined)" in prose.get_title()
    assert [t.get_text() for t in prose.texts] == [
        "0.10",
        "0.90",
    ]  # head 1: the exact 0.9, not the 0.5 estimate
    outlined = [p for p in prose.patches if isinstance(p, Rectangle) and not p.get_fill()]
    assert [(p.get_x(), p.get_y()) for p in outlined] == [(1, 0)]
    assert maps[1].get_title() == "loss_repeated\nexact; 1 of 2 heads measured"


def test_effect_vs_role_draws_each_heads_interval():
    roles = pd.DataFrame(
        {"layer": [0, 0], "head": [0, 1], "role": ["induction", "induction"], "confidence": 0.9}
    )
    data = E._with_roles(E.S.best_effects(QUICK), roles)
    fig = E._effect_vs_role_figure(data, "zero")
    prose = next(ax for ax in fig.axes if ax.get_title() == "loss_prose")
    bars = [c for c in prose.collections if c.__class__.__name__ == "LineCollection"]
    segments = sorted(tuple(np.round(s[:, 1], 6)) for c in bars for s in c.get_segments())
    assert segments == [(0.0, 0.2), (0.8, 1.0)]


def test_estimator_audit_pairs_only_heads_measured_both_ways(tmp_path):
    assert E.plot_estimator_audit(QUICK[QUICK["estimator"] == "exact"], None, tmp_path) is None
    saved = E.plot_estimator_audit(QUICK, None, tmp_path)
    assert saved is not None and saved.png.exists()


def test_pruning_draws_a_ci_band_only_when_the_table_has_one(make_fake_run, tmp_path):
    banded = load_run(make_fake_run(tmp_path, tables=("pruning",))).pruning
    pruning = banded.drop(
        columns=["ci_low", "ci_high", "change_low", "change_high"], errors="ignore"
    )

    def bands(fig):
        return sum(isinstance(c, PolyCollection) for ax in fig.axes for c in ax.collections)

    assert bands(E._pruning_figure(pruning, None)) == 0
    assert bands(E._pruning_figure(banded, None)) == 2  # one per metric
    assert "Grey band" in E.plot_pruning(banded, tmp_path / "f").caption


def test_the_pruning_band_is_the_paired_change_around_the_intact_value():
    steps = pd.DataFrame(
        {
            "value": [2.0, 2.5, 4.0],
            "ci_low": [1.0, 1.4, 2.9],
            "ci_high": [3.0, 3.6, 5.1],
            "change_low": [0.0, 0.4, 1.8],
            "change_high": [0.0, 0.6, 2.2],
        }
    )
    low, high = E.pruning_band(steps)
    assert low.tolist() == [2.0, 2.4, 3.8] and high.tolist() == [2.0, 2.6, 4.2]
    old = steps.assign(change_low=np.nan, change_high=np.nan)  # a run written before them
    low, high = E.pruning_band(old)
    assert low.tolist() == [1.0, 1.4, 2.9] and high.tolist() == [3.0, 3.6, 5.1]
    assert E.pruning_band(steps[["value"]]) is None


def test_token_labels_are_plain_visible_text():
    assert X.token_label("<script>alert(1)</script>") == "<script>alert…"
    assert X.token_label("new\nline") == "new↵line"
    assert X.token_label("\x00a") == "<0x00>a"
    assert X.token_label("  ") == "␣␣" and X.token_label("") == "∅"
    assert X.token_label("$x$") == "$x$"  # mathtext is off: drawn as written


# Tokens that drew as empty boxes or as nothing: newline, tab, control and byte tokens, SentencePiece
# and byte-level BPE spaces, a replacement character, invisible format characters, a lone vowel
# sign, CJK, emoji, other spaces.
HARD_TOKENS = (
    "\n",
    "\t",
    "a\r\n",
    "\x1b[0m",
    "<0x0A>",
    "▁the",
    "Ġhello\u010a",
    "\ufffd",
    "zero\u200bwidth",
    "\ufeff",
    "\u0940",
    "猫",
    "🙂",
    "\u00a0x\u3000",
    "\ue000",
)


def test_hard_tokens_get_exact_stand_ins_with_only_the_shipped_fonts():
    from interp.report.glyphs import token_text

    shipped = (
        "DejaVu Sans",
        "STIXGeneral",
    )  # what matplotlib itself ships: the same on every machine
    assert [token_text(t, shipped) for t in HARD_TOKENS] == [
        "↵",
        "→",
        "a↵↵",
        "<0x1B>[0m",
        "<0x0A>",
        "▁the",
        "ĠhelloĊ",
        "\ufffd",
        "zero<U+200B>width",
        "<U+FEFF>",
        "<U+0940>",
        "<U+732B>",
        "<U+1F642>",
        "␣x␣",
        "<U+E000>",
    ]
    assert (
        token_text("\u0301e", ("DejaVu Sans",)) == "◌\u0301e"
    )  # a mark that opens a token gets a base


def test_no_token_label_is_an_empty_box():
    """Every character of every label has a glyph in the fonts the labels are drawn in, and
    matplotlib draws them without a missing-glyph warning (the warning that comes with a box)."""
    from interp.report.glyphs import drawable

    labels = [X.token_label(t) for t in HARD_TOKENS]
    assert all(drawable(ch) for label in labels for ch in label), labels
    assert all(label.strip() for label in labels)
    n = len(HARD_TOKENS)
    probe = Probe("prose", "natural", HARD_TOKENS, n, np.eye(n)[None, None])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font(s)" would fail here
        fig = X.exemplar_figure(probe, 0, 0)
        assert png_bytes(fig).startswith(b"\x89PNG")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == labels


def test_exemplar_with_dollars_and_control_chars_renders():
    probe = Probe(
        "repeated", "repeated", ("$", "$x^2$", "\\frac", "\x07", "漢"), 5, np.eye(5)[None, None]
    )
    with warnings.catch_warnings():
        warnings.simplefilter(
            "error"
        )  # a mathtext error, a missing glyph or any warning would fail here
        assert png_bytes(X.exemplar_figure(probe, 0, 0)).startswith(b"\x89PNG")


def test_strongest_head_per_role_by_lift_among_heads_of_that_role():
    roles = pd.DataFrame(
        {
            "layer": [0, 1, 2, 3],
            "head": 0,
            "confidence": 0.9,
            "score_induction": [0.9, 0.2, 0.1, 0.1],
            "role": ["induction", "induction", "syntactic", "unexplained"],
        }
    )
    features = pd.DataFrame(
        {
            "layer": [0, 1, 2, 3, 2],
            "head": 0,
            "baseline": 0.1,
            "value": [0.3, 0.7, 0.5, 0.99, 0.2],
            "feature": [
                "induction",
                "induction",
                "syntactic:nsubj:head2dep",
                "induction",
                "syntactic:amod:dep2head",
            ],
        }
    )
    picks = X.strongest_heads(roles, features)
    assert [(p.role, p.layer, p.strength) for p in picks] == [
        ("induction", 1, pytest.approx(0.6)),
        ("syntactic", 2, pytest.approx(0.4)),
    ]
    by_score = X.strongest_heads(roles, None)  # no features table: the role's score
    assert [(p.role, p.layer, p.measure) for p in by_score] == [
        ("induction", 0, "score_induction"),
        ("syntactic", 2, "confidence"),
    ]


def test_strongest_head_by_raw_share_where_the_table_has_it():
    """A head that parks 0.9 on the sink and 0.09 on the induction targets scores 0.9 renormalised:
    the raw share (how much it attends) picks the head that attends there most; syntactic has no
    raw share and keeps its lift; unmeasured heads are never picked."""
    roles = pd.DataFrame(
        {
            "layer": [0, 1, 2, 3],
            "head": 0,
            "confidence": 0.9,
            "role": ["induction", "induction", "syntactic", "unmeasured"],
        }
    )
    features = pd.DataFrame(
        {
            "layer": [0, 1, 2, 3],
            "head": 0,
            "baseline": 0.1,
            "value": [0.9, 0.5, 0.6, 0.99],
            "raw": [0.09, 0.4, np.nan, 0.5],
            "feature": ["induction", "induction", "syntactic:nsubj:head2dep", "induction"],
        }
    )
    picks = X.strongest_heads(roles, features)
    assert [(p.role, p.layer, p.strength, p.measure) for p in picks] == [
        ("induction", 1, pytest.approx(0.4), "induction raw share"),
        ("syntactic", 2, pytest.approx(0.5), "syntactic lift"),
    ]


def test_each_role_is_shown_on_the_probe_kind_its_feature_reads():
    from interp.collect.features import FEATURE_PROBE_KINDS, position_name
    from interp.probes.base import NATURAL, SYNTAX
    from interp.roles import LOOKS, ROLES

    for role in LOOKS:
        kind = X.SHOWN_ON.get(role, X.DEFAULT_KIND)
        feature = position_name(1) if role == "positional" else ROLES[role].feature
        reads = (SYNTAX,) if role == "syntactic" else FEATURE_PROBE_KINDS[feature]
        assert kind in reads, role
    assert X.DEFAULT_KIND == NATURAL
    exemplars = fake_exemplars(2, 2)
    assert X.probe_for("induction", exemplars).tokens == REPEATED
    assert X.probe_for("syntactic", exemplars).suite == "syntax"
    assert X.probe_for("local", Exemplars(exemplars.probes[1:2])).suite == "repeated", (
        "else the first probe"
    )


def test_a_positional_head_is_picked_by_its_best_position():
    roles = pd.DataFrame({"layer": [0, 1], "head": 0, "confidence": 0.9, "role": "positional"})
    features = pd.DataFrame(
        {
            "layer": [0, 0, 1, 1],
            "head": 0,
            "baseline": 0.1,
            "value": [0.2, 0.5, 0.8, 0.3],
            "feature": ["position:1", "position:end-1", "position:2", "previous_token"],
        }
    )
    picks = X.strongest_heads(roles, features)
    assert [(p.role, p.layer, p.strength, p.measure) for p in picks] == [
        ("positional", 1, pytest.approx(0.7), "positional lift")
    ]

"""Figures: each needs its table, keeps to the head-grid convention, and copes with odd tokens."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from interp.report import exemplars as X
from interp.report import plots
from interp.report.figures import png_bytes
from interp.rundir import load_run


def test_each_figure_is_skipped_without_its_table(tmp_path):
    assert plots.plot_role_map(None, tmp_path) is None
    assert plots.plot_role_counts(pd.DataFrame(), tmp_path) is None
    assert plots.plot_feature_heatmaps(None, tmp_path) is None
    assert plots.plot_effect_heatmap(None, tmp_path) is None
    assert plots.plot_effect_by_role(None, None, tmp_path) is None
    assert plots.plot_score_vs_effect(None, None, tmp_path) is None
    assert plots.plot_pruning(None, tmp_path) is None
    assert plots.plot_exemplars(None, tmp_path) is None
    assert not list(tmp_path.iterdir())


def test_role_map_reads_top_down_for_a_30_by_9_model(make_fake_run, tmp_path):
    roles = load_run(make_fake_run(tmp_path, n_layers=30, n_heads=9, tables=("roles",))).roles
    fig = plots.role_map_figure(roles, (30, 9))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"L{i}" for i in range(30)]
    assert [t.get_text() for t in ax.get_xticklabels()] == [f"H{i}" for i in range(9)]
    bottom, top = ax.get_ylim()
    assert bottom > top, "layer 0 is at the top"
    assert fig.get_size_inches()[1] >= 30 * 0.3, "rows tall enough for their labels"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[-1].endswith("unexplained") and len(legend) == roles["role"].nunique()


def test_feature_facets_split_into_figures_of_twelve(make_fake_run, tmp_path):
    run = load_run(make_fake_run(tmp_path, tables=("features",)))
    many = pd.concat([run.features.assign(feature=lambda f, i=i: f["feature"] + f":{i}") for i in range(3)])
    saved = plots.plot_feature_heatmaps(many, tmp_path / "figs", (4, 3))
    assert len(saved) == 3 and all(s.png.exists() and s.svg.exists() for s in saved)  # 33 features


def test_few_features_on_a_small_grid_are_annotated(make_fake_run, tmp_path):
    run = load_run(make_fake_run(tmp_path, tables=("features",)))
    two = run.features[run.features["feature"].isin(["induction", "previous_token"])]
    fig = plots._features_figure(two, ["previous_token", "induction"], (4, 3), "t")
    values = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert len(values) == 2 * 12 and "0.60" in values and "-0.00" not in values


def test_token_labels_are_plain_visible_text():
    assert X.token_label("<script>alert(1)</script>") == "<script>alert…"
    assert X.token_label("new\nline") == "new↵line"
    assert X.token_label("\x00a") == "·a"
    assert X.token_label("  ") == "␣␣" and X.token_label("") == "∅"
    assert X.token_label("$x$") == "$x$"  # mathtext is off: drawn as written


def test_exemplar_with_dollars_and_control_chars_renders():
    ex = X.Exemplar("induction", "induction", 0, 0, "repeated", ("$", "$x^2$", "\\frac", "\x07", "漢"),
                    np.eye(5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a mathtext error or any warning would fail here
        warnings.filterwarnings("ignore", message="Glyph .* missing")
        assert png_bytes(X.exemplar_figure(ex)).startswith(b"\x89PNG")


def test_strongest_head_per_role_and_syntactic_prefix():
    pattern = np.eye(3).tolist()
    item = lambda feature, layer, head: {"feature": feature, "layer": layer, "head": head, "suite": "s",
                                         "tokens": ["a", "b", "c"], "pattern": pattern}
    features = pd.DataFrame({"layer": [0, 1, 2], "head": [0, 0, 0], "value": [0.3, 0.9, 0.5], "baseline": 0.1,
                             "feature": ["induction", "induction", "syntactic:nsubj:head2dep"]})
    items = [item("induction", 0, 0), item("induction", 1, 0), item("syntactic:nsubj:head2dep", 2, 0),
             item("not_a_feature", 0, 0), {"feature": "induction"}, item("previous_token", 0, 1) | {"pattern": [[1.0] * 5]}]
    best = X.strongest_per_role(items, features)
    assert [(e.role, e.layer) for e in best] == [("induction", 1), ("syntactic", 2)]

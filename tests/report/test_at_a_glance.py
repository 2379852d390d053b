"""What a reader takes in at a glance: the unexplained-head clusters say whether they separate,
the heads table shows every metric, empty feature panels say why they are empty."""

from __future__ import annotations

import pandas as pd

from interp.pipeline import rundir
from interp.report import content as C
from interp.report.html import build_document

XSS = "<script>alert(1)</script>"


def section(doc, sid: str) -> C.Section:
    return next(s for s in doc.sections if s.id == sid)


def test_one_group_of_two_heads_cannot_be_told_apart(make_fake_run, tmp_path):
    doc = build_document(
        make_fake_run(tmp_path, tables=("roles",), exemplars=False)
    )  # clusters: 2 heads, 1 group
    blocks = section(doc, "clusters").blocks
    verdict, table = blocks[1], blocks[2]
    assert (verdict.text, verdict.style) == (
        "2 heads of the 2 unexplained heads fall into 1 group. With a single "
        "group, the heads cannot be told apart on these features.",
        "note",
    )
    assert table.columns == ("cluster", "heads", "layers", "silhouette", "description", "members")
    assert [[c.text for c in row] for row in table.rows] == [
        ["0", "2", "L1–L3", "", f"more delimiter (lift 0.30 vs 0.01) {XSS}", "L1H0 L3H1"]
    ]
    assert table.wrap == (False, False, False, False, True, True)


def test_lopsided_groups_that_do_not_separate_are_named_as_such(make_fake_run, tmp_path):
    unexplained = [(layer, head) for layer in range(4) for head in range(3)][:10]
    run_dir = make_fake_run(
        tmp_path,
        tables=("roles",),
        exemplars=False,
        roles_override={h: "unexplained" for h in unexplained},
    )  # and (3, 1): 11 unexplained
    rows = [
        {
            "cluster": 0 if i < 8 else 1,
            "layer": l,
            "head": h,
            "description": "d0" if i < 8 else "d1",
            "silhouette": 0.1,
        }
        for i, (l, h) in enumerate(unexplained)
    ]
    rundir.write_table(run_dir, "clusters", pd.DataFrame(rows))
    blocks = section(build_document(run_dir), "clusters").blocks
    assert (blocks[1].text, blocks[1].style) == (
        "10 heads of the 11 unexplained heads fall into 2 groups. One group holds 8 of them: on these features most "
        "unexplained heads look alike. The groups do not separate (mean silhouette 0.10, under 0.25): the unexplained "
        "heads vary along a continuum that these groups only cut, so read each description as a tendency, not a kind "
        "of head.",
        "note",
    )
    assert [[c.text for c in row[:4]] for row in blocks[2].rows] == [
        ["0", "8", "L0–L2", "0.1"],
        ["1", "2", "L2–L3", "0.1"],
    ]


def test_an_empty_feature_panel_says_why(make_fake_run, tmp_path):
    """next_token has no eligible query in a causal model (n = 0, value NaN for every head): its
    panel says so in it, loses its colour bar, and the caption names it; a head-less NaN feature
    with queries is a measurement failure and says that instead."""
    from matplotlib import pyplot as plt

    from interp.pipeline.results import load_run
    from interp.report import feature_plots

    features = load_run(
        make_fake_run(tmp_path, tables=("features",), exemplars=False, clusters=False)
    ).features
    heads = features[["layer", "head"]].drop_duplicates()
    empty = heads.assign(feature="next_token", value=float("nan"), baseline=float("nan"), n=0)
    lost = heads.assign(feature="position:1", value=float("nan"), baseline=0.1, n=300)
    features = pd.concat(
        [features[features["feature"] != "next_token"], empty, lost], ignore_index=True
    )
    names = feature_plots.feature_order(features["feature"])
    assert feature_plots.empty_features(features, names, causal=True) == {
        "next_token": "no eligible query in a causal model",
        "position:1": "no head measured (NaN attention)",
    }
    assert feature_plots.empty_features(features, ["next_token"], causal=False) == {
        "next_token": "no eligible query in these probes"
    }

    fig = feature_plots._features_figure(features, names, (4, 3), "t")
    bars = len(fig.axes)
    caption = feature_plots._say_empty(
        fig, feature_plots.empty_features(features, names, causal=True)
    )
    assert caption == (
        " Empty: next_token: no eligible query in a causal model (its queries never see the position "
        "these features read). Empty: position:1: no head measured (NaN attention)."
    )
    panel = next(ax for ax in fig.axes if ax.get_title() == "next_token")
    assert [t.get_text() for t in panel.texts] == ["no eligible query\nin a causal model"]
    assert len(fig.axes) == bars - 2  # the two empty panels' colour bars are gone
    full = next(ax for ax in fig.axes if ax.get_title() == "previous_token")
    assert not any(
        t.get_text().startswith("no ") for t in full.texts
    )  # a panel with values says nothing
    plt.close(fig)

    saved = feature_plots.plot_feature_heatmaps(features, tmp_path / "figs", (4, 3), causal=True)
    assert saved[0].caption.endswith("an empty panel says why in it." + caption)

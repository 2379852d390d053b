"""compare_runs: two role maps side by side, the heads whose primary role differs, and what
changed for each matching head (role scores, feature lifts, effects on every metric)."""

from __future__ import annotations

import re

import pytest

from interp.pipeline import rundir
from interp.pipeline.results import load_run
from interp.report.html import compare_runs, role_differences


def test_lists_the_one_head_that_differs(make_fake_run, tmp_path):
    a = make_fake_run(tmp_path, "a", tables=("roles",), exemplars=False, clusters=False)
    b = make_fake_run(
        tmp_path,
        "b",
        tables=("roles",),
        exemplars=False,
        clusters=False,
        roles_override={(1, 1): "induction"},
    )
    diff = role_differences(load_run(a).roles, load_run(b).roles)
    assert diff[["layer", "head", "role_a", "role_b"]].values.tolist() == [
        [1, 1, "duplicate_token", "induction"]
    ]

    html = compare_runs(a, b, tmp_path / "out" / "compare.html").read_text(encoding="utf-8")
    assert html.count('src="data:image/png;base64,') == 2
    assert "Heads whose primary role differs (mixed in both: whose blend does): 1 of 12." in html
    rows = re.findall(
        r"<tr><td class=\"num\" data-sort=\"[^\"]*\">(\d+)</td><td class=\"num\" data-sort=\"[^\"]*\">(\d+)</td>",
        html.split('id="diff-table"', 1)[1].split("</table>", 1)[0],
    )
    assert rows == [("1", "1")]
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)" in html
    changes = html.split('id="changes-table"', 1)[1].split("</table>", 1)[0]
    assert changes.count("<tr>") == 1 + 12  # the header and every matching head


def _pair(make_fake_run, tmp_path):
    """Two fake runs of one model: B's head (1, 1) is an induction head, B's head (2, 0)'s
    previous_token lift is 0.4 higher, its role scores moved, and its effect on loss_repeated
    is 5 higher."""
    a = load_run(
        make_fake_run(
            tmp_path, "a", tables=("features", "roles", "effects"), exemplars=False, clusters=False
        )
    )
    b = load_run(
        make_fake_run(
            tmp_path,
            "b",
            tables=("features", "roles", "effects"),
            exemplars=False,
            clusters=False,
            roles_override={(1, 1): "induction"},
        )
    )
    at = lambda frame, layer, head: (frame["layer"] == layer) & (frame["head"] == head)  # noqa: E731
    features = b.features.copy()
    features.loc[at(features, 2, 0) & (features["feature"] == "previous_token"), "value"] += 0.4
    roles = b.roles.copy()
    roles.loc[at(roles, 2, 0), ["score_induction", "score_broad"]] = roles.loc[
        at(roles, 2, 0), ["score_induction", "score_broad"]
    ].to_numpy() + [0.3, -0.2]
    effects = b.effects.copy()
    effects.loc[at(effects, 2, 0) & (effects["metric"] == "loss_repeated"), "delta"] += 5.0
    b.tables.update(features=features, roles=roles, effects=effects)
    return a, b


def test_score_differences_name_the_role_score_and_the_feature_that_moved(make_fake_run, tmp_path):
    from interp.report.compare import score_differences

    a, b = _pair(make_fake_run, tmp_path)
    changes = score_differences(a, b)
    assert len(changes) == 12
    assert changes.columns.tolist() == [
        "layer",
        "head",
        "role_a",
        "role_b",
        "confidence_a",
        "confidence_b",
        "score_moved_most",
        "score_change",
        "feature_moved_most",
        "feature_change",
    ]
    first = changes.iloc[0]  # the head whose role changed comes first
    assert (first["layer"], first["head"], first["role_a"], first["role_b"]) == (
        1,
        1,
        "duplicate_token",
        "induction",
    )
    moved = changes[(changes["layer"] == 2) & (changes["head"] == 0)].iloc[0]
    assert (moved["score_moved_most"], moved["score_change"]) == ("induction", pytest.approx(0.3))
    assert (moved["feature_moved_most"], moved["feature_change"]) == (
        "previous_token",
        pytest.approx(0.4),
    )
    assert (
        changes.index[(changes["layer"] == 2) & (changes["head"] == 0)][0] == 1
    )  # the largest move next
    rest = changes.iloc[2:]
    assert (rest["score_change"].abs() < 1e-12).all() and (
        rest["feature_change"].abs() < 1e-12
    ).all()
    assert (
        rest["score_moved_most"].isna().all() and rest["feature_moved_most"].isna().all()
    )  # nothing to name


def test_effect_differences_have_every_metric_and_rank_the_largest_change_first(
    make_fake_run, tmp_path
):
    from interp.report.compare import effect_differences

    a, b = _pair(make_fake_run, tmp_path)
    changes = effect_differences(a, b)
    metrics = ("loss_prose", "loss_repeated", "sv_logit_diff")
    assert changes.columns.tolist() == [
        "layer",
        "head",
        "role_a",
        "role_b",
        *(f"{m} {x}" for m in metrics for x in ("A", "B", "Δ")),
    ]
    assert len(changes) == 12
    first = changes.iloc[0]
    assert (first["layer"], first["head"]) == (2, 0)
    assert first["loss_repeated Δ"] == pytest.approx(5.0)
    assert first["loss_repeated B"] - first["loss_repeated A"] == pytest.approx(5.0)
    assert first["loss_prose Δ"] == pytest.approx(0.0) and first[
        "sv_logit_diff Δ"
    ] == pytest.approx(0.0)
    # then the new induction head (the fake effects are larger for induction heads), then no change at all
    assert (changes.iloc[1]["layer"], changes.iloc[1]["head"]) == (1, 1)
    assert (changes.iloc[1][[f"{m} Δ" for m in metrics]].abs() > 0.1).all()
    assert (changes.iloc[2:][[f"{m} Δ" for m in metrics]].abs() < 1e-12).all().all()


def test_the_page_shows_score_and_effect_changes(make_fake_run, tmp_path):
    a, b = _pair(make_fake_run, tmp_path)
    for run in (a, b):  # the modified tables, written back for compare_runs to read
        for name in ("features", "roles", "effects"):
            rundir.write_table(run.path, name, run.tables[name])
    html = compare_runs(a.path, b.path, tmp_path / "compare.html").read_text(encoding="utf-8")
    effects = html.split('id="effect-changes-table"', 1)[1].split("</table>", 1)[0]
    head = effects.split("</thead>", 1)[0]
    assert re.findall(
        r"<button type=\"button\">([^<]+)</button>", head
    ) == [  # B = A + Δ: left out, to fit
        "layer",
        "head",
        "role A",
        "loss_prose A",
        "loss_prose Δ",
        "loss_repeated A",
        "loss_repeated Δ",
        "sv_logit_diff A",
        "sv_logit_diff Δ",
    ]
    first_row = effects.split("<tbody>", 1)[1].split("</tr>", 1)[0]
    assert re.findall(r'data-sort="[^"]*">([^<]*)</td>', first_row)[:2] == ["2", "0"]
    assert "mean ablation, exact" in html
    scores = html.split('id="changes-table"', 1)[1].split("</table>", 1)[0]
    assert "previous_token" in scores and scores.count("<tr>") == 1 + 12


def test_different_shapes_show_both_maps_and_say_why(make_fake_run, tmp_path):
    a = make_fake_run(tmp_path, "a", tables=("roles",), exemplars=False, clusters=False)
    c = make_fake_run(
        tmp_path, "c", n_layers=2, n_heads=4, tables=("roles",), exemplars=False, clusters=False
    )
    html = compare_runs(a, c, tmp_path / "compare.html").read_text(encoding="utf-8")
    assert "shapes differ (4 × 3 vs 2 × 4" in html
    assert html.count('src="data:image/png;base64,') == 2
    assert 'id="diff-table"' not in html


def test_run_without_roles_is_named(make_fake_run, tmp_path):
    a = make_fake_run(tmp_path, "a", tables=("roles",), exemplars=False, clusters=False)
    f = make_fake_run(tmp_path, "f", tables=("features",), exemplars=False, clusters=False)
    html = compare_runs(a, f, tmp_path / "compare.html").read_text(encoding="utf-8")
    assert "/ f has no roles table" in html
    assert "<title>Role maps: tiny-a &lt;script&gt;" in html, "labels name the model, escaped"
    assert html.count('src="data:image/png;base64,') == 1


def test_role_differences_say_which_evidence_decided_in_each_run():
    import numpy as np
    import pandas as pd

    a = pd.DataFrame(
        {
            "layer": [0, 0],
            "head": [0, 1],
            "role": ["unexplained", "broad"],
            "confidence": 0.9,
            "evidence": [np.nan, "attention"],
        }
    )
    b = a.assign(role=["copy_suppression", "broad"], evidence=["weights", "attention"])
    diff = role_differences(a, b)
    assert diff[["head", "role_a", "evidence_a", "role_b", "evidence_b"]].fillna(
        ""
    ).values.tolist() == [[0, "unexplained", "", "copy_suppression", "weights"]]
    assert "evidence_a" not in role_differences(a.drop(columns="evidence"), b).columns


def test_a_mixed_head_whose_blend_holds_other_roles_differs():
    import pandas as pd

    a = pd.DataFrame(
        {
            "layer": 0,
            "head": [0, 1, 2],
            "role": ["mixed", "mixed", "mixed"],
            "confidence": 0.8,
            "components": [
                "delimiter 0.41 + local 0.24",
                "local 0.30 + current_token 0.20",
                "local 0.30 + previous_token 0.21",
            ],
        }
    )
    # head 0: other shares, the same roles; head 1: another blend; head 2: the same
    b = a.assign(
        components=[
            "local 0.35 + delimiter 0.30",
            "local 0.30 + previous_token 0.22",
            "local 0.30 + previous_token 0.21",
        ]
    )
    diff = role_differences(a, b)
    assert diff[["head", "components_a", "components_b"]].values.tolist() == [
        [1, "local 0.30 + current_token 0.20", "local 0.30 + previous_token 0.22"]
    ]
    assert role_differences(a.drop(columns="components"), b).empty  # an older run: no blends

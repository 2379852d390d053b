"""compare_runs: two role maps side by side and the heads whose primary role differs."""

from __future__ import annotations

import re

from interp.report.html import compare_runs, role_differences
from interp.pipeline.results import load_run


def test_lists_the_one_head_that_differs(make_fake_run, tmp_path):
    a = make_fake_run(tmp_path, "a", tables=("roles",), exemplars=False, clusters=False)
    b = make_fake_run(tmp_path, "b", tables=("roles",), exemplars=False, clusters=False,
                      roles_override={(1, 1): "induction"})
    diff = role_differences(load_run(a).roles, load_run(b).roles)
    assert diff[["layer", "head", "role_a", "role_b"]].values.tolist() == [[1, 1, "duplicate_token", "induction"]]

    html = compare_runs(a, b, tmp_path / "out" / "compare.html").read_text(encoding="utf-8")
    assert html.count('src="data:image/png;base64,') == 2
    assert "Heads whose primary role differs: 1 of 12." in html
    rows = re.findall(r"<tr><td class=\"num\" data-sort=\"[^\"]*\">(\d+)</td><td class=\"num\" data-sort=\"[^\"]*\">(\d+)</td>",
                      html.split('id="diff-table"', 1)[1].split("</table>", 1)[0])
    assert rows == [("1", "1")]
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)" in html
    changes = html.split('id="changes-table"', 1)[1].split("</table>", 1)[0]
    assert changes.count("<tr>") == 1 + 12  # the header and every matching head


def test_head_differences_put_the_largest_change_first(make_fake_run, tmp_path):
    from interp.report.study import head_differences

    a = load_run(make_fake_run(tmp_path, "a", tables=("roles", "effects"), exemplars=False, clusters=False))
    b = load_run(make_fake_run(tmp_path, "b", tables=("roles", "effects"), exemplars=False, clusters=False,
                               roles_override={(1, 1): "induction"}))
    b.tables["effects"] = b.effects.assign(delta=b.effects["delta"].where(
        ~((b.effects["layer"] == 2) & (b.effects["head"] == 0)), b.effects["delta"] + 5.0))
    changes = head_differences(a, b)
    assert len(changes) == 12
    first = changes.iloc[0]
    assert (first["layer"], first["head"]) == (2, 0) and abs(first["effect_change"] - 5.0) < 1e-9
    assert changes.loc[(changes["layer"] == 1) & (changes["head"] == 1), "role_b"].item() == "induction"
    unchanged = changes[~changes[["layer", "head"]].apply(tuple, axis=1).isin([(2, 0), (1, 1)])]  # (1, 1): another role
    assert (unchanged["effect_change"].abs() < 1e-12).all()


def test_different_shapes_show_both_maps_and_say_why(make_fake_run, tmp_path):
    a = make_fake_run(tmp_path, "a", tables=("roles",), exemplars=False, clusters=False)
    c = make_fake_run(tmp_path, "c", n_layers=2, n_heads=4, tables=("roles",), exemplars=False, clusters=False)
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

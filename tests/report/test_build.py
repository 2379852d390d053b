"""build_report on synthetic runs: files written, page self-contained, corpus text escaped."""

from __future__ import annotations

import re

import pytest

from interp.report.html import build_report

XSS = "<script>alert(1)</script>"  # planted in the fake model name, tokens and clusters

FIGURES = ("role_map", "role_counts", "features_1", "effect_map", "effect_by_role", "score_vs_effect", "pruning",
           "exemplar_previous_token", "exemplar_induction", "exemplar_syntactic")


def test_writes_html_pdf_and_every_figure(built_report):
    assert (built_report / "report.html").stat().st_size > 10_000
    assert (built_report / "report.pdf").read_bytes().startswith(b"%PDF")
    for name in FIGURES:
        assert (built_report / "figures" / f"{name}.png").read_bytes().startswith(b"\x89PNG"), name
        assert b"<svg" in (built_report / "figures" / f"{name}.svg").read_bytes()[:2000], name
    assert not list(built_report.glob("**/*.tmp")), "atomic writes leave no temporary files"


def test_page_is_self_contained(built_report):
    html = (built_report / "report.html").read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html), "nothing is fetched"
    assert "<link" not in html and "@import" not in html
    assert html.count('src="data:image/png;base64,') == len(FIGURES)
    assert "default-src 'none'" in html  # the CSP forbids any request the page might try


def test_corpus_and_model_text_is_escaped(built_report):
    html = (built_report / "report.html").read_text(encoding="utf-8")
    assert XSS not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<script>") == 1  # the page's own sorting/filtering script, nothing else


def test_summary_numbers(built_report):
    html = (built_report / "report.html").read_text(encoding="utf-8")
    assert "17%" in html  # 2 of 12 heads unexplained
    assert "33% / 58%" in html  # prunable within 1% / 5% of loss_prose (see fake_pruning)
    for suite in ("prose", "repeated"):
        assert f"<td>{suite}</td>" in html
    for key in ("seed", "machine", "git_hash", "created"):
        assert f"<td>{key}</td>" in html
    assert "collect" in html and "12.5" in html


@pytest.mark.parametrize("tables", [("features",), ("features", "roles"), ()])
def test_partial_runs_still_get_a_report(make_fake_run, tmp_path, tables):
    run_dir = make_fake_run(tmp_path, tables=tables, exemplars=False, clusters=False)
    html = build_report(run_dir).read_text(encoding="utf-8")
    assert (run_dir / "report.pdf").exists()
    assert ('id="fig-features_1"' in html) == ("features" in tables)
    assert ('id="fig-role_map"' in html) == ("roles" in tables)
    assert 'id="fig-effect_map"' not in html and 'id="clusters"' not in html
    assert "the ablate stage has not run" in html


def test_unreadable_exemplars_are_skipped(make_fake_run, tmp_path):
    run_dir = make_fake_run(tmp_path, tables=("roles",), exemplars=False, clusters=False)
    (run_dir / "exemplars.json").write_text("{not json", encoding="utf-8")
    html = build_report(run_dir, pdf=False).read_text(encoding="utf-8")
    assert 'id="fig-role_map"' in html and "exemplar_" not in html

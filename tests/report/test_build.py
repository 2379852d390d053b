"""build_report on synthetic runs: files written, page self-contained, corpus text escaped, title."""

from __future__ import annotations

import re

import pytest

from interp.report.html import build_report

XSS = "<script>alert(1)</script>"  # planted in the fake model name, tokens and clusters
ROLES_SHOWN = (
    "previous_token",
    "current_token",
    "first_token",
    "delimiter",
    "duplicate_token",
    "induction",
    "syntactic",
    "local",
    "broad",
)  # every named role of conftest.ROLE_CYCLE
FIGURES = (
    "role_map",
    "role_counts",
    "sink_by_layer",
    "features_1",
    "syntax_1",
    "effect_maps",
    "effect_vs_role",
    "estimator_audit",
    "score_vs_effect",
    "pruning",
    *(f"exemplar_{r}" for r in ROLES_SHOWN),
)


def test_writes_html_pdf_and_every_figure(built_report):
    assert (built_report / "report.html").stat().st_size > 10_000
    assert (built_report / "report.pdf").read_bytes().startswith(b"%PDF")
    written = {p.stem for p in (built_report / "figures").glob("*.png")}
    assert written == set(FIGURES)
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
    assert "collect config" in html and "12.5" in html


def test_sections_in_report_order(built_report):
    html = (built_report / "report.html").read_text(encoding="utf-8")
    ids = re.findall(r'<section id="([^"]+)"', html)
    assert ids == [
        "summary",
        "roles",
        "features",
        "syntax",
        "effects",
        "pruning",
        "exemplars",
        "evidence",
        "heads",
        "clusters",
        "provenance",
    ]
    nav = re.findall(r'<a href="#([^"]+)"', html)
    assert nav == ids


def test_title_names_the_model_not_the_folder(make_fake_run, tmp_path):
    run_dir = make_fake_run(
        tmp_path,
        "folder-name",
        tables=("roles",),
        exemplars=False,
        clusters=False,
        model_name="Qwen2-0.5B & friends",
    )
    html = build_report(run_dir, pdf=False).read_text(encoding="utf-8")
    assert "<title>Qwen2-0.5B &amp; friends · attention heads · folder-name</title>" in html
    assert "<h1>Attention heads of Qwen2-0.5B &amp; friends</h1>" in html


def test_a_model_file_is_titled_by_its_stem_and_its_path_is_in_the_provenance(
    make_fake_run, tmp_path
):
    from interp.pipeline import rundir
    from interp.report.html import build_document

    run_dir = make_fake_run(tmp_path, "r", tables=("roles",), exemplars=False, clusters=False)
    manifest = rundir.read_manifest(run_dir)
    path = "/very/long/folder/of/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    manifest["model"].update(name=path, source="gguf", spec={"name": path})
    rundir.write_manifest(run_dir, manifest)
    doc = build_document(run_dir)
    assert doc.title == "Attention heads of SmolLM2-135M-Instruct.Q4_1"
    summary = next(s for s in doc.sections if s.id == "summary")
    model = next(
        b
        for g in summary.blocks
        if getattr(g, "kind", "") == "group"
        for col in g.blocks
        for b in getattr(col, "blocks", ())
        if b.kind == "keyvalues"
    )
    assert dict(model.pairs)["name"] == "SmolLM2-135M-Instruct.Q4_1"
    provenance = next(s for s in doc.sections if s.id == "provenance")
    assert provenance.blocks[0].pairs[0] == ("model", path)


@pytest.mark.parametrize("tables", [("features",), ("features", "roles"), ()])
def test_partial_runs_still_get_a_report(make_fake_run, tmp_path, tables):
    run_dir = make_fake_run(tmp_path, tables=tables, exemplars=False, clusters=False)
    html = build_report(run_dir).read_text(encoding="utf-8")
    assert (run_dir / "report.pdf").exists()
    assert ('id="fig-features_1"' in html) == ("features" in tables)
    assert ('id="fig-role_map"' in html) == ("roles" in tables)
    assert 'id="fig-effect_maps"' not in html and 'id="clusters"' not in html
    assert "the ablate stage has not run" in html


def test_damaged_exemplars_are_skipped_with_a_note(make_fake_run, tmp_path):
    run_dir = make_fake_run(tmp_path, tables=("roles",), clusters=False)
    (run_dir / "exemplars.npz").write_bytes(b"PK\x03\x04 not a zip")
    html = build_report(run_dir, pdf=False).read_text(encoding="utf-8")
    assert 'id="fig-role_map"' in html and "exemplar_" not in html
    assert "exemplars.npz is unreadable" in html


def test_runs_without_sink_mass_get_the_plain_role_map(make_fake_run, tmp_path):
    run_dir = make_fake_run(
        tmp_path, tables=("roles",), exemplars=False, clusters=False, sink=False
    )
    html = build_report(run_dir, pdf=False).read_text(encoding="utf-8")
    assert 'id="fig-role_map"' in html and 'id="fig-sink_by_layer"' not in html
    page = html.split("<script", 1)[
        0
    ]  # the text a reader sees (the explorer's script names the column it may show)
    assert "sink mass" not in page

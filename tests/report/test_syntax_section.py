"""The report's syntax section: the per-relation table first, relation maps only where there are arcs enough."""

from __future__ import annotations

import re

from fakes import XSS

from interp.pipeline import rundir
from interp.pipeline.results import load_run
from interp.report import content as C
from interp.report.feature_plots import plot_feature_heatmaps
from interp.report.html import build_document
from interp.report.syntax_section import MIN_ARCS, relation_table


def section(doc, sid="syntax"):
    return next((s for s in doc.sections if s.id == sid), None)


def with_arcs(run_dir, arcs: dict[str, int]):
    """Set the features table's ``n`` of some syntactic features."""
    features = load_run(run_dir).features
    for name, n in arcs.items():
        features.loc[features["feature"] == name, "n"] = n
    rundir.write_table(run_dir, "features", features)


def test_the_table_gives_each_treebanks_best_head_the_most_arcs_first(fake_run):
    table = relation_table(load_run(fake_run).syntax)
    assert list(table.columns) == [
        "corpus",
        "relation",
        "direction",
        "arcs",
        "best head",
        "accuracy",
        "ci_low",
        "ci_high",
        "best rule",
        "rule accuracy",
        "offset_-2",
        "offset_-1",
    ]  # no arc ahead
    assert list(zip(table["corpus"], table["relation"], table["arcs"])) == [
        ("syntax", "nsubj", 1254),
        ("syntax", "amod", 420),
        (f"user:{XSS}", "det", 641),
        (f"user:{XSS}", "punct", 7),
    ]
    syntax = load_run(fake_run).syntax
    best = syntax[syntax["rank"] == 1].set_index(["corpus", "relation"])
    for r in table.itertuples():
        assert r.accuracy == best.loc[(r.corpus, r.relation), "accuracy"]
        assert (
            r._5
            == f"L{best.loc[(r.corpus, r.relation), 'layer']}H{best.loc[(r.corpus, r.relation), 'head']}"
        )


def test_the_section_leads_with_the_table_then_the_maps(report_doc):
    blocks = section(report_doc).blocks
    kinds = [b.kind for b in blocks]
    assert kinds.index("table") < kinds.index("figure")
    assert [s.id for s in report_doc.sections].index("syntax") == [
        s.id for s in report_doc.sections
    ].index("features") + 1
    table = next(b for b in blocks if b.kind == "table")
    accuracy = table.rows[0][table.columns.index("accuracy")].text
    assert re.fullmatch(r"\d+% \(\d+%.+\d+%\)", accuracy), (
        accuracy
    )  # the 95% interval shares the cell
    texts = [b.text for b in blocks if b.kind == "text"]
    assert any("rest on syntax:" in t for t in texts)  # which treebank the classifier reads
    features = next(s for s in report_doc.sections if s.id == "features")
    assert all("syntactic" not in b.title.lower() for b in features.blocks if b.kind == "figure")


def test_relations_with_few_arcs_get_no_map_and_the_caption_says_so(make_fake_run, tmp_path):
    run_dir = make_fake_run(tmp_path, exemplars=False)
    with_arcs(run_dir, {"syntactic:amod:dep2head": MIN_ARCS - 1})
    maps = [b for b in section(build_document(run_dir)).blocks if isinstance(b, C.FigureBlock)]
    assert [m.name for m in maps] == ["syntax_1"]
    assert (
        f"1 of the 2 relation × direction features with arcs has fewer than {MIN_ARCS} and is left out"
        in maps[0].caption
    )
    assert "of syntax, the treebank the classifier reads" in maps[0].caption


def test_no_map_at_all_when_every_relation_is_small(make_fake_run, tmp_path):
    run_dir = make_fake_run(tmp_path, exemplars=False)
    with_arcs(run_dir, {"syntactic:amod:dep2head": 3, "syntactic:nsubj:head2dep": 0})
    blocks = section(build_document(run_dir)).blocks
    assert not any(isinstance(b, C.FigureBlock) for b in blocks)
    assert any(isinstance(b, C.Table) for b in blocks)
    assert any(
        b.kind == "text" and f"No relation has {MIN_ARCS} arcs or more" in b.text for b in blocks
    )


def test_a_run_without_a_syntax_table_still_gets_its_maps_and_a_note(make_fake_run, tmp_path):
    run_dir = make_fake_run(tmp_path, tables=("features", "roles"), exemplars=False)
    blocks = section(build_document(run_dir)).blocks
    assert any(b.kind == "text" and "no syntax table" in b.text for b in blocks)
    assert any(isinstance(b, C.FigureBlock) for b in blocks)


def test_no_syntax_section_without_syntactic_features_or_table(make_fake_run, tmp_path):
    run_dir = make_fake_run(tmp_path, tables=("roles",), exemplars=False)
    assert section(build_document(run_dir)) is None


def test_the_features_heatmaps_leave_the_syntactic_features_to_the_syntax_section(
    fake_run, tmp_path
):
    features = load_run(fake_run).features
    assert (
        plot_feature_heatmaps(features[features["feature"].str.startswith("syntactic:")], tmp_path)
        is None
    )

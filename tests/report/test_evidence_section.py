"""The report's section on the heads that matter: their roles and evidence, and the composition
graph among them (interp.report.evidence_section), on hand-built tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from interp.pipeline.results import RunTables
from interp.report import evidence_section as V


def run_tables(composition: pd.DataFrame | None) -> RunTables:
    heads = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)]
    roles = pd.DataFrame(
        {
            "layer": [l for l, _ in heads],
            "head": [h for _, h in heads],
            "role": ["previous_token", "inactive", "induction", "copy_suppression", "unexplained"],
            "second_role": [np.nan, "broad", "copying", "broad", np.nan],
            "evidence": ["attention", "output", "attention", "weights", np.nan],
            "looks": ["previous_token", "broad", "induction", "broad", "unexplained"],
            "writes": [np.nan, "inactive", "copying", "copy_suppression", np.nan],
            "task_role": np.nan,
            "output_size": [0.2, 0.0, 0.3, 0.1, 0.2],
            "confidence": 0.9,
        }
    )
    deltas = {(0, 0): 0.5, (0, 1): 0.0, (1, 0): 2.0, (1, 1): -1.0, (2, 0): 0.1}
    effects = pd.DataFrame(
        [
            dict(
                layer=l,
                head=h,
                ablation="mean",
                metric=m,
                delta=d * (2 if m == "b" else 1),
                ci_low=d - 0.1,
                ci_high=d + 0.1,
                estimator="exact",
            )
            for (l, h), d in deltas.items()
            for m in ("a", "b")
        ]
    )
    return RunTables(
        Path("run"), {}, {"roles": roles, "effects": effects, "composition": composition}
    )


def comp(rows: list[tuple[str, int, int, int, int, float, int]]) -> pd.DataFrame:
    return pd.DataFrame(
        rows, columns=["kind", "layer", "head", "writer_layer", "writer_head", "value", "rank"]
    ).assign(null_high=0.2)


def test_the_table_lists_the_largest_effects_per_metric_with_their_evidence():
    table = V.evidence_table(run_tables(None), top=3)
    assert list(table.columns) == ["head", *V.COLUMNS[1:]]
    assert table[table["metric"] == "a"]["head"].tolist() == ["L1H0", "L1H1", "L0H0"]
    first = table.iloc[0]
    assert (first["role"], first["second_role"], first["evidence"], first["writes"]) == (
        "induction",
        "copying",
        "attention",
        "copying",
    )
    assert V.evidence_table(RunTables(Path("run"), {}, {"roles": None, "effects": None})) is None


def test_the_graph_keeps_strong_composition_among_the_heads_that_matter():
    composition = comp(
        [
            ("k", 1, 0, 0, 0, 0.5, 1),  # the induction head's keys read the previous-token head
            ("q", 1, 1, 0, 0, 0.3, 2),
            ("v", 1, 1, 0, 0, 0.4, 1),  # the same pair again: both kinds kept apart in the data
            ("q", 2, 0, 1, 0, 0.1, 1),  # below the null
            ("q", 2, 0, 1, 1, 0.6, 4),  # ranked too low
            ("k", 2, 0, 0, 1, 0.9, 1),  # the writer is not among the heads that matter
        ]
    )
    heads = [(0, 0), (1, 0), (1, 1), (2, 0)]
    graph = V.composition_graph(run_tables(composition), heads)
    assert set(graph.nodes) == set(heads) and graph.nodes[(1, 0)]["role"] == "induction"
    assert set(graph.edges) == {((0, 0), (1, 0)), ((0, 0), (1, 1))}
    assert graph.edges[(0, 0), (1, 0)]["kind"] == "k"
    assert graph.edges[(0, 0), (1, 1)]["kind"] == "v"  # the strongest of the pair's kinds


def test_the_section_draws_the_graph_and_says_how_many_are_unexplained(tmp_path):
    composition = comp([("k", 1, 0, 0, 0, 0.5, 1)])
    section = V.section(run_tables(composition), tmp_path)
    assert section is not None and section.id == "evidence"
    assert (tmp_path / "composition_graph.png").stat().st_size > 1000
    text = section.blocks[0].text
    assert "5 heads, 1 of them unexplained" in text
    no_graph = V.section(run_tables(None), tmp_path)  # no composition table: the table alone
    assert len(no_graph.blocks) == 2

"""The attention explorer's data side (no model, no browser): stored prompts, head choice, the
text view, the circuitsvis export, and the report page that carries it (self-contained)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from fakes import REPEATED, TOKENS, XSS, offset_pattern

from interp.collect.exemplars import read_exemplars
from interp.errors import ConfigError
from interp.pipeline.results import load_run
from interp.report import explorer as X
from interp.report import head_facts
from interp.report import prompt_store as P

PROMPT_TOKENS = ("<s>", "When", " Mary", " and", " John", XSS, " John", " gave", "\n to")


def fake_prompts(n_layers: int = 4, n_heads: int = 3, heads: tuple | None = None) -> P.PromptSet:
    """Two prompts; head (l, h) attends (l + h) % 4 tokens back, as the fake exemplars do."""
    heads = heads or tuple((l, h) for l in range(n_layers) for h in range(n_heads))
    prompts = []
    for text, tokens in (
        ("When Mary and John ... gave to", PROMPT_TOKENS),
        ("a b c d a b c d", REPEATED),
    ):
        n = len(tokens)
        patterns = np.stack([offset_pattern(n, (l + h) % 4) for l, h in heads]).astype(np.float16)
        prompts.append(P.Prompt(text, tokens, heads, patterns))
    return P.PromptSet((n_layers, n_heads), tuple(prompts))


def test_prompts_round_trip_through_the_run(fake_run):
    written = fake_prompts(heads=((0, 1), (3, 2)))
    P.write_prompts(fake_run, written)
    read = P.read_prompts(fake_run)
    assert read.shape == (4, 3) and read.heads == ((0, 1), (3, 2))
    for a, b in zip(written.prompts, read.prompts):
        assert (a.text, a.tokens) == (
            b.text,
            b.tokens,
        )  # the planted tag and the line break survive
        np.testing.assert_array_equal(a.patterns, b.patterns)
    assert read.prompts[0].pattern(3, 2)[8, 7] == pytest.approx(
        0.8, abs=1e-3
    )  # (3 + 2) % 4 = 1 token back
    with pytest.raises(KeyError):
        read.prompts[0].pattern(1, 1)


def test_a_damaged_prompts_file_is_reported_not_raised_raw(fake_run):
    (fake_run / P.FILE).write_bytes(b"not a zip")
    with pytest.raises(P.PromptsUnreadable, match="is unreadable"):
        P.read_prompts(fake_run)
    assert P.read_prompts(fake_run.parent) is None  # no file: no prompts


def test_every_head_is_stored_unless_the_prompts_are_too_long(monkeypatch):
    assert len(P.stored_heads((4, 3), [9, 12], [(0, 1)])) == 12
    monkeypatch.setattr(P, "STORE_CELLS", 100)
    assert P.stored_heads((4, 3), [9, 12], [(0, 1), (2, 2)]) == ((0, 1), (2, 2))


def test_heads_are_parsed_in_either_spelling():
    assert X.parse_heads("1.2, L0H1,l3h0,1.2", (4, 3)) == [(1, 2), (0, 1), (3, 0)]
    with pytest.raises(ConfigError, match=r"'x' is not a head"):
        X.parse_heads("1.2,x", (4, 3))
    with pytest.raises(ConfigError, match=r"no head L4H0 \(4 layers x 3 heads"):
        X.parse_heads("4.0", (4, 3))


def test_default_heads_lead_with_the_most_important_then_one_per_role(fake_run):
    run = load_run(fake_run)
    ranking = X.effect_ranking(run)
    heads = X.default_heads(run)
    top = [(int(r.layer), int(r.head)) for r in ranking.head(X.DEFAULT_BY_EFFECT).itertuples()]
    assert heads[:3] == top and len(heads) == len(set(heads)) <= X.DEFAULT_LIMIT
    roles = {(r.layer, r.head): r.role for r in run.roles.itertuples()}
    assert "unexplained" not in {roles[h] for h in heads[3:]}
    assert len({roles[h] for h in heads[3:]}) == len(heads[3:])  # one head per role


def test_no_roles_and_no_effects_choose_no_heads(make_fake_run, tmp_path):
    assert X.default_heads(load_run(make_fake_run(tmp_path, tables=("features",)))) == []


def test_text_view_prints_each_query_and_where_it_attends(fake_run):
    run = load_run(fake_run)
    text = X.text_view(run, fake_prompts(), [(1, 2)], top=2)
    lines = text.splitlines()
    assert (
        lines[0].startswith("L1H2  syntactic; confidence ")
        and "effect " in lines[0]
        and " measured)" in lines[0]
    )
    assert lines[1] == ' prompt 1: "When Mary and John ... gave to"'
    # head (1, 2) attends 3 tokens back: the last query, "\n to" at 8, attends to " John" at 5 ... the XSS token
    assert lines[2 + 8].split("->")[0].strip() == '8 "\\n to"'
    assert lines[2 + 8].split("->")[1].split() == [
        json.dumps(XSS) + "@5",
        "0.80",
        '"<s>"@0',
        "0.20",
    ]
    assert sum(1 for line in lines if "->" in line) == len(PROMPT_TOKENS) + len(REPEATED)


def test_circuitsvis_export_has_the_shapes_circuitsvis_takes(fake_run):
    probe = read_exemplars(fake_run).of_kind("natural")[0]
    export = X.circuitsvis_export(probe, [(0, 1), (2, 2)])
    n = len(TOKENS)
    assert set(export) == {"tokens", "attention", "attention_head_names"}
    assert export["tokens"] == list(TOKENS) and all(isinstance(t, str) for t in export["tokens"])
    assert (
        export["attention"].shape == (2, n, n) and export["attention"].dtype == np.float32
    )  # [head, q(dest), k(src)]
    assert export["attention_head_names"] == ["L0H1", "L2H2"]
    np.testing.assert_allclose(
        export["attention"].sum(-1), 1.0, atol=1e-2
    )  # every query's row is a distribution
    np.testing.assert_allclose(export["attention"][1], probe.pattern(2, 2))
    prompt = fake_prompts().prompts[1]
    assert X.circuitsvis_export(prompt, [(3, 1)])["attention"].shape == (
        1,
        len(REPEATED),
        len(REPEATED),
    )
    with pytest.raises(ValueError):
        X.circuitsvis_export(prompt, [])


def test_head_facts_give_the_raw_share_beside_value_and_what_was_not_measured():
    from pathlib import Path

    import pandas as pd

    from interp.pipeline.results import RunTables

    features = pd.DataFrame(
        {
            "layer": 0,
            "head": 0,
            "feature": ["induction", "broad"],
            "value": [0.9, 0.5],
            "raw": [0.09, np.nan],
            "baseline": [0.05, 1.0],
        }
    )
    roles = pd.DataFrame(
        {
            "layer": [0],
            "head": [0],
            "role": ["induction"],
            "confidence": [0.8],
            "second_role": [np.nan],
            "stability": [1.0],
            "sink_mass": [0.9],
            "unmeasured": ["syntactic"],
        }
    )
    facts = head_facts.head_facts(
        RunTables(Path("run"), {}, {"features": features, "roles": roles, "effects": None})
    )["0.0"]
    assert facts["features"] == [["induction", 0.09, 0.9, 0.05], ["broad", None, 0.5, 1.0]]
    assert facts["unmeasured"] == "syntactic" and facts["sink"] == 0.9


def test_head_facts_give_what_a_head_writes_and_whom_it_composes_with():
    from pathlib import Path

    import pandas as pd

    from interp.pipeline.results import RunTables

    roles = pd.DataFrame(
        {
            "layer": [1],
            "head": [0],
            "role": ["mover"],
            "confidence": [0.97],
            "second_role": ["induction"],
            "looks": ["induction"],
            "writes": ["copying"],
            "evidence": ["task"],
            "task_role": ["mover"],
            "task": ["ioi"],
            "task_key": ["IO"],
            "task_partner": [np.nan],
            "output_size": [0.31],
        }
    )
    weights = pd.DataFrame(
        {
            "layer": [1, 1, 1],
            "head": [0, 0, 0],
            "score": ["copying", "successor", "output_size"],
            "value": [0.8, np.nan, 0.31],
            "null_low": [-0.1, np.nan, np.nan],
            "null_high": [0.1, np.nan, np.nan],
        }
    )
    comp = pd.DataFrame(
        {
            "kind": ["q", "q", "k", "q"],
            "layer": [1, 1, 1, 2],
            "head": [0, 0, 0, 3],
            "writer_layer": [0, 0, 0, 1],
            "writer_head": [1, 2, 1, 0],
            "value": [0.5, 0.05, 0.3, 0.4],
            "null_high": [0.2, 0.2, 0.2, 0.2],
        }
    )
    tables = {
        "roles": roles,
        "features": None,
        "effects": None,
        "weights": weights,
        "composition": comp,
    }
    facts = head_facts.head_facts(RunTables(Path("run"), {}, tables))
    head = facts["1.0"]
    assert (head["looks"], head["writes"], head["evidence"], head["task_key"]) == (
        "induction",
        "copying",
        "task",
        "IO",
    )
    assert head["weights"] == [["copying", 0.8, -0.1, 0.1], ["output_size", 0.31, None, None]]
    # above the null only, strongest first: it reads L0H1 (q, then k); L2H3 reads it
    assert head["partners"] == [
        ["reads", "q", "L0H1", 0.5, 0.2],
        ["reads", "k", "L0H1", 0.3, 0.2],
        ["read by", "q", "L2H3", 0.4, 0.2],
    ]
    assert facts["0.1"]["partners"] == [
        ["read by", "q", "L1H0", 0.5, 0.2],
        ["read by", "k", "L1H0", 0.3, 0.2],
    ]


def test_page_data_put_prompts_first_and_leave_out_what_does_not_fit(fake_run):
    run = load_run(fake_run)
    exemplars = read_exemplars(fake_run)
    data = X.explorer_data(run, exemplars, fake_prompts(heads=((0, 1), (3, 2))))
    kinds = [s["kind"] for s in data["sources"]]
    assert kinds == ["prompt", "prompt", "probe", "probe", "probe"] and data["notes"] == []
    assert data["sources"][0]["heads"] == ["0.1", "3.2"] and data["sources"][2]["heads"] is None
    assert data["sources"][0]["tokens"][-1] == "\\n to"  # control characters shown as escapes
    assert set(data["heads"]["1.2"]) >= {"role", "confidence", "features", "effects"}
    assert len(data["heads"]["1.2"]["features"]) == head_facts.N_FEATURES
    text = X.to_json(data)
    assert (
        "<" not in text and ">" not in text and json.loads(text)["sources"][0]["tokens"][5] == XSS
    )
    small = X.explorer_data(
        run, exemplars, fake_prompts(), budget=81 * 12 * 2
    )  # two 9-token texts, 12 heads
    assert [s["kind"] for s in small["sources"]] == ["prompt", "prompt"]
    assert len(small["notes"]) == 3 and "prose probe 1 (natural) is left out" in small["notes"][0]
    assert X.explorer_data(run) is None  # nothing to draw


def test_the_report_page_carries_the_explorer_and_fetches_nothing(report_doc, fake_run):
    from interp.report.html import explorer_of, render_html

    P.write_prompts(fake_run, fake_prompts())
    page = render_html(report_doc, explorer_of(fake_run))
    assert (
        page.count("<script") == 1 and 'id="explorer-root"' in page and 'href="#explorer"' in page
    )
    assert (
        page.index('<section id="roles">')
        < page.index('<section id="explorer">')
        < page.index('<section id="features">')
    )
    assert not re.search(r"""(src|href|action)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert not re.search(r"""url\(\s*["']?\s*(https?:)?//|@import|<link""", page, re.I)
    assert (
        XSS not in page
    )  # the planted token is escaped in the data attribute, the grid and the menu
    assert "your prompt 1: When Mary and John ... gave to" in page

"""The syntax generator: determinism, well-formed spans and arcs, distances, agreement."""

from __future__ import annotations

import pytest

from interp.probes.base import SYNTAX
from interp.probes.grammar import generate_syntax, syntax_suite

RELATIONS = {"nsubj", "det", "amod", "obj", "pobj", "prep"}


@pytest.fixture(scope="module")
def sentences():
    return generate_syntax(3000, seed=0)


def test_same_seed_same_sentences_and_prefix():
    assert generate_syntax(50, seed=3) == generate_syntax(50, seed=3)
    assert generate_syntax(20, seed=3) == generate_syntax(50, seed=3)[:20]
    assert generate_syntax(50, seed=3) != generate_syntax(50, seed=4)


def test_generates_3000(sentences):
    assert len(sentences) == 3000
    assert len({s.text for s in sentences}) > 2900  # varied, not a handful of templates


def test_spans_cover_the_text_exactly(sentences):
    for s in sentences:
        words = [s.text[a:b] for a, b in s.words]
        assert all(w and " " not in w for w in words)
        rebuilt = " ".join(words).replace(" .", ".").replace(" ,", ",")
        assert rebuilt == s.text
        assert words[-1] == "." and s.words[-1] == (len(s.text) - 1, len(s.text))
        assert s.words[-2][1] == s.words[-1][0]  # the period is attached to the last word
        assert s.source == "syntax"


def test_commas_are_their_own_words(sentences):
    with_comma = [s for s in sentences if "," in s.text]
    assert with_comma
    for s in with_comma:
        k = [s.text[a:b] for a, b in s.words].index(",")
        assert s.words[k - 1][1] == s.words[k][0]


def test_arcs_in_range_with_known_relations(sentences):
    seen = set()
    for s in sentences:
        n = len(s.words)
        for arc in s.arcs:
            assert 0 <= arc.dep < n and 0 <= arc.head < n and arc.dep != arc.head
            assert s.text[slice(*s.words[arc.dep])] not in {".", ","}
            seen.add(arc.relation)
        deps = [a.dep for a in s.arcs]
        assert len(deps) == len(set(deps))  # every word has at most one head
    assert seen == RELATIONS


def test_relations_link_the_expected_words():
    s = generate_syntax(1, seed=0)[0]
    word = [s.text[a:b] for a, b in s.words]
    for arc in s.arcs:
        if arc.relation == "det":
            assert word[arc.dep].lower() in {
                "the",
                "a",
                "an",
                "this",
                "these",
                "some",
                "two",
                "many",
            }
        if arc.relation == "pobj":
            assert word[arc.head].lower() in {
                "on",
                "near",
                "under",
                "behind",
                "beside",
                "of",
                "to",
                "in",
                "at",
                "after",
                "during",
            }


def test_subject_distances_cover_1_to_12_and_beyond(sentences):
    distances = {a.head - a.dep for s in sentences for a in s.arcs if a.relation == "nsubj"}
    assert set(range(1, 13)) <= distances
    assert max(distances) >= 14
    main = {s.agreement.verb - s.agreement.subject for s in sentences}
    assert set(range(1, 13)) <= main


def test_agreement_forms(sentences):
    for s in sentences:
        ag = s.agreement
        assert ag is not None
        assert ag.correct != ag.wrong
        assert ag.correct.isalpha() and ag.wrong.isalpha()
        assert s.text[slice(*s.words[ag.verb])] == ag.correct
        assert any(
            a.dep == ag.subject and a.head == ag.verb and a.relation == "nsubj" for a in s.arcs
        )


def test_attractors_of_the_other_number_are_common(sentences):
    # The suite exists to test agreement across a noun of the other number: "the author of the books is".
    plural_verbs = {"are", "were", "have"}
    long = [s for s in sentences if s.agreement.verb - s.agreement.subject >= 4]
    assert len(long) > 1500
    assert {s.agreement.correct in plural_verbs for s in long} == {True, False}


def test_syntax_suite():
    suite = syntax_suite(10, seed=1)
    assert suite.name == "syntax" and suite.kind == SYNTAX
    assert suite.sentences == tuple(generate_syntax(10, seed=1))
    assert "nsubj" in suite.card


def test_negative_n_is_rejected():
    with pytest.raises(ValueError):
        generate_syntax(-1)

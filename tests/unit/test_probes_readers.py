"""Corpus readers and the shipped prose suite: exact results on small hand-written files."""

from __future__ import annotations

import pytest

from interp.errors import CorpusError
from interp.probes.base import NATURAL, Arc, Sentence
from interp.probes.prose import prose_suite, suite_card
from interp.probes.readers import read_conllu, read_corpus, read_csv, read_jsonl, read_text

TWO_SENTENCES = """\
# sent_id = 1
# text = The dog barks.
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tbarks\tbark\tVERB\tVBZ\t_\t0\troot\t_\tSpaceAfter=No
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

# sent_id = 2
# text = It was eaten by cats.
1\tIt\tit\tPRON\tPRP\t_\t3\tnsubj:pass\t_\t_
2\twas\tbe\tAUX\tVBD\t_\t3\taux:pass\t_\t_
3\teaten\teat\tVERB\tVBN\t_\t0\troot\t_\t_
4\tby\tby\tADP\tIN\t_\t5\tcase\t_\t_
5\tcats\tcat\tNOUN\tNNS\t_\t3\tobl:agent\t_\tSpaceAfter=No
6\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_
"""


def write(tmp_path, name, text, encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return path


def row(i, form, head, deprel, misc="_"):
    return f"{i}\t{form}\t_\t_\t_\t_\t{head}\t{deprel}\t_\t{misc}"


def raises_at(path, line, func, *args):
    """The call raises CorpusError with one line naming the file and, if given, the line."""
    with pytest.raises(CorpusError) as info:
        func(path, *args)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    if line is not None:
        assert f"{path}:{line}:" in message
    return message


# --- CoNLL-U -----------------------------------------------------------------------------------


def test_conllu_two_sentences_exact(tmp_path):
    path = write(tmp_path, "two.conllu", TWO_SENTENCES)
    first, second = read_conllu(path)
    assert first == Sentence(
        text="The dog barks.",
        words=((0, 3), (4, 7), (8, 13), (13, 14)),
        arcs=(Arc(0, 1, "det"), Arc(1, 2, "nsubj"), Arc(3, 2, "punct")),
        source=f"{path}:1",
    )
    assert second.text == "It was eaten by cats."
    assert second.words == ((0, 2), (3, 6), (7, 12), (13, 15), (16, 20), (20, 21))
    # subtypes fold into the base relation; `case` keeps UD's direction (preposition -> noun)
    assert second.arcs == (
        Arc(0, 2, "nsubj"),
        Arc(1, 2, "aux"),
        Arc(3, 4, "case"),
        Arc(4, 2, "obl"),
        Arc(5, 2, "punct"),
    )
    assert second.source == f"{path}:8"


def test_conllu_skips_multiword_tokens_and_empty_nodes(tmp_path):
    lines = [
        "1-2\tdel\t_\t_\t_\t_\t_\t_\t_\tSpaceAfter=No",
        row(1, "de", 3, "case"),
        row(2, "el", 3, "det"),
        row(3, "mar", 0, "root"),
        "3.1\tva\t_\t_\t_\t_\t_\t_\t0:root\t_",
        row(4, "!", 3, "punct"),
    ]
    [s] = read_conllu(write(tmp_path, "mwt.conllu", "\n".join(lines) + "\n"))
    assert s.text == "de elmar !"
    assert s.words == ((0, 2), (3, 5), (5, 8), (9, 10))
    assert s.arcs == (Arc(0, 2, "case"), Arc(1, 2, "det"), Arc(3, 2, "punct"))


@pytest.mark.parametrize(
    "lines, bad_line, phrase",
    [
        ([row(1, "a", 0, "root"), row(2, "b", 0, "root")], 1, "broken tree"),  # two roots
        ([row(1, "a", 2, "dep"), row(2, "b", 1, "dep")], 1, "broken tree"),  # no root
        ([row(1, "a", 0, "root"), row(2, "b", 3, "dep"), row(3, "c", 2, "dep")], 1, "cycle"),
        ([row(1, "a", 0, "root"), row(2, "b", 7, "dep")], 2, "outside the sentence"),
        ([row(1, "a", 0, "root"), "2\tb\t_\t_\t_\t_\t1\tdep\t_"], 2, "10"),  # 9 columns
        ([row(1, "a", 0, "root"), row(3, "b", 1, "dep")], 2, "expected 2"),  # ids out of order
        ([row(1, "a", 0, "root"), row(2, "b", "_", "dep")], 2, "HEAD"),
    ],
)
def test_conllu_broken_input(tmp_path, lines, bad_line, phrase):
    path = write(tmp_path, "bad.conllu", "\n".join(lines) + "\n")
    assert phrase in raises_at(path, bad_line, read_conllu)


def test_conllu_error_names_the_sentence_line(tmp_path):
    text = (
        TWO_SENTENCES
        + "\n# sent_id = 3\n"
        + row(1, "a", 0, "root")
        + "\n"
        + row(2, "b", 0, "root")
        + "\n"
    )
    raises_at(write(tmp_path, "third.conllu", text), 17, read_conllu)  # its "# sent_id" line


# --- text, JSONL, CSV ----------------------------------------------------------------------------


def test_read_text(tmp_path):
    path = write(tmp_path, "p.txt", "\ufeffFirst line.\n\n  Second one  \r\n")
    assert read_text(path) == [
        Sentence("First line.", source=f"{path}:1"),
        Sentence("Second one", source=f"{path}:3"),
    ]


def test_read_jsonl(tmp_path):
    path = write(tmp_path, "p.jsonl", '{"text": "Hello there."}\n\n{"text": "Bye.", "id": 2}\n')
    assert [(s.text, s.source) for s in read_jsonl(path)] == [
        ("Hello there.", f"{path}:1"),
        ("Bye.", f"{path}:3"),
    ]
    other = write(tmp_path, "q.jsonl", '{"body": "Hi."}\n')
    assert read_jsonl(other, field="body")[0].text == "Hi."


def test_read_csv_with_quoted_newline(tmp_path):
    path = write(tmp_path, "p.csv", 'id,text\n1,"Hello, world."\n2,"Two\nlines"\n3,\n4,Last\n')
    got = [(s.text, s.source) for s in read_csv(path)]
    assert got == [
        ("Hello, world.", f"{path}:2"),
        ("Two\nlines", f"{path}:3"),
        ("Last", f"{path}:6"),
    ]
    assert [s.text for s in read_csv(path, column="id")] == ["1", "2", "3", "4"]


def test_read_corpus_dispatches_by_suffix(tmp_path):
    assert read_corpus(write(tmp_path, "a.TXT", "x y\n"))[0].text == "x y"
    assert read_corpus(write(tmp_path, "a.jsonl", '{"t": "j"}\n'), column="t")[0].text == "j"
    assert read_corpus(write(tmp_path, "a.csv", "t\nc\n"), column="t")[0].text == "c"
    assert (
        read_corpus(write(tmp_path, "a.conllu", TWO_SENTENCES))[1].text == "It was eaten by cats."
    )


# --- errors --------------------------------------------------------------------------------------


def test_missing_file_and_directory(tmp_path):
    assert "no such" in raises_at(tmp_path / "nope.txt", None, read_corpus)
    assert "directory" in raises_at(tmp_path, None, read_text)
    (tmp_path / "dir.txt").mkdir()
    assert "directory" in raises_at(tmp_path / "dir.txt", None, read_corpus)


def test_non_utf8_names_the_line(tmp_path):
    path = write(tmp_path, "latin.txt", "ok\nfine\ncaf\xe9\n", encoding="latin-1")
    assert "UTF-8" in raises_at(path, 3, read_text)


def test_jsonl_errors(tmp_path):
    assert "JSON" in raises_at(
        write(tmp_path, "a.jsonl", '{"text": "ok"}\n{text: bad}\n'), 2, read_jsonl
    )
    assert "'text'" in raises_at(
        write(tmp_path, "b.jsonl", '{"text": "ok"}\n{"body": "x"}\n'), 2, read_jsonl
    )
    assert "'text'" in raises_at(write(tmp_path, "c.jsonl", '["text"]\n'), 1, read_jsonl)
    assert "str" in raises_at(write(tmp_path, "d.jsonl", '{"text": 3}\n'), 1, read_jsonl)


def test_csv_missing_column_lists_columns(tmp_path):
    message = raises_at(write(tmp_path, "a.csv", "id,body\n1,x\n"), 1, read_csv)
    assert "'text'" in message and "'id', 'body'" in message


@pytest.mark.parametrize(
    "name, text",
    [
        ("e.txt", "\n   \n"),
        ("e.jsonl", '{"text": ""}\n'),
        ("e.csv", "text\n\n"),
        ("e.conllu", "# only a comment\n"),
    ],
)
def test_empty_corpus(tmp_path, name, text):
    assert "empty corpus" in raises_at(write(tmp_path, name, text), None, read_corpus)


def test_unknown_suffix_lists_supported(tmp_path):
    message = raises_at(write(tmp_path, "a.docx", "x"), None, read_corpus)
    assert ".docx" in message and all(s in message for s in (".txt", ".jsonl", ".csv", ".conllu"))


# --- shipped prose and cards ---------------------------------------------------------------------


def test_prose_suite():
    suite = prose_suite()
    assert suite.name == "prose" and suite.kind == NATURAL
    assert len(suite.sentences) >= 360
    assert suite.sentences[0].source == "prose.txt:1"
    assert all(3 <= len(s.text.split()) <= 60 for s in suite.sentences)
    assert sum("<" in s.text or "&" in s.text for s in suite.sentences) >= 8  # escaping in reports
    assert "Elicits" in suite.card
    assert prose_suite(max_sentences=5).sentences == suite.sentences[:5]


@pytest.mark.parametrize("name", ["prose", "repeated", "syntax", "user"])
def test_every_suite_has_a_card(name):
    card = suite_card(name)
    assert "Elicits" in card and "Made" in card and "Size" in card and "##" not in card

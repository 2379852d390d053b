"""Corpus readers stream: they stop at a limit or at the first bad line, whatever the file's size,
and accept the quirks real files have (a BOM, CRLF line ends, quoted newlines)."""

from __future__ import annotations

import time

from interp.probes.readers import read_corpus, read_csv, read_text


def test_a_limit_stops_reading(tmp_path):
    path = tmp_path / "big.txt"
    path.write_text("first\nsecond\nthird\n")
    with open(path, "r+b") as f:  # then 32 GB of NUL bytes on paper: never reached
        f.truncate(32 * 2**30)
    start = time.perf_counter()
    assert [s.text for s in read_text(path, limit=2)] == ["first", "second"]
    assert time.perf_counter() - start < 1


def test_bom_and_crlf_are_not_text(tmp_path):
    path = tmp_path / "w.csv"
    path.write_bytes('\ufefftext,label\r\nhello there,1\r\n"two\r\nlines",2\r\n'.encode("utf-8"))
    # a line end inside a quoted cell comes out as \n, whatever the file used
    assert [(s.text, s.source.rsplit(":", 1)[1]) for s in read_csv(path)] == [
        ("hello there", "2"),
        ("two\nlines", "3"),
    ]


def test_csv_limit_and_jsonl_limit(tmp_path):
    (tmp_path / "a.csv").write_text("text\n" + "".join(f"row {i}\n" for i in range(100)))
    (tmp_path / "a.jsonl").write_text(
        "".join(f'{{"text": "row {i}"}}\n' for i in range(100)) + "not json\n"
    )
    assert len(read_corpus(tmp_path / "a.csv", limit=7)) == 7
    assert [s.text for s in read_corpus(tmp_path / "a.jsonl", limit=3)] == [
        "row 0",
        "row 1",
        "row 2",
    ]


def test_conllu_multiword_tokens_and_empty_nodes_keep_the_text(tmp_path):
    path = tmp_path / "mwt.conllu"
    path.write_text(
        "# text = Del mar.\n"
        "1-2\tDel\t_\t_\t_\t_\t_\t_\t_\t_\n"
        "1\tde\tde\tADP\t_\t_\t3\tcase\t_\t_\n"
        "2\tel\tel\tDET\t_\t_\t3\tdet\t_\t_\n"
        "2.1\tgone\t_\t_\t_\t_\t_\t_\t_\t_\n"
        "3\tmar\tmar\tNOUN\t_\t_\t0\troot\t_\tSpaceAfter=No\n"
        "4\t.\t.\tPUNCT\t_\t_\t3\tpunct\t_\t_\n\n"
    )
    (sentence,) = read_corpus(path)
    assert sentence.text == "de el mar." and [a.relation for a in sentence.arcs] == [
        "case",
        "det",
        "punct",
    ]

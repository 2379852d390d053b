"""One source of truth: report.html and report.pdf say everything the content model says."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest
from fakes import XSS, document_texts


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


class PageText(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def test_the_document_covers_every_section(report_doc):
    assert [s.id for s in report_doc.sections] == [
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
    texts = document_texts(report_doc)
    assert XSS in report_doc.title and any(XSS in t for t in texts)


def test_html_says_every_text_of_the_document(built_report, report_doc):
    parser = PageText()
    parser.feed((built_report / "report.html").read_text(encoding="utf-8"))
    page = squash("".join(parser.parts))  # entities decoded: the text a reader sees
    missing = [t for t in document_texts(report_doc) if squash(t) not in page]
    assert missing == []


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils is not installed")
def test_pdf_says_every_text_of_the_document(built_report, report_doc):
    text = subprocess.run(
        ["pdftotext", "-raw", str(built_report / "report.pdf"), "-"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    pdf = squash(text)
    missing = [t for t in document_texts(report_doc) if squash(t) not in pdf]
    assert missing == []

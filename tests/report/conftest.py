"""Fixtures of the report tests: synthetic runs (see fakes.py), one built report shared by the readers."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import make_fake_run


@pytest.fixture
def fake_run(tmp_path: Path) -> Path:
    return make_fake_run(tmp_path)


@pytest.fixture(name="make_fake_run")
def make_fake_run_fixture():
    """The factory itself, for tests that need several runs or some tables left out."""
    return make_fake_run


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> tuple[Path, object]:
    """One fake run with its report built (figures, report.html, report.pdf) and its content model."""
    from interp.pipeline.rundir import write_text
    from interp.report.html import build_document, render_html
    from interp.report.pdf import write_pdf

    run_dir = make_fake_run(tmp_path_factory.mktemp("built"))
    doc = build_document(run_dir)  # what build_report does, keeping the document for the tests
    write_text(run_dir / "report.html", render_html(doc))
    write_pdf(doc, run_dir / "report.pdf")
    return run_dir, doc


@pytest.fixture(scope="session")
def built_report(built) -> Path:
    """The built fake run's directory; tests only read it."""
    return built[0]


@pytest.fixture(scope="session")
def report_doc(built):
    """The content model both report.html and report.pdf of the built fake run were rendered from."""
    return built[1]

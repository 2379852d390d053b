"""report.pdf through poppler: the page count matches the content and no page is blank."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from interp.report import pdf
from interp.report.summary import report_summary
from interp.rundir import load_run

pytestmark = pytest.mark.skipif(shutil.which("pdftoppm") is None, reason="pdftoppm (poppler-utils) is not installed")


def rasterize(path: Path, out: Path) -> list[np.ndarray]:
    out.mkdir()
    subprocess.run(["pdftoppm", "-r", "40", "-gray", "-png", str(path), str(out / "page")], check=True, timeout=120)
    return [np.asarray(Image.open(p), dtype=float) for p in sorted(out.glob("page-*.png"))]


def assert_not_blank(pages: list[np.ndarray]) -> None:
    for i, page in enumerate(pages, 1):
        assert page.std() > 5 and (page < 128).mean() > 0.001, f"page {i} is blank"


def test_pages_match_content(built_report, tmp_path):
    pages = rasterize(built_report / "report.pdf", tmp_path / "png")
    run = load_run(built_report)
    n_features = run.features["feature"].nunique()
    n_exemplar_roles = 3  # previous_token, induction, syntactic (see fake_exemplars)
    n_figures = 2 + math.ceil(n_features / 12) + 4 + n_exemplar_roles  # roles x2, features, effects x3 + pruning
    expected = 1 + n_figures + math.ceil(len(run.roles) / pdf.ROWS_PER_PAGE)  # summary, figures, head table
    assert len(pages) == expected == 12
    assert_not_blank(pages)
    assert pages[0].shape[0] > pages[0].shape[1], "the summary is a portrait page"
    assert pages[-1].shape[1] > pages[-1].shape[0], "the head table is a landscape page"


def test_head_table_is_paginated(built_report, tmp_path):
    run = load_run(built_report)
    heads = pd.DataFrame({"layer": np.repeat(np.arange(17), 5), "head": np.tile(np.arange(5), 17),
                          "role": "induction", "confidence": 0.9})
    summary = report_summary(run)
    path = pdf.write_pdf(tmp_path, [], summary, heads)
    pages = rasterize(path, tmp_path / "png")
    assert len(pages) == pdf.page_count(summary, [], heads) == 1 + 3  # 85 rows at 40 a page
    assert_not_blank(pages)

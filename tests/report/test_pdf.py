"""report.pdf through poppler: pages drawn, long tables split with their header, metadata, outline."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from interp.report import content as C
from interp.report import pdf as P
from interp.report import pdf_tables as T
from interp.report.pdf import write_pdf

pytestmark = pytest.mark.skipif(
    shutil.which("pdftoppm") is None or shutil.which("pdftotext") is None,
    reason="poppler-utils (pdftoppm, pdftotext) is not installed",
)


def rasterize(path: Path, out: Path) -> list[np.ndarray]:
    out.mkdir()
    subprocess.run(
        ["pdftoppm", "-r", "40", "-gray", "-png", str(path), str(out / "page")],
        check=True,
        timeout=120,
    )
    return [np.asarray(Image.open(p), dtype=float) for p in sorted(out.glob("page-*.png"))]


def page_texts(path: Path) -> list[str]:
    text = subprocess.run(
        ["pdftotext", "-raw", str(path), "-"], check=True, capture_output=True, text=True
    ).stdout
    return text.split("\f")[:-1]


def test_every_page_is_drawn_and_portrait(built_report, tmp_path):
    pages = rasterize(built_report / "report.pdf", tmp_path / "png")
    assert len(pages) == len(page_texts(built_report / "report.pdf")) >= 4
    for i, page in enumerate(pages, 1):
        assert page.std() > 5 and (page < 128).mean() > 0.001, f"page {i} is blank"
        assert page.shape[0] > page.shape[1], f"page {i} is A4 portrait"


def test_metadata_and_outline_name_the_model_and_sections(built_report, report_doc):
    info = subprocess.run(
        ["pdfinfo", str(built_report / "report.pdf")], check=True, capture_output=True, text=True
    ).stdout
    assert re.search(r"^Title: +" + re.escape(report_doc.page_title) + "$", info, re.M)
    raw = (built_report / "report.pdf").read_bytes()
    assert b"/PageMode /UseOutlines" in raw  # a viewer opens the outline beside the pages
    outline = re.findall(rb"/Title \(([^)]*)\)", raw)[1:]
    assert [t.decode() for t in outline] == [s.title for s in report_doc.sections]
    footer, title = page_texts(built_report / "report.pdf")[0].splitlines()[:2]
    assert footer == f"{report_doc.page_title} page 1"
    assert title == "Attention heads of tiny-run", (
        "the title, as text (wrapped before the escaped tag)"
    )


def test_a_long_table_splits_across_pages_with_its_header(tmp_path):
    heads = pd.DataFrame(
        {
            "layer": np.repeat(np.arange(30), 9),
            "head": np.tile(np.arange(9), 30),
            "role": "induction",
            "confidence": 0.9,
        }
    )
    doc = C.Document("t", "t", (), (C.Section("heads", "Heads", (C.table(heads, "head-table"),)),))
    path = write_pdf(doc, tmp_path / "r.pdf")
    pages = page_texts(path)
    assert len(pages) >= 3
    for page in pages:
        assert "layer head role confidence" in page
    rows = [line for page in pages for line in page.splitlines() if line.endswith("induction 0.9")]
    assert len(rows) == 270


def test_a_wide_heads_table_wraps_between_words_not_inside_role_names(tmp_path):
    """The heads table with an effect column per metric is wider than the page: its text columns
    shrink, but never below their longest word, so no role name is cut in two."""
    roles = ["duplicate_token", "previous_token", "unexplained", "current_token"]
    heads = pd.DataFrame(
        {
            "layer": np.repeat(np.arange(10), 4),
            "head": np.tile(np.arange(4), 10),
            "role": roles * 10,
            "confidence": 0.912,
            "second_role": roles[::-1] * 10,
            "stability": 0.95,
            "sink_mass": 0.0598,
            "Δ loss_prose": -0.00297,
            "Δ loss_repeated": 0.00159,
            "Δ sv_logit_diff": -0.00232,
        }
    )
    table = C.table(heads, "head-table")
    doc = C.Document("t", "t", (), (C.Section("heads", "Heads", (table,)),))
    words = " ".join(page_texts(write_pdf(doc, tmp_path / "r.pdf"))).split()
    assert sum(T.column_widths(table, P.WIDTH)) <= P.WIDTH + 1e-6  # fonts registered by write_pdf
    assert {w: words.count(w) for w in roles} == {
        w: 20 for w in roles
    }  # 10 rows x 2 columns, each whole


def test_a_wide_table_of_intervals_wraps_a_value_above_its_interval_not_a_role_name(tmp_path):
    """The role-pruning table (a value and its interval per metric) is wider than the page: its
    interval columns put the interval under the value, so the role names stay whole."""
    roles = ["previous_token", "current_token", "duplicate_token", "copy_suppression"]
    frame = pd.DataFrame({"role": roles, "heads": [7, 8, 6, 4]})
    intervals = {}
    for k, metric in enumerate(["loss_prose", "kl_prose", "loss_repeated", "sv_logit_diff"]):
        frame[metric] = [0.3261 + k, 0.1392, 8.34e-08, 0.0709]
        frame[f"{metric} low"] = [0.2524 + k, 0.0968, 6.43e-08, 0.0443]
        frame[f"{metric} high"] = [0.4123 + k, 0.1944, 1.03e-07, 0.1301]
        intervals[metric] = (f"{metric} low", f"{metric} high")
    table = C.table(frame, "role-pruning", intervals=intervals)
    doc = C.Document("t", "t", (), (C.Section("roles", "Roles", (table,)),))
    lines = page_texts(write_pdf(doc, tmp_path / "r.pdf"))[0].splitlines()
    widths = T.column_widths(table, P.WIDTH)
    assert sum(widths) <= P.WIDTH + 1e-6
    assert widths[0] >= max(T.pdfmetrics.stringWidth(r, T.FONT, T.CELL_FONT) for r in roles)
    words = " ".join(lines).split()
    assert {r: words.count(r) for r in roles} == dict.fromkeys(roles, 1)
    intervals_drawn = [w for line in lines for w in re.findall(r"\([^()]*\)", line)]
    assert len(intervals_drawn) == 16  # 4 rows x 4 metrics, each interval on one line
    assert all(line.count("(") == line.count(")") for line in lines)


def test_a_table_whose_words_do_not_fit_side_by_side_gets_a_smaller_font_not_cut_words(tmp_path):
    """Eleven columns of role names (the heads-that-matter table) are wider than the page even
    one word per line: the font shrinks until they fit, and no role name is cut or lost."""
    roles = ["frequent_token", "unexplained", "current_token", "previous_token"]
    frame = pd.DataFrame(
        {
            "head": [f"L{i}H{i % 9}" for i in range(12)],
            "metric": ["loss_repeated"] * 12,
            "delta": np.linspace(-1.2, 2.4, 12),
            "role": roles * 3,
            "second_role": roles[::-1] * 3,
            "evidence": ["attention"] * 12,
            "looks": roles * 3,
            "components": ["delimiter 0.29 + local 0.24"] * 12,
            "writes": ["copy_suppression"] * 12,
            "task_role": ["negative_mover"] * 12,
            "output_size": np.linspace(0.01, 0.3, 12),
        }
    )
    table = C.table(frame, "evidence-table")
    doc = C.Document("t", "t", (), (C.Section("evidence", "Evidence", (table,)),))
    words = " ".join(page_texts(write_pdf(doc, tmp_path / "r.pdf"))).split()
    size = T.cell_size(table, P.WIDTH, T.TIGHT_PAD)
    assert T.MIN_CELL_FONT <= size < T.CELL_FONT
    assert sum(T.column_widths(table, P.WIDTH, T.TIGHT_PAD, size)) <= P.WIDTH + 1e-6
    expected = dict.fromkeys(roles, 9)
    assert {w: words.count(w) for w in expected} == expected  # role, second_role, looks: 3 each
    assert words.count("copy_suppression") == 12 and words.count("negative_mover") == 12


def test_same_content_gives_the_same_bytes(report_doc, tmp_path):
    one = write_pdf(report_doc, tmp_path / "a.pdf").read_bytes()
    assert write_pdf(report_doc, tmp_path / "b.pdf").read_bytes() == one


def test_streams_are_binary_and_reportlabs_setting_is_restored(report_doc, tmp_path):
    from reportlab import rl_config

    before = rl_config.useA85
    raw = write_pdf(report_doc, tmp_path / "r.pdf").read_bytes()
    assert b"/FlateDecode" in raw and b"ASCII85Decode" not in raw
    assert rl_config.useA85 == before

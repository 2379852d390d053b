"""The HTML report in a real browser (headless Chromium): it renders, escapes, sorts, filters, logs nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

CHROMIUM = Path("/usr/bin/chromium")
XSS = "<script>alert(1)</script>"

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="/usr/bin/chromium is not installed (make browser)"
)


def chromium(page: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """Run headless Chromium on a local page, offline and with a throwaway profile."""
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    cmd = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--hide-scrollbars",
        "--window-size=1280,2000",
        *args,
        page.resolve().as_uri(),
    ]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def console_lines(stderr: str, page: Path) -> list[str]:
    """Console messages and uncaught errors of our page (Chromium logs them as ':CONSOLE' lines)."""
    uri = page.resolve().as_uri()
    return [
        line
        for line in stderr.splitlines()
        if (":CONSOLE" in line and uri in line) or "Uncaught" in line
    ]


class Dom(HTMLParser):
    """Collects what the tests look for: element ids, the images inside figures, text."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: dict[str, str] = {}
        self.figure: str | None = None
        self.images: dict[str, str] = {}
        self.text: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids[attrs["id"]] = tag
        if tag == "figure":
            self.figure = attrs.get("id")
        if tag == "img" and self.figure:
            self.images[self.figure] = attrs.get("src", "")
        if tag == "script":
            self.scripts += 1

    def handle_data(self, data):
        self.text.append(data)


def test_report_renders_without_errors(built_report, tmp_path):
    page = built_report / "report.html"
    shot = tmp_path / "shot.png"
    run = chromium(page, tmp_path, f"--screenshot={shot}")
    assert console_lines(run.stderr, page) == []
    pixels = np.asarray(Image.open(shot).convert("L"), dtype=float)
    assert pixels.shape == (2000, 1280)
    assert pixels.std() > 20 and (pixels < 200).mean() > 0.02, "the screenshot is blank"


def test_dom_has_figures_table_and_escaped_text(built_report, tmp_path):
    page = built_report / "report.html"
    run = chromium(page, tmp_path, "--dump-dom")
    assert console_lines(run.stderr, page) == []
    dom_html = run.stdout
    dom = Dom()
    dom.feed(dom_html)
    assert dom.images["fig-role_map"].startswith("data:image/png;base64,")
    assert dom.ids.get("head-table") == "table" and dom.ids.get("cluster-table") == "table"
    assert XSS in "".join(dom.text), "the planted tag shows as text"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom_html and XSS not in dom_html
    assert dom.scripts == 1
    assert "12 of 12 rows" in dom_html  # the filter script ran and counted the head rows


PROBE = """<script>
(function () {
  var out = {}, table = document.getElementById("head-table");
  var col = function (name) {
    var ths = table.tHead.rows[0].cells;
    for (var i = 0; i < ths.length; i++) if (ths[i].textContent.trim() === name) return i;
  };
  var values = function (name) {
    var i = col(name), rows = table.tBodies[0].rows, v = [];
    for (var r = 0; r < rows.length; r++) if (!rows[r].hidden) v.push(rows[r].cells[i].textContent.trim());
    return v;
  };
  var click = function (name) { table.tHead.rows[0].cells[col(name)].querySelector("button").click(); };
  click("confidence"); out.asc = values("confidence");
  click("confidence"); out.desc = values("confidence");
  click("role"); out.roles = values("role");
  var box = document.getElementById("head-table-filter");
  box.value = "unexplained"; box.dispatchEvent(new Event("input"));
  out.filtered = values("role");
  out.count = document.getElementById("head-table-count").textContent;
  document.body.setAttribute("data-probe", JSON.stringify(out));
})();
</script></body>"""


def test_sorting_and_filtering_work(built_report, tmp_path):
    """Click headers and type in the filter box from a probe script, read the result from the DOM."""
    page = tmp_path / "probe.html"
    page.write_text(
        (built_report / "report.html").read_text(encoding="utf-8").replace("</body>", PROBE, 1),
        encoding="utf-8",
    )
    run = chromium(page, tmp_path, "--dump-dom")
    assert console_lines(run.stderr, page) == []
    dom = Dom()
    dom.feed(run.stdout)
    probe = json.loads(
        run.stdout.split('data-probe="', 1)[1].split('"', 1)[0].replace("&quot;", '"')
    )
    asc = [float(v) for v in probe["asc"]]
    assert asc == sorted(asc) and len(asc) == 12
    assert [float(v) for v in probe["desc"]] == sorted(asc, reverse=True)
    assert probe["roles"] == sorted(probe["roles"])
    assert probe["filtered"] == ["unexplained", "unexplained"] and probe["count"] == "2 of 12 rows"


def test_narrow_window_has_no_page_wide_overflow(built_report, tmp_path):
    """On a narrow screen the page itself does not scroll sideways (wide tables and figures scroll in place).

    500 px is the narrowest window headless Chromium lays out; the phone rules apply below 700 px.
    """
    page = tmp_path / "narrow.html"
    probe = (
        '<script>document.body.setAttribute("data-width", document.documentElement.scrollWidth + " " + '
        "window.innerWidth);</script></body>"
    )
    page.write_text(
        (built_report / "report.html").read_text(encoding="utf-8").replace("</body>", probe, 1),
        encoding="utf-8",
    )
    run = chromium(page, tmp_path, "--dump-dom", "--window-size=500,900")
    scroll, inner = map(int, run.stdout.split('data-width="', 1)[1].split('"', 1)[0].split())
    assert inner < 700 and scroll <= inner


FITS = """<script>
document.body.setAttribute("data-fits", JSON.stringify(Array.prototype.map.call(
  document.querySelectorAll("#summary table, #heads table, #clusters table"), function (t) {
    var box = t.closest(".scroll") || t.parentElement;
    return [t.id || t.className, box.scrollWidth, box.clientWidth];
  })));
</script></body>"""


def tables_at(page: Path, width: int, tmp_path: Path) -> list[list]:
    """[table id, scroll width, visible width] of every summary, heads and clusters table, laid out
    at ``width`` px."""
    probe = tmp_path / f"fits-{width}.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", FITS, 1), encoding="utf-8")
    run = chromium(probe, tmp_path, "--dump-dom", f"--window-size={width},2000")
    return json.loads(run.stdout.split('data-fits="', 1)[1].split('"', 1)[0].replace("&quot;", '"'))


def test_no_summary_table_scrolls_sideways_at_laptop_width(built_report, tmp_path):
    """At 1400 px every table of the summary (and the heads and clusters tables) shows all its
    columns: none hides some behind a scrollbar."""
    tables = tables_at(built_report / "report.html", 1400, tmp_path)
    assert {name for name, _, _ in tables} >= {
        "role-counts",
        "prunable",
        "role-pruning",
        "corpora",
        "kv",
        "head-table",
        "cluster-table",
    }
    assert [t for t in tables if t[1] > t[2]] == []


def test_the_overflow_check_sees_a_table_too_wide(tmp_path):
    """Guard for the check above: a table wider than the page is reported."""
    page = tmp_path / "wide.html"
    cells = "".join(f"<td>{'x' * 30}</td>" for _ in range(60))
    page.write_text(
        f'<!doctype html><body><section id="summary"><div class="scroll" style="overflow-x:auto">'
        f'<table id="wide"><tr>{cells}</tr></table></div></section></body>',
        encoding="utf-8",
    )
    ((name, scroll, visible),) = tables_at(page, 1400, tmp_path)
    assert name == "wide" and scroll > visible


def test_console_check_catches_a_broken_page(tmp_path):
    """Guard for the checks above: a page that throws is reported."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!doctype html><p>x</p><script>undefinedFunction();</script>", encoding="utf-8"
    )
    run = chromium(page, tmp_path, "--dump-dom")
    assert any("undefinedFunction" in line for line in console_lines(run.stderr, page))

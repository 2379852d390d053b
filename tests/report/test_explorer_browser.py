"""The report's attention explorer in headless Chromium: a click on a head changes the pattern
shown, hovering a token reads its row, the text menu switches to a probe; nothing is logged."""

from __future__ import annotations

import json

import pytest
from test_browser import CHROMIUM, XSS, chromium, console_lines
from test_explorer import PROMPT_TOKENS, fake_prompts

from interp.pipeline.results import load_run
from interp.report import explorer as X
from interp.report import head_facts
from interp.report import prompt_store as P

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="/usr/bin/chromium is not installed (make browser)"
)

PROBE = """<script>
(function () {
  var state = function () {
    var spans = document.querySelectorAll("#explorer-tokens span");
    var weights = Array.prototype.map.call(spans, function (s) { return parseFloat(s.getAttribute("data-w")); });
    return {
      title: document.getElementById("explorer-title").textContent,
      role: document.getElementById("explorer-role").textContent,
      features: document.querySelectorAll("#explorer-features tbody tr").length,
      effects: document.querySelectorAll("#explorer-effects tbody tr").length,
      pressed: Array.prototype.map.call(document.querySelectorAll('#explorer-grid button[aria-pressed="true"]'),
                                        function (b) { return b.getAttribute("data-head"); }),
      tokens: Array.prototype.map.call(spans, function (s) { return s.textContent; }),
      top: weights.indexOf(Math.max.apply(null, weights)),
      readout: document.getElementById("explorer-readout").textContent,
      painted: (function () {  // how many heatmap pixels are not white
        var c = document.getElementById("explorer-heatmap"), copy = document.createElement("canvas");
        copy.width = c.width; copy.height = c.height;
        var ctx = copy.getContext("2d", {willReadFrequently: true});
        ctx.drawImage(c, 0, 0);
        var d = ctx.getImageData(0, 0, c.width, c.height).data, n = 0;
        for (var i = 0; i < d.length; i += 4) if (d[i] < 250 || d[i + 1] < 250) n++;
        return n;
      })()
    };
  };
  var out = {start: state()};
  document.querySelector('#explorer-grid button[data-head="0.1"]').click();
  out.clicked = state();
  document.querySelector('#explorer-grid button[data-head="1.2"]').click();
  out.other = state();
  document.querySelector('#explorer-tokens span[data-pos="4"]').dispatchEvent(new MouseEvent("mouseover", {bubbles: true}));
  out.hovered = state();
  var menu = document.getElementById("explorer-source");
  menu.value = "2"; menu.dispatchEvent(new Event("change"));
  out.probe = state();
  document.body.setAttribute("data-probe", JSON.stringify(out));
})();
</script></body>"""


def page_with_probe(run_dir, tmp_path, name: str):
    """The explorer of ``run_dir`` in a page of two small sections (no figures: fast), plus PROBE."""
    from interp.report import content as C
    from interp.report.html import explorer_of, render_html

    doc = C.Document(
        "Explorer test",
        "Explorer test",
        (),
        (
            C.Section("roles", "Roles", (C.Text("role map"),)),
            C.Section("heads", "Heads", (C.Text("heads"),)),
        ),
    )
    page = tmp_path / name
    page.write_text(
        render_html(doc, explorer_of(run_dir)).replace("</body>", PROBE, 1), encoding="utf-8"
    )
    return page


def probe_state(stdout: str) -> dict:
    raw = stdout.split('data-probe="', 1)[1].split('"', 1)[0]
    return json.loads(
        raw.replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    )


def test_a_click_on_a_head_shows_its_pattern(fake_run, tmp_path):
    P.write_prompts(fake_run, fake_prompts())
    page = page_with_probe(fake_run, tmp_path, "explorer.html")
    run = chromium(page, tmp_path, "--dump-dom")
    assert console_lines(run.stderr, page) == []
    state = probe_state(run.stdout)
    last = len(PROMPT_TOKENS) - 1

    first = X.default_heads(load_run(fake_run))[0]
    start = state["start"]  # the most important head by effect, on the first prompt, last query
    assert start["pressed"] == [f"{first[0]}.{first[1]}"] and start["title"].startswith(
        X.head_name(*first)
    )
    assert start["painted"] > 0
    assert start["tokens"][5] == XSS and start["tokens"][-1] == "\\n to"  # the planted tag is text
    # head (l, h) attends (l + h) % 4 tokens back: a click moves the last query's peak
    clicked, other = state["clicked"], state["other"]
    assert clicked["pressed"] == ["0.1"] and clicked["title"] == "L0H1 · first_token"
    assert clicked["top"] == last - 1 and clicked["readout"].startswith(f"Query {last} ")
    assert (
        other["pressed"] == ["1.2"]
        and other["title"] == "L1H2 · syntactic"
        and other["top"] == last - 3
    )
    assert (
        "primary role syntactic" in other["role"]
        and other["features"] == head_facts.N_FEATURES
        and other["effects"] == 3
    )
    assert clicked["role"] != other["role"]
    assert (
        state["hovered"]["readout"].startswith("Query 4 ") and state["hovered"]["top"] == 1
    )  # 4 - 3
    probe = state["probe"]  # the menu's third entry: the first stored probe, same head
    assert (
        probe["title"] == "L1H2 · syntactic"
        and probe["tokens"][0] == "<s>"
        and probe["tokens"] != start["tokens"]
    )
    assert XSS not in run.stdout  # serialized as text, never as markup


def test_a_head_not_stored_for_a_prompt_says_so(fake_run, tmp_path):
    first = X.default_heads(load_run(fake_run))[0]
    P.write_prompts(fake_run, fake_prompts(heads=(first,)))
    page = page_with_probe(fake_run, tmp_path, "subset.html")
    run = chromium(page, tmp_path, "--dump-dom")
    assert console_lines(run.stderr, page) == []
    state = probe_state(run.stdout)
    assert state["start"]["title"].startswith(X.head_name(*first)) and state["start"][
        "readout"
    ].startswith("Query 8 ")
    elsewhere = (
        state["clicked"] if first != (0, 1) else state["other"]
    )  # the probe clicks L0H1, then L1H2
    assert "not stored for this text" in elsewhere["readout"]

"""A run in a notebook: its summary table, the report's figures as matplotlib figures, and the
explorer as an inline page (interp.pipeline.results, interp.report.notebook)."""

from __future__ import annotations

import html
import re

import pytest
from fakes import make_fake_run
from matplotlib.figure import Figure
from test_explorer import fake_prompts

import interp
from interp.errors import RunError
from interp.report import prompt_store as P


def test_a_run_shows_itself_as_a_short_table(tmp_path):
    run_dir = make_fake_run(tmp_path, model_name="<b>tiny</b>")
    run = interp.load_run(run_dir)
    shown = run._repr_html_()
    rows = dict(re.findall(r"<th[^>]*>([^<]+)</th><td[^>]*>([^<]*)</td>", shown))
    assert list(rows) == ["model", "path", "stages", "roles", "effects", "tables"]
    assert rows["model"].startswith("&lt;b&gt;tiny&lt;/b&gt;")  # escaped, never markup
    counts = run.roles["role"].value_counts()
    assert rows["roles"] == ", ".join(f"{role} {n}" for role, n in counts.items())
    exact = run.effects.query("estimator == 'exact'")[["layer", "head"]].drop_duplicates()
    assert rows["effects"].endswith(f"; {len(exact)} heads ablated exactly")
    assert f"roles ({len(run.roles):,} rows)" in rows["tables"]
    assert "<b>tiny</b>" not in shown


def test_a_figure_comes_back_as_a_matplotlib_figure_and_is_not_written(fake_run):
    before = sorted(p.name for p in fake_run.rglob("*"))
    for name in ("role_map", "effect_maps", "pruning", "features_1"):
        fig = interp.figure(fake_run, name)
        assert isinstance(fig, Figure) and fig.axes, name
    induction = interp.figure(interp.load_run(fake_run), "exemplar_induction")
    assert "induction" in " ".join(ax.get_title() for ax in induction.axes)
    assert sorted(p.name for p in fake_run.rglob("*")) == before


def test_a_figure_the_run_cannot_draw_is_refused_in_one_line(fake_run, make_fake_run):
    with pytest.raises(RunError, match="no figure named 'roles': the report draws role_map"):
        interp.figure(fake_run, "roles")
    with pytest.raises(RunError, match=r"no figure 'features_9'; of that kind it has: features_1"):
        interp.figure(fake_run, "features_9")
    bare = make_fake_run(fake_run.parent, name="bare", tables=("features",))
    with pytest.raises(RunError, match="it has: none"):
        interp.figure(bare, "pruning")


def test_the_explorer_shows_inline_as_the_self_contained_page(fake_run, tmp_path):
    page = interp.explorer(fake_run)
    assert page.html.startswith("<!doctype html>") and 'id="explorer"' in page.html
    frame = page._repr_html_()
    found = re.fullmatch(
        r'<iframe srcdoc="([^"]*)" sandbox="allow-scripts" style="[^"]*"></iframe>', frame
    )
    assert found, frame[:200]
    assert html.unescape(found.group(1)) == page.html  # the whole page, nothing to fetch
    assert not re.search(r"""(?:src|href)=["']?(?:https?:)?//""", page.html)
    saved = page.save(tmp_path / "explorer.html")
    assert saved.read_text() == page.html


def test_the_explorer_of_the_prompts_interp_show_stored(fake_run):
    with pytest.raises(RunError, match="has no prompts: run `interp show"):
        interp.explorer(fake_run, prompts_only=True)
    P.write_prompts(fake_run, fake_prompts())
    page = interp.explorer(fake_run, prompts_only=True)
    assert "When Mary and John" in page.html and "2 prompt(s)" in page.html
    assert "prose probe" not in page.html  # the probes are left out
    assert "When Mary and John" in interp.explorer(fake_run).html  # the run's explorer has both


def test_every_figure_of_the_report_can_be_drawn_by_name(fake_run, tmp_path):
    from interp.pipeline.stages import STAGES
    from interp.report.document import stage_sections

    run = interp.load_run(fake_run)
    stage_sections(run, tmp_path / "figures", STAGES)  # what the report draws, by file stem
    names = sorted(p.stem for p in (tmp_path / "figures").glob("*.png"))
    assert len(names) >= 10
    for name in names:
        assert isinstance(interp.figure(run, name), Figure), (
            f"the report draws {name} but interp.figure cannot: add it to "
            "interp.report.notebook.BUILDERS"
        )

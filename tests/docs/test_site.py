"""The documentation site builds with warnings as errors, and no link in it or in the README is dead.

The strict build (mkdocs.yml: ``strict: true``) fails on a link to a missing page or heading, a
page left out of the navigation, an API reference that names a missing object, and a tutorial
whose cell raises. The built pages' links, those of the tutorials and the generated API
reference included, are then followed one by one. The fast build renders the tutorials as
stored; the slow one (``slow``: they load the packaged models) executes every notebook of
docs/tutorials/ top to bottom, as the published site is built.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from links import dead_markdown_links, dead_site_links, slug

ROOT = Path(__file__).resolve().parents[2]


def build(out: Path, execute: bool) -> Path:
    """``mkdocs build --strict`` into ``out``; the tutorials run only when ``execute``, their
    scratch folders (``tempfile.mkdtemp``) beside ``out`` so that the test's temporary directory
    takes them away."""
    scratch = out.parent / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "NO_MKDOCS_2_WARNING": "1",
        "INTERP_DOCS_EXECUTE": "true" if execute else "false",
        "TMPDIR": str(scratch),
    }
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    problems = [line for line in done.stderr.splitlines() if not line.startswith("INFO")]
    assert done.returncode == 0, "the strict docs build failed:\n" + "\n".join(problems[-80:])
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site with the tutorials rendered as they are stored (not run): seconds."""
    return build(tmp_path_factory.mktemp("site"), execute=False)


def test_the_site_builds_strict_with_every_page(site):
    pages = {
        p.relative_to(ROOT / "docs").with_suffix("").as_posix()
        for p in (ROOT / "docs").rglob("*.md")
    }
    pages |= {f"tutorials/{p.stem}" for p in (ROOT / "docs" / "tutorials").glob("*.py")}
    for page in pages:
        built = site / (page.removesuffix("index").rstrip("/")) / "index.html"
        assert built.is_file(), f"docs/{page} was not built"


def test_no_link_of_the_site_is_dead(site):
    dead = dead_site_links(site)
    assert not dead, "dead links in the built site:\n" + "\n".join(dead)


TUTORIALS = sorted(p.stem for p in (ROOT / "docs" / "tutorials").glob("*.py"))


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_tutorials_run_top_to_bottom(tmp_path):
    """The site as published: every tutorial executed (a cell that raises fails the build),
    its outputs on the page: tables, figures and the inline explorer."""
    assert len(TUTORIALS) >= 4
    site = build(tmp_path / "site", execute=True)
    for name in TUTORIALS:  # a cell that raises has already failed the build (allow_errors: false)
        page = (site / "tutorials" / name / "index.html").read_text(encoding="utf-8")
        assert page.count("jp-OutputArea-output") >= 3, f"{name}: no outputs"
    for name in ("first-run", "own-task", "own-model"):
        page = (site / "tutorials" / name / "index.html").read_text(encoding="utf-8")
        assert "data:image/png;base64," in page, f"{name}: no figure"
        assert re.search(r"<iframe [^>]*srcdoc=", page), f"{name}: the explorer is not inline"
        assert 'class="interp-run"' in page, f"{name}: the run's summary table is missing"
    dead = dead_site_links(site)
    assert not dead, "dead links in the built site:\n" + "\n".join(dead)


def test_no_link_of_the_readme_is_dead():
    dead = dead_markdown_links(ROOT / "README.md")
    assert not dead, "dead links in README.md:\n" + "\n".join(dead)


def test_the_link_check_finds_a_dead_file_and_a_dead_anchor(tmp_path):
    (tmp_path / "a.md").write_text("# A page\n\n## The `x` option, again\n")
    readme = tmp_path / "README.md"
    readme.write_text(
        "[ok](a.md#the-x-option-again) [gone](b.md) [bad anchor](a.md#nothing) "
        "[web](https://example.org/x.md)\n\n```\n[in code](c.md)\n```\n"
    )
    assert dead_markdown_links(readme) == [
        "b.md: no such file",
        "a.md#nothing: no heading #nothing in a.md",
    ]
    site = tmp_path / "site"
    (site / "page").mkdir(parents=True)
    (site / "index.html").write_text(
        '<a href="page/#top">p</a><a href="page/#none">p</a><img src="x.png">'
    )
    (site / "page" / "index.html").write_text('<h1 id="top">T</h1><a href="../">home</a>')
    assert dead_site_links(site) == [
        "index.html: page/#none: no #none in page/index.html",
        "index.html: x.png: no such file",
    ]


def test_slug_is_the_heading_anchor():
    assert slug("Seeing a head's attention") == "seeing-a-heads-attention"
    assert slug("`interp run`") == "interp-run"

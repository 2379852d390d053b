"""The documentation site builds with warnings as errors, and no link in it or in the README is dead.

The strict build (mkdocs.yml: ``strict: true``) fails on a link to a missing page or heading, a
page left out of the navigation, an API reference that names a missing object, and a tutorial
whose cell raises: the tutorials are executed as the site builds (mkdocs-jupyter), so this test
also runs every notebook of docs/tutorials/ top to bottom. The built pages' links, those of the
tutorials and the generated API reference included, are then followed one by one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from links import dead_markdown_links, dead_site_links, slug

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "INTERP_DOCS_EXECUTE": "true"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    problems = [line for line in done.stderr.splitlines() if not line.startswith("INFO")]
    assert done.returncode == 0, "the strict docs build failed:\n" + "\n".join(problems[-60:])
    return out


@pytest.mark.timeout(900)
def test_the_site_builds_strict_with_every_page(site):
    pages = {
        p.relative_to(ROOT / "docs").with_suffix("").as_posix()
        for p in (ROOT / "docs").rglob("*.md")
    }
    for page in pages:
        built = site / (page.removesuffix("index").rstrip("/")) / "index.html"
        assert built.is_file(), f"docs/{page}.md was not built"


def test_no_link_of_the_site_is_dead(site):
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

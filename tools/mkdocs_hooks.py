"""MkDocs hooks of the documentation site (``hooks:`` in mkdocs.yml).

The results and write-ups live beside the code that measures them (``benchmarks/RESULTS.md``,
``analyses/results/*.md``, ``interp/data/CARDS.md``), not in ``docs/``; the site shows them as pages of
its own (``MOUNTS``). Pages link to them by their place in the checkout, as they would on disk
(``../../benchmarks/RESULTS.md`` from ``docs/results/index.md``), so a link reads the same in an
editor, on a code host and in the site: these hooks rewrite such a link to the mounted page. They
also rewrite the links of the tutorials (notebooks, whose HTML MkDocs does not touch) to the pages
they name. A link to a file that is neither in ``docs/`` nor mounted stays as written, and the
strict build fails on it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]

# checkout path (a file, or a folder whose markdown and images are mounted) -> path in the site
MOUNTS = {
    "benchmarks/RESULTS.md": "results/benchmarks.md",
    "benchmarks/SCALING.md": "results/scaling.md",
    "analyses/RESULTS.md": "results/analyses.md",
    "analyses/results": "results/experiments",
    "interp/data/CARDS.md": "concepts/probe-cards.md",
}
# A mounted folder's pages are its own markdown files (not its subfolders'); its images are
# mounted from the subfolders too (a write-up's figures live in a folder named after it).
IMAGES = (".png", ".svg")
# a markdown link or image target: ](target) or ](target "title")
MD_LINK = re.compile(r"(\]\()([^)\s#]+)((?:#[^)\s]*)?(?:\s+\"[^\"]*\")?\))")
HTML_HREF = re.compile(r'((?:href|src)=")([^"#:]+\.(?:md|py))((?:#[^"]*)?")')


def mounted_files(root: Path = ROOT) -> dict[str, Path]:
    """Site path -> file in the checkout, for every mounted file."""
    found = {}
    for source, target in MOUNTS.items():
        path = root / source
        if path.is_file():
            found[target] = path
        elif path.is_dir():
            for child in sorted(path.rglob("*")):
                page = child.suffix == ".md" and child.parent == path
                if child.is_file() and (page or child.suffix in IMAGES):
                    found[f"{target}/{child.relative_to(path).as_posix()}"] = child
    return found


def site_path(real: Path, docs_dir: Path) -> str | None:
    """Where a file of the checkout is in the site: its path under docs/, its mount, or None."""
    real = Path(os.path.normpath(real))
    if real.is_relative_to(docs_dir):
        return real.relative_to(docs_dir).as_posix()
    for site, path in mounted_files(ROOT).items():
        if path == real:
            return site
    return None


def _source(file: File, docs_dir: Path) -> Path:
    return Path(file.abs_src_path) if file.abs_src_path else docs_dir / file.src_uri


def rewrite_target(file: File, target: str, docs_dir: Path) -> str:
    """The link ``target`` of the page ``file`` as the site needs it (relative to the page)."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
        return target
    real = _source(file, docs_dir).parent / target
    where = site_path(real, docs_dir)
    if where is None:
        return target
    start = PurePosixPath(file.src_uri).parent
    return os.path.relpath(where, start.as_posix() or ".").replace(os.sep, "/")


def on_files(files: Files, config) -> Files:
    for site, path in mounted_files(ROOT).items():
        files.append(File.generated(config, site, abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    docs_dir = Path(config["docs_dir"])

    def fix(m: re.Match) -> str:
        return m.group(1) + rewrite_target(page.file, m.group(2), docs_dir) + m.group(3)

    return MD_LINK.sub(fix, markdown)


def on_page_content(html: str, page, config, files: Files) -> str:
    """A tutorial's links to other pages (``../concepts/roles.md``) become the pages' URLs."""
    if not page.file.src_uri.endswith(".py"):
        return html
    docs_dir = Path(config["docs_dir"])

    def fix(m: re.Match) -> str:
        target = rewrite_target(page.file, m.group(2), docs_dir)
        uri = os.path.normpath(
            os.path.join(PurePosixPath(page.file.src_uri).parent.as_posix(), target)
        )
        found = files.get_file_from_path(uri)
        if found is None:
            return m.group(0)  # left as written: the link check names it
        return m.group(1) + found.url_relative_to(page.file) + m.group(3)

    return HTML_HREF.sub(fix, html)

"""Dead-link checks: the README's links into the checkout, and every link of the built site."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

MD_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)


def slug(heading: str) -> str:
    """The anchor MkDocs' toc (and a code host) gives a markdown heading."""
    text = re.sub(r"[`*_]", "", heading).strip().lower()
    text = re.sub(r"[^\w\s-]", "", text)
    return re.sub(r"[\s]+", "-", text)


def markdown_anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {slug(h) for h in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", text, re.M)}


def dead_markdown_links(path: Path) -> list[str]:
    """Links of a markdown file that name a missing file, or a heading its markdown target lacks."""
    dead = []
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    for target in MD_LINK.findall(text):
        if EXTERNAL.match(target):
            continue
        file, _, anchor = target.partition("#")
        resolved = (path.parent / unquote(file)).resolve() if file else path
        if not resolved.exists():
            dead.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in markdown_anchors(resolved):
            dead.append(f"{target}: no heading #{anchor} in {resolved.name}")
    return dead


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(found["id"])
        if tag == "a" and found.get("name"):
            self.ids.add(found["name"])
        for key in ("href", "src"):
            if found.get(key) and tag not in {"iframe"}:
                self.links.append(found[key])


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def dead_site_links(site: Path) -> list[str]:
    """Every relative link of every page of a built site that names a missing file or anchor."""
    parsed: dict[Path, _Links] = {}

    def page(path: Path) -> _Links:
        if path not in parsed:
            parsed[path] = _parse(path)
        return parsed[path]

    dead = []
    for html in sorted(site.rglob("*.html")):
        if html.name == "404.html":  # its links are written for whatever URL was missed
            continue
        for link in page(html).links:
            if EXTERNAL.match(link) or link.startswith("data:"):
                continue
            parts = urlsplit(link)
            target = (html.parent / unquote(parts.path)).resolve() if parts.path else html
            if target.is_dir():
                target = target / "index.html"
            where = f"{html.relative_to(site)}: {link}"
            if not target.exists():
                dead.append(f"{where}: no such file")
            elif parts.fragment and target.suffix == ".html":
                if unquote(parts.fragment) not in page(target).ids:
                    dead.append(f"{where}: no #{parts.fragment} in {target.relative_to(site)}")
    return dead

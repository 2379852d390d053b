"""The README's module map, generated from the package itself.

Every module of ``interp/`` appears once, grouped by the folder it lives in, with the first
line of its docstring: the map cannot fall behind the code, because
tests/docs/test_module_map.py fails when the README's block differs from what this prints.

    python tests/docs/module_map.py           # print the block
    python tests/docs/module_map.py --write   # rewrite it in README.md
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- begin module map -->", "<!-- end module map -->"


def modules(package: Path = ROOT / "interp") -> list[Path]:
    """Every Python module of the package except package markers and ``__main__``."""
    return sorted(p for p in package.rglob("*.py") if p.name not in {"__init__.py", "__main__.py"})


def summary(path: Path) -> str:
    """The first sentence-line of a module's docstring (what it holds), or a loud gap."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    return first or "**(no docstring)**"


def render() -> str:
    rows = ["| module | what it holds |", "|---|---|"]
    for path in modules():
        rel = path.relative_to(ROOT).as_posix()
        rows.append(f"| `{rel}` | {summary(path).replace('|', '/')} |")
    return "\n".join([BEGIN, "", *rows, "", END])


def readme_block(text: str) -> str:
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[start:end]


def write(readme: Path = ROOT / "README.md") -> None:
    text = readme.read_text(encoding="utf-8")
    readme.write_text(text.replace(readme_block(text), render()), encoding="utf-8")


if __name__ == "__main__":
    write() if "--write" in sys.argv[1:] else print(render())

"""The README's architecture section lists every module as it is now."""

from __future__ import annotations

import module_map


def test_readme_module_map_is_current():
    readme = (module_map.ROOT / "README.md").read_text(encoding="utf-8")
    assert module_map.readme_block(readme) == module_map.render(), (
        "README module map is stale: run python tests/docs/module_map.py --write")


def test_every_module_is_in_the_map_with_a_docstring():
    rendered = module_map.render()
    for path in module_map.modules():
        rel = path.relative_to(module_map.ROOT).as_posix()
        assert f"`{rel}`" in rendered
    assert "(no docstring)" not in rendered, "every interp module says what it holds in its docstring"


def test_summary_reads_the_first_paragraph(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text('"""One line\nthat wraps.\n\nDetails."""\nx = 1\n')
    assert module_map.summary(mod) == "One line that wraps."

"""The layout is the architecture: every module sits in a layer, imports only from its own layer
or below, and no imports run in a circle (lazy imports inside functions count too: a circle
dodged by importing late is still a circle)."""

from __future__ import annotations

import ast
from pathlib import Path

from interp.pipeline.stages import STAGES

ROOT = Path(__file__).resolve().parents[2] / "interp"

# Bottom to top. A module belongs to the first prefix it matches.
LAYERS = (
    (
        "interp.errors",
        "interp.roles",
        "interp.config",
        "interp.troubleshooting",
    ),  # the shared vocabulary
    ("interp.model", "interp.probes"),  # models and probe corpora
    (
        "interp.pipeline.tables",
        "interp.pipeline.rundir",
        "interp.pipeline.lock",
        "interp.pipeline.provenance",
        "interp.pipeline.results",
        "interp.pipeline.contract",
        "interp.pipeline.stages",
        "interp.pipeline.clock",
        "interp.executors",
    ),  # the run directory, the stage contract and registry (which loads the stages by name), the
    # run's clock, and where a stage's work runs (threads, this process or Ray workers)
    (
        "interp.collect",
        "interp.classify",
        "interp.ablate",
        "interp.report",
        "interp.synthetic",
        "interp.weights",
    ),  # the stages
    (
        "interp.pipeline.options",
        "interp.pipeline.execute",
        "interp.pipeline.study",
        "interp.pipeline.study_ray",
        "interp.pipeline.show",
        "interp.pipeline.prompts",
    ),  # the run
    (
        "interp.console",
        "interp.cli",
        "interp.__main__",
        "interp",
    ),  # the public API and the command line
)


def modules(root: Path = ROOT) -> dict[str, Path]:
    found = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the package modules it imports, at any depth of its code."""
    known = modules(root)

    def owner(name: str) -> str:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for name, path in known.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges |= {owner(a.name) for a in node.names if a.name.split(".")[0] == "interp"}
            elif (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and (node.module or "").split(".")[0] == "interp"
            ):
                edges |= {
                    f"{node.module}.{a.name}"
                    if f"{node.module}.{a.name}" in known
                    else owner(node.module)
                    for a in node.names
                }
        graph[name] = edges - {name, ""}
    return graph


def layer(name: str) -> int | None:
    for i, prefixes in enumerate(LAYERS):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return i
    return None


def upward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{a} -> {b}" for a, targets in graph.items() for b in targets if layer(b) > layer(a)
    )


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_layer():
    assert [name for name in modules() if layer(name) is None] == []


def test_no_import_goes_up_a_layer():
    assert upward(import_graph()) == []


def test_no_imports_run_in_a_circle():
    assert cycles(import_graph()) == []


def test_the_checks_catch_a_circle_and_an_upward_import():
    graph = {
        "interp.model.load": {"interp.pipeline.rundir"},
        "interp.pipeline.rundir": set(),
        "interp.ablate.a": {"interp.ablate.b"},
        "interp.ablate.b": {"interp.ablate.a"},
    }
    assert upward(graph) == ["interp.model.load -> interp.pipeline.rundir"]
    assert cycles(graph) == [["interp.ablate.a", "interp.ablate.b"]]


def test_a_lazy_import_inside_a_function_counts(tmp_path):
    package = tmp_path / "interp"
    (package / "model").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "model" / "__init__.py").write_text("")
    (package / "model" / "load.py").write_text("def f():\n    from interp.cli import main\n")
    (package / "cli.py").write_text("from interp.model import load\n")
    graph = import_graph(package)
    assert cycles(graph) == [["interp.cli", "interp.model.load"]]
    assert upward(graph) == ["interp.model.load -> interp.cli"]


def test_the_top_level_holds_few_modules_and_each_stage_lives_in_its_package():
    top = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(top) <= 10, top
    for st in STAGES:
        assert st.entry.startswith(f"interp.{st.name}."), st.entry
        assert st.config.__module__ == f"interp.{st.name}.config", st.config

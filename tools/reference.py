"""The documentation's reference blocks, made from the code itself: the command line (the click
commands), the stage registry, the table schemas, the message catalogue and the module map.

Each function returns a block's body for tools/docs.py, which assembles the pages; nothing here
measures or loads a model. Every command, option, table, column and message has its line, so
that a reference page cannot fall behind what it describes (tests/docs/ check that it does not).
"""

from __future__ import annotations

import ast
from pathlib import Path

import click

from interp.cli import main as cli_main
from interp.console import EXIT_SIGTERM
from interp.pipeline.contract import EVERY_STAGE
from interp.pipeline.stages import STAGES
from interp.pipeline.tables import TABLES
from interp.troubleshooting import Trouble, read_catalogue

# The module map's groups: the stages' packages in pipeline order, then the others in the order of
# the data flow; any other package follows, then the top-level modules.
GROUPS = (
    *(st.entry.split(".")[1] for st in STAGES if st.entry.startswith("interp.")),
    "model",
    "pipeline",
    "executors",
    "probes",
    "synthetic",
)
CATALOGUE = "interp/troubleshooting.tsv"


class SourceMissing(Exception):
    """A block's source file does not exist."""


def read_source(root: Path, relative: str) -> str:
    path = root / relative
    if not path.is_file():
        raise SourceMissing(relative)
    return path.read_text(encoding="utf-8").strip()


def cell(text: str) -> str:
    """Text made safe for a markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


# --- the command line ---------------------------------------------------------------------------


def cli_reference(root: Path, group: click.Group = cli_main) -> str:
    """Every command of the ``interp`` group, in the order ``interp --help`` lists them: its
    usage, its help, and every option with its help (defaults and ranges as click shows them)."""
    parent = click.Context(group, info_name="interp")
    out = []
    for name in group.list_commands(parent):
        command = group.get_command(parent, name)
        ctx = click.Context(command, info_name=name, parent=parent)
        usage = " ".join(["interp", name, *command.collect_usage_pieces(ctx)])
        out += [f"## `interp {name}`", "", f"`{usage}`", "", _help(command), ""]
        help_option = command.get_help_option(ctx)
        rows = [
            (record[0], record[1])
            for param in command.get_params(ctx)
            if isinstance(param, click.Option) and param is not help_option
            for record in [param.get_help_record(ctx)]
            if record
        ]
        if rows:
            out += ["| option | what it does |", "| --- | --- |"]
            out += [f"| `{cell(opts)}` | {cell(help_)} |" for opts, help_ in rows]
            out.append("")
    return "\n".join(out)


def _help(command: click.Command) -> str:
    """A command's help as one paragraph (click's ``\\b`` blocks are kept as lines)."""
    text = (command.help or command.short_help or "").strip()
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n") if p.strip() != "\b"]
    return "\n\n".join(p.replace("\b ", "") for p in paragraphs)


# --- the message catalogue ----------------------------------------------------------------------


def troubleshooting(root: Path) -> str:
    """One table per kind of trouble, in the catalogue's order."""
    catalogue = read_catalogue(read_source(root, CATALOGUE))
    out = [
        f"Every message the command line can end with, generated from `{CATALOGUE}`. "
        "`…` stands for the part that names your file, value or number. Errors print as `error: <message>`.",
        "",
    ]
    for kind in dict.fromkeys(t.kind for t in catalogue):
        entries: list[Trouble] = [t for t in catalogue if t.kind == kind]
        codes = sorted(
            {t.exit for t in entries} | ({EXIT_SIGTERM} if kind == "interrupted" else set())
        )
        status = "the command goes on" if codes == [0] else "exit " + " / ".join(map(str, codes))
        out += [
            f"## {kind} ({status})",
            "",
            "| message | what it means | what to do |",
            "| --- | --- | --- |",
        ]
        out += [
            f"| `` {cell(t.message.replace('{}', '…'))} `` | {cell(t.meaning)} | {cell(t.action)} |"
            for t in entries
        ]
        out.append("")
    return "\n".join(out)


# --- the stages -------------------------------------------------------------------------------


def stages(root: Path) -> str:
    """Every registered stage, in pipeline order: its command, what it does, reads and writes."""
    out = [
        "| stage | what it does | reads | writes | report sections |",
        "| --- | --- | --- | --- | --- |",
    ]
    for st in STAGES:
        reads = "every other stage" if st.reads == EVERY_STAGE else ", ".join(st.reads)
        model = " Runs the model." if st.needs_model else ""
        out.append(
            f"| `interp {st.name}` ({st.entry.partition(':')[0]}) | {cell(st.summary)}{model} "
            f"| {reads or '—'} | {', '.join(f'`{w}`' for w in st.writes) or '—'} "
            f"| {', '.join(s.id for s in st.sections) or '—'} |"
        )
    return "\n".join(out)


# --- the table schemas --------------------------------------------------------------------------


def columns(root: Path) -> str:
    """Every table: its description, then every column (pattern columns last) with type and meaning."""
    out = []
    for table in TABLES.values():
        out += [
            f"## `{table.name}`",
            "",
            table.doc,
            "",
            "| column | type | meaning |",
            "| --- | --- | --- |",
        ]
        out += [
            f"| `{c.name}` | {c.dtype} | {cell(c.doc)} |"
            for c in table.columns + table.pattern_columns
        ]
        out.append("")
    return "\n".join(out)


# --- the module map -----------------------------------------------------------------------------


def docstring(path: Path) -> str:
    """The first paragraph of a module's docstring on one line, or a loud gap."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    return first or "**(no docstring)**"


def module_map(root: Path) -> str:
    """Every module of ``interp/`` as it is on disk, one table per package."""
    package = root / "interp"
    modules = sorted(
        p for p in package.rglob("*.py") if p.name not in {"__init__.py", "__main__.py"}
    )
    groups: dict[str, list[Path]] = {}
    for path in modules:
        parts = path.relative_to(package).parts
        groups.setdefault(parts[0] if len(parts) > 1 else "", []).append(path)
    order = (
        [g for g in GROUPS if g in groups]
        + sorted(set(groups) - set(GROUPS) - {""})
        + [""] * ("" in groups)
    )
    out = []
    for group in order:
        folder = package / group if group else package
        init = folder / "__init__.py"
        title = f"`interp/{group}/`" if group else "Top-level modules of `interp/`"
        out += [f"### {title}", ""]
        if init.is_file() and ast.get_docstring(ast.parse(init.read_text())):
            out += [docstring(init), ""]
        out += ["| module | what it holds |", "| --- | --- |"]
        out += [
            f"| `{p.relative_to(root).as_posix()}` | {cell(docstring(p))} |" for p in groups[group]
        ]
        out.append("")
    return "\n".join(out)

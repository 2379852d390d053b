"""The commands that print or compare what exists: `interp models`, `tables`, `roles` and
`compare`."""

from __future__ import annotations

from pathlib import Path

import click

from interp.console import friendly

# What a command that makes no run says when a signal stops it (interp.console.friendly).
NOTHING_WRITTEN = "nothing was written"


@click.command()
@click.option(
    "--prepare",
    is_flag=True,
    help="convert the packaged GGUF model now (about a minute, once) so that runs start in seconds",
)
@click.option(
    "--families",
    is_flag=True,
    help="list the model families the installed TransformerLens wraps, and which load from GGUF files",
)
@friendly(interrupted=NOTHING_WRITTEN)
def models(prepare, families):
    """List the model sources and whether each is available here."""
    from interp.model.load import list_sources, prepare_packaged

    if prepare:
        for name, state in prepare_packaged():
            click.echo(f"{name}: {state}")
        return
    if families:
        from interp.model.families import supported_families

        _table(supported_families())
        return
    _table(list_sources())


def _table(rows: list[dict[str, str]]) -> None:
    widths = {k: max(len(k), *(len(r[k]) for r in rows)) for k in rows[0]}
    click.echo("  ".join(k.ljust(w) for k, w in widths.items()))
    for r in rows:
        click.echo("  ".join(r[k].ljust(w) for k, w in widths.items()))


@click.command()
@friendly(interrupted=NOTHING_WRITTEN)
def tables():
    """Print every table's columns and what they mean."""
    from interp.pipeline.tables import describe

    click.echo(describe())


@click.command()
@friendly(interrupted=NOTHING_WRITTEN)
def roles():
    """Print the role catalogue and the features that measure each role."""
    from interp.collect.features import FEATURE_PROBE_KINDS, MASS_FEATURES
    from interp.roles import ROLES

    for role in ROLES.values():
        click.echo(f"{role.name:<16} {role.description}")
    click.echo("\nfeatures (probe kinds read):")
    for name, fn in MASS_FEATURES.items():
        doc = (fn.__doc__ or "").strip().splitlines()[0]
        click.echo(f"  {name:<16} [{', '.join(FEATURE_PROBE_KINDS[name])}] {doc}")
    click.echo(
        "  syntactic:<relation>:<dep2head|head2dep>  [syntax] share of arcs whose most-attended word is the gold partner"
        " (one treebank choice: the built-in syntax suite, else the --corpus treebanks; --pool-syntax: all;"
        " every treebank apart: the syntax table)"
    )


@click.command()
@click.argument("run_a", type=click.Path())
@click.argument("run_b", type=click.Path())
@click.option(
    "--out",
    "out_path",
    default=None,
    type=click.Path(),
    help="HTML file to write, in an existing folder; an existing file is replaced only if it is an HTML page "
    "(default: RUN_A/compare-<B>.html)",
)
@friendly(interrupted=NOTHING_WRITTEN)
def compare(run_a, run_b, out_path):
    """Put the role maps of two runs side by side, with the heads whose roles differ."""
    from interp.pipeline.rundir import check_out_file, read_manifest
    from interp.report.html import compare_runs

    a, b = Path(run_a), Path(run_b)
    read_manifest(a), read_manifest(b)
    out = check_out_file(out_path if out_path else a / f"compare-{b.name}.html")
    click.echo(f"comparison: {compare_runs(a, b, out)}")

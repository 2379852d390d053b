"""`interp study STUDY_FILE`: many runs from one TOML file, then their comparison."""

from __future__ import annotations

import click

from interp.console import friendly
from interp.errors import ConfigError
from interp.executors.placement import Placement

STUDY_INTERRUPTED = "finished runs are kept; run `interp study` again to continue"


@click.command()
@click.argument("study_file", type=click.Path())
@click.option(
    "--executor",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help='make the runs one after the other here, or as Ray tasks, several at once (pip install "interp[ray]")',
)
@click.option(
    "--address",
    default=None,
    help="with --executor ray: the Ray cluster to join (auto, or HOST:PORT); "
    "default: one started here",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 4096),
    default=None,
    help="with --executor ray: runs at once (default: as many as the cluster's CPUs hold)",
)
@click.option("--quiet", "-q", is_flag=True, help="no progress bars")
@friendly(interrupted=STUDY_INTERRUPTED)
def study(
    study_file: str, executor: str, address: str | None, workers: int | None, quiet: bool
) -> None:
    """Run a study: models x corpora x seeds x variants from a TOML file, skipping finished runs and
    continuing stopped ones, then compare the runs (comparison/*.csv, study.html)."""
    from interp.pipeline.study import read_study, run_study

    if executor == "local" and (address or workers):
        raise ConfigError("--address and --workers go with --executor ray")
    if executor == "ray":
        from interp.executors.choice import check_executor

        check_executor(Placement(executor="ray"))
    root = run_study(
        read_study(study_file),
        progress=not quiet,
        executor=executor,
        address=address,
        workers=workers,
    )
    click.echo(f"study: {root}")
    click.echo(f"comparison: {root / 'study.html'}")

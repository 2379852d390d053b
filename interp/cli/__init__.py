"""The `interp` command line: a thin click layer over the library.

Every command is one call into library code. The stage commands (``interp collect|classify|
ablate|report RUN_DIR``) and the options of ``interp run`` are built from the stage registry
(:mod:`interp.pipeline.stages`) and from each stage's config (:mod:`interp.config`): every config
field is an option, its help text the field's docstring, so a new stage or field needs no code
here. :func:`build_cli` makes the group from the registry as it is when called. User errors
(InterpError, bad options) end in one line on stderr and a non-zero exit, never a traceback;
see interp.console for errors, warnings and signals.
"""

from __future__ import annotations

import click

from interp.cli.reference import compare, models, roles, tables
from interp.cli.run import run_command
from interp.cli.show import show_command
from interp.cli.stage import stage_command
from interp.cli.study import study
from interp.pipeline.stages import STAGES


def build_cli() -> click.Group:
    """The `interp` group, with `run` and one command per stage as the registry holds them now."""

    @click.group(context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(package_name="interp")
    def group() -> None:
        """Find out what each attention head of a transformer does, and how much the model needs it."""

    group.add_command(run_command())
    for st in STAGES:
        group.add_command(stage_command(st))
    for extra_command in (models, tables, roles, compare, show_command, study):
        group.add_command(extra_command)
    return group


main = build_cli()

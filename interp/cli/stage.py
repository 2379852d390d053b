"""`interp <stage> RUN_DIR`: one stage again on an existing run, with the config the run
recorded changed only by the options given; one command per stage of the registry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from interp.cli.options import field_options, given_values, model_dest
from interp.config import StageConfig
from interp.console import friendly
from interp.model.spec import DTYPES
from interp.pipeline.stages import STAGES, Stage


def stage_command(st: Stage) -> click.Command:
    @field_options(st.config)
    @click.option("--quiet", "-q", is_flag=True, help="no progress bars")
    @friendly
    def command(run_dir: str, quiet: bool, **values: Any) -> None:
        from interp.pipeline.execute import rerun_stage

        quick = bool(values.pop("quick", False))
        model = {
            k: values.pop(model_dest(k)) for k in ("device", "dtype") if model_dest(k) in values
        }
        rerun_stage(
            Path(run_dir),
            st.name,
            changes=given_values(st.config, values),
            progress=not quiet,
            quick=quick,
            **{k: v for k, v in model.items() if v is not None},
        )
        click.echo(f"{st.name}: done in {run_dir}")
        if "report.html" in st.files:
            click.echo(f"report: {Path(run_dir) / 'report.html'}")
        stale = [s.name for s in STAGES if s.reads_stage(st.name)]
        if stale:
            click.echo(
                f"now out of date: {', '.join(stale)} (rerun with `interp <stage> {run_dir}`)"
            )

    command.__doc__ = (
        f"{st.summary} Writes {', '.join(st.writes) or 'nothing'}. Reruns the {st.name} stage "
        f"of RUN_DIR with the config the run recorded, changed only by the options given."
    )
    if st.config.for_quick is not StageConfig.for_quick:  # the stage has a --quick form
        command = click.option(
            "--quick",
            is_flag=True,
            help="its --quick form (as `interp run --quick`); the options given stay as they are",
        )(command)
    if st.needs_model:
        command = click.option(
            "--device",
            model_dest("device"),
            default=None,
            help="run on this device instead of the recorded one (cpu, cuda, cuda:N, mps)",
        )(command)
        command = click.option(
            "--dtype",
            model_dest("dtype"),
            type=click.Choice(DTYPES),
            default=None,
            help="load the model in this dtype instead of the recorded one",
        )(command)
    command = click.argument("run_dir", type=click.Path())(command)
    return click.command(st.name, help=command.__doc__)(command)

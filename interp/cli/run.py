"""`interp run`: the whole job. Its options are the run's own (:data:`RUN_FLAGS`), the model's,
the placement's and every stage config's field, read from the stage registry."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click
from click.core import ParameterSource

from interp.cli.options import (
    field_options,
    given_values,
    model_dest,
    model_flags,
    placement_options,
)
from interp.config import fields_of, flag_of
from interp.console import friendly
from interp.errors import ConfigError
from interp.executors.placement import Placement
from interp.model.spec import ModelSpec
from interp.pipeline.options import RunOptions
from interp.pipeline.stages import STAGES, stage_names

# Options of `interp run` itself, beside the stages' (a stage field with one of these flags is
# reached as --<stage>-<flag> only).
RUN_FLAGS = (
    "--model",
    "--device",
    "--dtype",
    "--causal",
    "--out",
    "--name",
    "--quick",
    "--skip",
    "--resume",
    "--from-manifest",
    "--no-builtin",
    "--seed",
    "--quiet",
    "--threads",
    "--executor",
    "--address",
    "--workers",
)


def _run_flags(stage_name: str) -> Callable[[str, str], list[str]]:
    """On `interp run`, a stage field is --<stage>-<flag>, and also the bare --<flag> when no run
    option and no earlier stage has that flag (--n-syntax is collect's; ablate's is --ablate-n-syntax)."""
    earlier = {
        flag_of(st.config, n)
        for st in STAGES[: [s.name for s in STAGES].index(stage_name)]
        for n in fields_of(st.config)
    }
    model_fields = {flag_of(ModelSpec, n) for n in fields_of(ModelSpec)}

    def flags(name: str, flag: str) -> list[str]:
        prefixed = f"--{stage_name}-{flag.removeprefix('--')}"
        taken = flag in RUN_FLAGS or flag in earlier or flag in model_fields
        return [prefixed] if taken else [flag, prefixed]

    return flags


def _stage_dest(stage_name: str) -> Callable[[str], str]:
    return lambda name: f"{stage_name}__{name}"


def _all_stage_options(fn: Any) -> Any:
    for st in reversed(STAGES):
        fn = field_options(st.config, _stage_dest(st.name), _run_flags(st.name))(fn)
    return fn


def run_command() -> click.Command:
    @click.command("run")
    @field_options(ModelSpec, model_dest, model_flags)
    @click.option(
        "--out",
        "out_dir",
        default="reports",
        show_default=True,
        type=click.Path(),
        help="folder for run directories",
    )
    @click.option(
        "--name",
        "run_name",
        default=None,
        help="run name: letters, digits, '.', '_', '-' (default: a timestamp)",
    )
    @click.option(
        "--quick",
        is_flag=True,
        help="fewer probes and a smaller ablation corpus: minutes, not a quarter hour",
    )
    @click.option(
        "--skip",
        "skip",
        multiple=True,
        type=click.Choice(stage_names()),
        help="stage to leave out (repeatable)",
    )
    @click.option(
        "--resume", is_flag=True, help="continue a run given by --name, skipping finished stages"
    )
    @click.option(
        "--from-manifest",
        "from_manifest",
        type=click.Path(),
        default=None,
        help="make the run of RUN_DIR again with its recorded options (only --out, --name, -q apply)",
    )
    @click.option(
        "--no-builtin",
        is_flag=True,
        help="probe only with --corpus files (plus repeated random tokens)",
    )
    @click.option(
        "--seed",
        type=int,
        default=None,
        help="seed of every stage that has one (each stage's own flag wins)  [default: 0]",
    )
    @click.option("--quiet", "-q", is_flag=True, help="no progress bars")
    @placement_options
    @_all_stage_options
    @friendly
    def command(
        out_dir: str,
        run_name: str | None,
        quick: bool,
        skip: tuple[str, ...],
        resume: bool,
        from_manifest: str | None,
        no_builtin: bool,
        seed: int | None,
        quiet: bool,
        **values: Any,
    ) -> None:
        """Collect features, classify heads, ablate them and write the report."""
        from interp.pipeline.execute import options_from_manifest, run_pipeline

        if from_manifest:
            _only_given(("from_manifest", "out_dir", "run_name", "quiet"), "--from-manifest")
            options = options_from_manifest(from_manifest, out_dir, run_name)
        else:
            options = run_options(
                values,
                out_dir=out_dir,
                run_name=run_name,
                quick=quick,
                skip=tuple(skip),
                resume=resume,
                no_builtin=no_builtin,
                seed=seed,
            )
        run_dir = run_pipeline(options, progress=not quiet)
        click.echo(f"run: {run_dir}")
        if (run_dir / "report.html").exists():
            click.echo(f"report: {run_dir / 'report.html'}")

    return command


def run_options(
    values: dict[str, Any], no_builtin: bool, seed: int | None, **run: Any
) -> RunOptions:
    """The RunOptions of `interp run`: each stage's defaults with the flags given applied."""
    model = ModelSpec(**given_values(ModelSpec, values, model_dest))
    placed = given_values(Placement, values, lambda name: f"placement__{name}")
    stages, explicit = {}, []
    for st in STAGES:
        placed_here = {k: v for k, v in placed.items() if k in fields_of(st.config)}
        given = {
            **st.config.run_wide(seed, builtin=not no_builtin),
            **placed_here,
            **given_values(st.config, values, _stage_dest(st.name)),
        }
        explicit += [f"{st.name}.{k}" for k in given]
        stages[st.name] = st.config(**given)
    return RunOptions(model=model, stages=stages, explicit=tuple(explicit), **run)


def _given(name: str) -> bool:
    """Whether the user set this option (on the command line or in the environment)."""
    source = click.get_current_context().get_parameter_source(name)
    return source in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


def _only_given(allowed: tuple[str, ...], flag: str) -> None:
    extra_given = [
        p.opts[0]
        for p in click.get_current_context().command.params
        if p.name not in allowed and _given(p.name)
    ]
    if extra_given:
        raise ConfigError(
            f"{flag} takes its options from the manifest; leave out {', '.join(extra_given)}"
        )

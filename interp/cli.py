"""The `interp` command line: a thin click layer over the library.

Every command is one call into library code. The stage commands (``interp collect|classify|
ablate|report RUN_DIR``) are built from the stage registry (:mod:`interp.stages`) and their
options from the config fields marked ``cli`` (:mod:`interp.config`), so a new stage or option
needs no code here. User errors (InterpError, bad options) end in one line on stderr and a
non-zero exit, never a traceback; see interp.console for errors, warnings and signals.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from interp.config import DTYPES, AblateConfig, CollectConfig, ModelSpec, RunOptions
from interp.console import friendly
from interp.errors import ConfigError
from interp.stages import STAGE_NAMES, STAGES, Stage


# --- options from config fields ----------------------------------------------------------------

def _click_type(hint: Any, choices: tuple[str, ...] | None) -> tuple[Any, bool]:
    """(click type, multiple) for a config field's type hint: tuples become repeatable options."""
    args = [a for a in typing.get_args(hint) if a is not type(None)] if isinstance(hint, types.UnionType) else [hint]
    base = args[0] if args else str
    multiple = typing.get_origin(base) is tuple
    if multiple:
        base = typing.get_args(base)[0]
    return (click.Choice(choices) if choices else base), multiple


def config_options(config_type: type):
    """A decorator adding one option per ``cli`` field of ``config_type`` (see interp.config.cli)."""
    hints = typing.get_type_hints(config_type)

    def decorate(fn):
        for f in reversed(dataclasses.fields(config_type)):
            meta = f.metadata
            if "cli" not in meta:
                continue
            if meta.get("is_flag"):
                fn = click.option(meta["cli"], f.name, is_flag=True, help=meta["help"])(fn)
                continue
            kind, multiple = _click_type(hints[f.name], meta.get("choices"))
            default_text = None if multiple or f.default in (None, ()) else f.default
            fn = click.option(meta["cli"], f.name, type=kind, multiple=multiple, default=None,
                              help=meta["help"] + (f"  [default: {default_text}]" if default_text is not None else ""))(fn)
        return fn

    return decorate


def _field_help(config_type: type, name: str) -> str:
    return next(f.metadata["help"] for f in dataclasses.fields(config_type) if f.name == name)


def config_from(config_type: type, values: dict[str, Any], **fixed: Any) -> Any:
    """The config with the options a user actually gave (unset, empty or off ones keep the default)."""
    names = {f.name for f in dataclasses.fields(config_type)}
    given = {k: (tuple(v) if isinstance(v, list) else v) for k, v in values.items()
             if k in names and not (v is None or v is False or (isinstance(v, (tuple, list)) and not v))}
    return config_type(**{**given, **fixed})


def model_options(fn):
    """--model, --device, --dtype, --causal/--bidirectional: shared by every command that loads a model."""
    fn = click.option("--causal/--bidirectional", "causal", default=None,
                      help="whether attention is causal (default: measured on the model with one short forward)")(fn)
    fn = click.option("--dtype", type=click.Choice(DTYPES), default="float32", show_default=True,
                      help="bfloat16 / float16 halve memory and are fast on GPUs; on a CPU without native support they are "
                           "several times slower")(fn)
    fn = click.option("--device", default="cpu", show_default=True, help="cpu, cuda or cuda:N")(fn)
    fn = click.option("--model", "-m", default="smollm2-135m", show_default=True,
                      help="packaged name (see `interp models`), a .gguf file, a model directory or a Hub name")(fn)
    return fn


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="interp")
def main() -> None:
    """Find out what each attention head of a transformer does, and how much the model needs it."""


# --- the whole job -----------------------------------------------------------------------------

@main.command("run")
@model_options
@click.option("--out", "out_dir", default="reports", show_default=True, type=click.Path(), help="folder for run directories")
@click.option("--name", "run_name", default=None, help="run name: letters, digits, '.', '_', '-' (default: a timestamp)")
@config_options(CollectConfig)
@click.option("--no-builtin", is_flag=True, help="probe only with --corpus files (plus repeated random tokens)")
@click.option("--quick", is_flag=True, help="fewer probes and a smaller ablation corpus: minutes, not a quarter hour")
@click.option("--skip", "skip", multiple=True, type=click.Choice(STAGE_NAMES), help="stage to leave out (repeatable)")
@click.option("--resume", is_flag=True, help="continue a run given by --name, skipping finished stages")
@click.option("--from-manifest", "from_manifest", type=click.Path(), default=None,
              help="make the run of RUN_DIR again with its recorded options (only --out, --name, -q apply)")
@click.option("--eval-corpus", "eval_corpus", type=click.Path(), default=None,
              help=_field_help(AblateConfig, "eval_corpus"))
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--quiet", "-q", is_flag=True, help="no progress bars")
@friendly
def run_command(model, device, dtype, causal, out_dir, run_name, no_builtin, quick, skip, resume, from_manifest, eval_corpus,
                seed, quiet, **collect):
    """Collect features, classify heads, ablate them and write the report."""
    from interp.pipeline import options_from_manifest, run_pipeline

    if from_manifest:
        _only_given(("from_manifest", "out_dir", "run_name", "quiet"), "--from-manifest")
        options = options_from_manifest(from_manifest, out_dir, run_name)
    else:
        suites = ("repeated",) if no_builtin else CollectConfig.suites
        collect_config = config_from(CollectConfig, collect, suites=suites, seed=seed)
        explicit = tuple(k for k in collect if _given(k))
        options = RunOptions(
            model=ModelSpec(model, device, dtype, causal), out_dir=out_dir, run_name=run_name, quick=quick, skip=tuple(skip),
            resume=resume, collect=collect_config, explicit=explicit,
        )
        options = dataclasses.replace(options, ablate=dataclasses.replace(options.ablate, seed=seed, eval_corpus=eval_corpus))
    run_dir = run_pipeline(options, progress=not quiet)
    report = run_dir / "report.html"
    click.echo(f"run: {run_dir}")
    if report.exists():
        click.echo(f"report: {report}")


def _given(name: str) -> bool:
    """Whether the user set this option (on the command line or in the environment)."""
    source = click.get_current_context().get_parameter_source(name)
    return source in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


def _only_given(allowed: tuple[str, ...], flag: str) -> None:
    extra = [p.opts[0] for p in click.get_current_context().command.params if p.name not in allowed and _given(p.name)]
    if extra:
        raise ConfigError(f"{flag} takes its options from the manifest; leave out {', '.join(extra)}")


# --- one stage again, on an existing run --------------------------------------------------------

def _stage_command(st: Stage) -> click.Command:
    @config_options(st.config)
    @click.option("--quiet", "-q", is_flag=True, help="no progress bars")
    @friendly
    def command(run_dir: str, quiet: bool, **values: Any) -> None:
        from interp.pipeline import rerun_stage

        config = config_from(st.config, values)
        rerun_stage(Path(run_dir), st.name, config, progress=not quiet)
        click.echo(f"{st.name}: done in {run_dir}")
        if st.name == "report":
            click.echo(f"report: {Path(run_dir) / 'report.html'}")
        stale = [s.name for s in STAGES if st.name in s.reads]
        if stale:
            click.echo(f"now out of date: {', '.join(stale)} (rerun with `interp <stage> {run_dir}`)")

    command.__doc__ = f"{st.summary} Reruns the {st.name} stage of RUN_DIR."
    command = click.argument("run_dir", type=click.Path())(command)
    return click.command(st.name, help=command.__doc__)(command)


for _stage in STAGES:
    main.add_command(_stage_command(_stage))


# --- reference and comparison ------------------------------------------------------------------

@main.command()
@click.option("--prepare", is_flag=True,
              help="convert the packaged GGUF model now (about a minute, once) so that runs start in seconds")
@click.option("--families", is_flag=True,
              help="list the model families the installed TransformerLens wraps, and which load from GGUF files")
@friendly
def models(prepare, families):
    """List the model sources and whether each is available here."""
    from interp.models import list_sources, prepare_packaged

    if prepare:
        for name, state in prepare_packaged():
            click.echo(f"{name}: {state}")
        return
    if families:
        from interp.families import supported_families

        _table(supported_families())
        return
    _table(list_sources())


def _table(rows: list[dict[str, str]]) -> None:
    widths = {k: max(len(k), *(len(r[k]) for r in rows)) for k in rows[0]}
    click.echo("  ".join(k.ljust(w) for k, w in widths.items()))
    for r in rows:
        click.echo("  ".join(r[k].ljust(w) for k, w in widths.items()))


@main.command()
@friendly
def tables():
    """Print every table's columns and what they mean."""
    from interp.tables import describe

    click.echo(describe())


@main.command()
@friendly
def roles():
    """Print the role catalogue and the features that measure each role."""
    from interp.features import FEATURE_FAMILIES, MASS_FEATURES
    from interp.roles import ROLES

    for role in ROLES.values():
        click.echo(f"{role.name:<16} {role.description}")
    click.echo("\nfeatures (probe families read):")
    for name, fn in MASS_FEATURES.items():
        doc = (fn.__doc__ or "").strip().splitlines()[0]
        click.echo(f"  {name:<16} [{', '.join(FEATURE_FAMILIES[name])}] {doc}")
    click.echo("  syntactic:<relation>:<dep2head|head2dep>  [syntax] share of arcs whose most-attended word is the gold partner")


@main.command()
@click.argument("run_a", type=click.Path())
@click.argument("run_b", type=click.Path())
@click.option("--out", "out_path", default=None, type=click.Path(),
              help="HTML file to write, in an existing folder; an existing file is replaced only if it is an HTML page "
                   "(default: RUN_A/compare-<B>.html)")
@friendly
def compare(run_a, run_b, out_path):
    """Put the role maps of two runs side by side, with the heads whose roles differ."""
    from interp.report.html import compare_runs
    from interp.rundir import check_out_file, read_manifest

    a, b = Path(run_a), Path(run_b)
    read_manifest(a), read_manifest(b)
    out = check_out_file(out_path if out_path else a / f"compare-{b.name}.html")
    click.echo(f"comparison: {compare_runs(a, b, out)}")


if __name__ == "__main__":
    main()

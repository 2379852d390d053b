# Over 400 lines: one click group; its commands share the option builders read from the registry.
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

import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import click
from click.core import ParameterSource

from interp.config import StageConfig, fields_of, flag_of, help_of
from interp.console import friendly
from interp.errors import ConfigError
from interp.executors.placement import Placement
from interp.model.spec import DTYPES, DType, ModelSpec
from interp.pipeline.options import RunOptions
from interp.pipeline.stages import STAGES, Stage, stage_names
from interp.report.explorer import DEFAULT_BY_EFFECT

# What a command that makes no run says when a signal stops it (interp.console.friendly).
NOTHING_WRITTEN = "nothing was written"
STUDY_INTERRUPTED = "finished runs are kept; run `interp study` again to continue"
SHOW_INTERRUPTED = "nothing was stored: the run's prompts.npz is as it was"

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


# --- options from config fields ----------------------------------------------------------------


def _base_type(hint: Any) -> tuple[Any, bool]:
    """(the type a value of the field has, whether the field is a tuple of them)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) is tuple:
        return typing.get_args(hint)[0], True
    return hint, False


def _click_type(base: Any) -> Any:
    if typing.get_origin(base) is Literal:
        return click.Choice([str(a) for a in typing.get_args(base)])
    return base if base in (int, float, str) else str


def field_options(
    cls: type,
    dest: Callable[[str], str] = lambda name: name,
    flags: Callable[[str, str], list[str]] = lambda name, flag: [flag],
) -> Callable[[Any], Any]:
    """A decorator adding one option per CLI field of config ``cls``. ``dest(name)`` is the
    parameter name the command receives, ``flags(name, flag)`` the option's names. Every
    option defaults to None (not given): the command applies only what the user set."""
    hints = typing.get_type_hints(cls)

    def decorate(fn: Any) -> Any:
        for name, info in reversed(_own_fields_first(cls)):
            flag = flag_of(cls, name)
            if flag is None:
                continue
            base, multiple = _base_type(hints[name])
            default = info.default if info.default is not None and info.default != () else None
            shown = (
                f"  [default: {_shown(default)}]" if default is not None and not multiple else ""
            )
            if base is bool:
                on, _, off = flag.partition("/")
                names = (
                    [flag] if off else [f"{n}/--no-{n.removeprefix('--')}" for n in flags(name, on)]
                )
                fn = click.option(*names, dest(name), default=None, help=help_of(info) + shown)(fn)
                continue
            fn = click.option(
                *flags(name, flag),
                dest(name),
                type=_click_type(base),
                multiple=multiple,
                default=None,
                help=help_of(info)
                + (" (repeatable)" if multiple and "repeatable" not in help_of(info) else "")
                + shown,
            )(fn)
        return fn

    return decorate


def _own_fields_first(cls: type) -> list[tuple[str, Any]]:
    """The config's fields, its own before those it inherits (the placement fields: where and on
    how many threads a stage runs), each group in declaration order."""
    own = getattr(cls, "__annotations__", {})
    fields = list(fields_of(cls).items())
    return [f for f in fields if f[0] in own] + [f for f in fields if f[0] not in own]


def _placement_options(fn: Any) -> Any:
    """`interp run`'s --threads, --executor, --address, --workers: for every stage that has the
    field (the stages that run the model); --<stage>-<flag> sets one stage's (and wins)."""
    hints = typing.get_type_hints(Placement)
    for name, info in reversed(list(fields_of(Placement).items())):
        flag = flag_of(Placement, name)
        if flag is None:  # a field set only in a config file
            continue
        base, _ = _base_type(hints[name])
        fn = click.option(
            flag,
            f"placement__{name}",
            type=_click_type(base),
            default=None,
            help=f"{help_of(info)} (every stage that runs the model; --<stage>{flag[1:]} sets one "
            "stage's)",
        )(fn)
    return fn


def _shown(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def given_values(
    cls: type, values: dict[str, Any], dest: Callable[[str], str] = lambda name: name
) -> dict[str, Any]:
    """The fields of ``cls`` the user set on the command line (or in the environment)."""
    ctx = click.get_current_context()
    out = {}
    for name in fields_of(cls):
        key = dest(name)
        if key in values and ctx.get_parameter_source(key) in (
            ParameterSource.COMMANDLINE,
            ParameterSource.ENVIRONMENT,
        ):
            value = values[key]
            if isinstance(value, (tuple, list)) and not value:
                continue
            out[name] = tuple(value) if isinstance(value, list) else value
    return out


def _run_flags(stage_name: str) -> Callable[[str, str], list[str]]:
    """On `interp run`, a stage field is --<stage>-<flag>, and also the bare --<flag> when no run
    option and no earlier stage has that flag (--n-syntax is collect's; ablate's is --ablate-n-syntax)."""
    earlier = {
        flag_of(st.config, n)
        for st in STAGES[: [s.name for s in STAGES].index(stage_name)]
        for n in fields_of(st.config)
    }
    model_flags = {flag_of(ModelSpec, n) for n in fields_of(ModelSpec)}

    def flags(name: str, flag: str) -> list[str]:
        prefixed = f"--{stage_name}-{flag.removeprefix('--')}"
        taken = flag in RUN_FLAGS or flag in earlier or flag in model_flags
        return [prefixed] if taken else [flag, prefixed]

    return flags


def _stage_dest(stage_name: str) -> Callable[[str], str]:
    return lambda name: f"{stage_name}__{name}"


def _model_flags(name: str, flag: str) -> list[str]:
    return [flag, "-m"] if name == "name" else [flag]


def _model_dest(name: str) -> str:
    return f"model__{name}"


def _all_stage_options(fn: Any) -> Any:
    for st in reversed(STAGES):
        fn = field_options(st.config, _stage_dest(st.name), _run_flags(st.name))(fn)
    return fn


# --- the whole job -----------------------------------------------------------------------------


def _run_command() -> click.Command:
    @click.command("run")
    @field_options(ModelSpec, _model_dest, _model_flags)
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
    @_placement_options
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
    model = ModelSpec(**given_values(ModelSpec, values, _model_dest))
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


# --- one stage again, on an existing run --------------------------------------------------------


def _stage_command(st: Stage) -> click.Command:
    @field_options(st.config)
    @click.option("--quiet", "-q", is_flag=True, help="no progress bars")
    @friendly
    def command(run_dir: str, quiet: bool, **values: Any) -> None:
        from interp.pipeline.execute import rerun_stage

        quick = bool(values.pop("quick", False))
        model = {
            k: values.pop(_model_dest(k)) for k in ("device", "dtype") if _model_dest(k) in values
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
            _model_dest("device"),
            default=None,
            help="run on this device instead of the recorded one (cpu, cuda, cuda:N, mps)",
        )(command)
        command = click.option(
            "--dtype",
            _model_dest("dtype"),
            type=click.Choice(DTYPES),
            default=None,
            help="load the model in this dtype instead of the recorded one",
        )(command)
    command = click.argument("run_dir", type=click.Path())(command)
    return click.command(st.name, help=command.__doc__)(command)


# --- reference and comparison ------------------------------------------------------------------


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


@click.command("show")
@click.argument("run_dir", type=click.Path())
@click.option(
    "--prompt", "prompt_texts", multiple=True, help="a prompt to run through the model (repeatable)"
)
@click.option(
    "--prompts",
    "prompts_file",
    type=click.Path(),
    default=None,
    help="a UTF-8 text file with one prompt per line",
)
@click.option(
    "--heads",
    default=None,
    help="heads to print, as layer.head or LlayerHhead separated by commas, e.g. 18.6,L17H3 "
    f"(default: the {DEFAULT_BY_EFFECT} most important by effect and the most confident head of each role)",
)
@click.option(
    "--top",
    type=click.IntRange(1, 50),
    default=3,
    show_default=True,
    help="attended tokens printed per query token",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(),
    default=None,
    help="also write a self-contained HTML page of the patterns (an .html file in an existing folder)",
)
@click.option(
    "--device",
    default=None,
    help="run on this device instead of the recorded one (cpu, cuda, cuda:N, mps)",
)
@click.option(
    "--dtype",
    type=click.Choice(DTYPES),
    default=None,
    help="load the model in this dtype instead of the recorded one",
)
@click.option("--quiet", "-q", is_flag=True, help="no progress bar")
@friendly(interrupted=SHOW_INTERRUPTED)
def show_command(
    run_dir: str,
    prompt_texts: tuple[str, ...],
    prompts_file: str | None,
    heads: str | None,
    top: int,
    out_path: str | None,
    device: str | None,
    dtype: DType | None,
    quiet: bool,
) -> None:
    """Show where the run's heads attend on your own prompts: per head, its role and each token's
    most attended tokens; stores the patterns for the report's explorer."""
    from interp.pipeline.show import MAX_PROMPTS, read_prompt_file, show

    texts = list(prompt_texts)
    if prompts_file:
        read = read_prompt_file(prompts_file, limit=max(MAX_PROMPTS - len(texts), 0))
        texts += read.texts
        if (note := read.cut_note(prompts_file)) is not None:
            click.echo(note, err=True)
    shown = show(
        run_dir, texts, heads, out_path, top, device=device, dtype=dtype, progress=not quiet
    )
    click.echo(shown.text, nl=False)
    click.echo(
        f"patterns: {shown.saved} (`interp report {run_dir}` adds them to the report's explorer)"
    )
    if shown.page is not None:
        click.echo(f"page: {shown.page}")


def build_cli() -> click.Group:
    """The `interp` group, with `run` and one command per stage as the registry holds them now."""

    @click.group(context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(package_name="interp")
    def group() -> None:
        """Find out what each attention head of a transformer does, and how much the model needs it."""

    group.add_command(_run_command())
    for st in STAGES:
        group.add_command(_stage_command(st))
    for extra_command in (models, tables, roles, compare, show_command, study):
        group.add_command(extra_command)
    return group


main = build_cli()

if __name__ == "__main__":
    main()

"""The `interp` command line: a thin click layer over the library.

Every command is one call into library code; user errors (InterpError, bad options) end in one
line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import errno
import functools
import sys
import warnings
from pathlib import Path

import click

from interp.config import DTYPES, CollectConfig, ModelSpec
from interp.errors import InterpError

EXIT_USER, EXIT_INTERRUPTED = 1, 130


def friendly(fn):
    """Turn user errors into one line and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        warnings.filterwarnings("ignore")
        try:
            return fn(*args, **kwargs)
        except InterpError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_USER)
        except ValueError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_USER)
        except KeyboardInterrupt:
            click.echo("interrupted: finished stages are kept; rerun with --resume to continue", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                click.echo("error: disk full; free space and rerun with --resume", err=True)
                sys.exit(EXIT_USER)
            raise

    return wrapper


def model_options(fn):
    """--model, --device, --dtype: shared by every command that loads a model."""
    fn = click.option("--dtype", type=click.Choice(DTYPES), default="float32", show_default=True,
                      help="bfloat16 halves memory and is fast on GPUs; on a CPU without native bf16 it is several times slower")(fn)
    fn = click.option("--device", default="cpu", show_default=True, help="cpu, cuda or cuda:N")(fn)
    fn = click.option("--model", "-m", default="smollm2-135m", show_default=True,
                      help="packaged name (see `interp models`), a .gguf file, a model directory or a Hub name")(fn)
    return fn


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="interp")
def main() -> None:
    """Find out what each attention head of a transformer does, and how much the model needs it."""


@main.command()
@model_options
@click.option("--out", "out_dir", default="reports", show_default=True, type=click.Path(), help="folder for run directories")
@click.option("--name", "run_name", default=None, help="run name (default: a timestamp)")
@click.option("--corpus", "corpora", multiple=True, type=click.Path(), help="extra probe corpus: .txt, .jsonl, .csv or .conllu (repeatable)")
@click.option("--text-column", default=None, help="field / column holding the text in a .jsonl or .csv corpus")
@click.option("--no-builtin", is_flag=True, help="probe only with --corpus files (plus repeated random tokens)")
@click.option("--max-seq-len", type=int, default=None, help="truncate probes longer than this (with a warning)")
@click.option("--n-syntax", type=int, default=CollectConfig.n_syntax, show_default=True, help="generated syntax sentences")
@click.option("--quick", is_flag=True, help="fewer probes and a smaller ablation corpus: minutes, not a quarter hour")
@click.option("--skip", "skip", multiple=True, type=click.Choice(["classify", "ablate", "report"]), help="stage to leave out (repeatable)")
@click.option("--resume", is_flag=True, help="continue a run given by --name, skipping finished stages")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--quiet", "-q", is_flag=True, help="no progress bars")
@friendly
def run(model, device, dtype, out_dir, run_name, corpora, text_column, no_builtin, max_seq_len, n_syntax, quick, skip, resume, seed, quiet):
    """Collect features, classify heads, ablate them and write the report."""
    from interp.pipeline import RunOptions, run as run_pipeline

    for path in corpora:
        if not Path(path).exists():
            raise InterpError(f"corpus file not found: {path}")
    suites = ("repeated",) if no_builtin else ("prose", "repeated", "syntax")
    collect_cfg = CollectConfig(suites=suites, corpora=tuple(corpora), text_column=text_column,
                                max_seq_len=max_seq_len, n_syntax=n_syntax, seed=seed)
    stages = tuple(s for s in ("collect", "classify", "ablate", "report") if s not in skip)
    options = RunOptions(model=ModelSpec(model, device, dtype), collect=collect_cfg, out_dir=out_dir,
                         run_name=run_name, quick=quick, stages=stages, resume=resume)
    run_dir = run_pipeline(options, progress=not quiet)
    report = run_dir / "report.html"
    click.echo(f"run: {run_dir}")
    if report.exists():
        click.echo(f"report: {report}")


@main.command()
@click.option("--prepare", is_flag=True,
              help="convert the packaged GGUF model now (about a minute, once) so that runs start in seconds")
@friendly
def models(prepare):
    """List the model sources and whether each is available here."""
    from interp.models import list_sources, prepare_packaged

    if prepare:
        for name, state in prepare_packaged():
            click.echo(f"{name}: {state}")
        return

    rows = list_sources()
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
@click.argument("run_dir", type=click.Path())
@click.option("--refit", is_flag=True, help="rebuild the reference bank and refit the classifier first")
@friendly
def classify(run_dir, refit):
    """Label every head of RUN_DIR with a role (writes roles, clusters)."""
    from interp.rundir import read_manifest

    read_manifest(Path(run_dir))
    from interp.classify import ClassifyConfig, classify_run

    result = classify_run(Path(run_dir), ClassifyConfig(), refit=refit)
    click.echo(result.summary_text() if hasattr(result, "summary_text") else f"roles: {Path(run_dir) / 'roles.csv'}")


@main.command()
@click.argument("run_dir", type=click.Path())
@click.option("--quick", is_flag=True, help="small evaluation corpus")
@click.option("--top-k", type=int, default=None, help="exact ablation only for the k heads attribution ranks highest")
@click.option("--dtype", type=click.Choice(DTYPES), default=None, help="override the run's dtype for ablation")
@click.option("--ablation", "ablations", multiple=True, type=click.Choice(["zero", "mean", "resample"]),
              help="ablation kind (repeatable; the first orders the pruning curve)  [default: zero]")
@click.option("--metric", "metrics", multiple=True,
              help="metric to measure (repeatable; the first orders the pruning curve)  [default: all of the model's kind]")
@friendly
def ablate(run_dir, quick, top_k, dtype, ablations, metrics):
    """Measure each head's causal effect for RUN_DIR (writes effects, pruning)."""
    import dataclasses

    from interp.pipeline import model_spec_of

    spec = model_spec_of(Path(run_dir))
    from interp.ablate import AblateConfig, ablate_run
    from interp.models import load_model

    config = AblateConfig(quick=quick, top_k=top_k, ablations=ablations or ("zero",), metrics=metrics or None)
    model = load_model(dataclasses.replace(spec, dtype=dtype) if dtype else spec)
    ablate_run(Path(run_dir), model, config)
    click.echo(f"effects: {Path(run_dir) / 'effects.csv'}")


@main.command()
@click.argument("run_dir", type=click.Path())
@friendly
def report(run_dir):
    """Rebuild RUN_DIR's figures, report.html and report.pdf from its tables."""
    from interp.report.html import build_report
    from interp.rundir import read_manifest

    read_manifest(Path(run_dir))
    click.echo(f"report: {build_report(Path(run_dir))}")


@main.command()
@click.argument("run_a", type=click.Path())
@click.argument("run_b", type=click.Path())
@click.option("--out", "out_path", default=None, type=click.Path(), help="HTML file to write (default: RUN_A/compare-<B>.html)")
@friendly
def compare(run_a, run_b, out_path):
    """Put the role maps of two runs side by side, with the heads whose roles differ."""
    from interp.report.html import compare_runs
    from interp.rundir import read_manifest

    a, b = Path(run_a), Path(run_b)
    read_manifest(a), read_manifest(b)
    out = Path(out_path) if out_path else a / f"compare-{b.name}.html"
    click.echo(f"comparison: {compare_runs(a, b, out)}")


if __name__ == "__main__":
    main()

"""`interp show RUN_DIR`: where the run's heads attend on the user's own prompts."""

from __future__ import annotations

import click

from interp.console import friendly
from interp.model.spec import DTYPES, DType
from interp.report.explorer import DEFAULT_BY_EFFECT

SHOW_INTERRUPTED = "nothing was stored: the run's prompts.npz is as it was"


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

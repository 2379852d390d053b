"""``interp show RUN_DIR --prompt TEXT``: where a run's heads attend on the researcher's own prompts.

The prompts run through the model the run recorded, once, with hooks
(:mod:`interp.pipeline.prompts`); every head's pattern is stored in ``RUN_DIR/prompts.npz``, so
that ``interp report RUN_DIR`` shows them in the report's explorer. The command prints, for
the chosen heads (by default the most important by effect and the most confident head of each
role), the head's role and each query token's most attended tokens, and with ``--out`` writes
a self-contained page of the explorer on the prompts.

This module imports no torch: the model is loaded only when :func:`show` runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp.errors import PromptError, RunError
from interp.model.spec import DType
from interp.pipeline.results import load_run
from interp.pipeline.rundir import check_out_file, write_text
from interp.report import explorer as X
from interp.report import prompt_store as P
from interp.report.summary import head_shape, model_name

# Prompts one call stores: each keeps its heads' patterns in memory and in prompts.npz.
MAX_PROMPTS = 200


@dataclass(frozen=True)
class PromptFile:
    """The prompts :func:`read_prompt_file` kept, and how many non-blank lines the file holds."""

    texts: list[str]
    total: int

    def cut_note(self, path: str | Path) -> str | None:
        """One line saying which prompts were left out and how to see them; None if none were."""
        if self.total <= len(self.texts):
            return None
        return (
            f"note: {path} holds {self.total} prompts; showing the first {len(self.texts)} "
            f"(at most {MAX_PROMPTS} at a time): to see the rest, give `--prompts` a file of "
            f"the prompts after the first {len(self.texts)}"
        )


@dataclass(frozen=True)
class Shown:
    """What :func:`show` did: the prompts' patterns, the heads printed and where files went."""

    prompts: P.PromptSet
    heads: tuple[X.Head, ...]
    text: str  # the compact view of the heads' patterns
    saved: Path  # RUN_DIR/prompts.npz
    page: Path | None  # the --out page


def read_prompt_file(path: str | Path, limit: int = MAX_PROMPTS) -> PromptFile:
    """One prompt per line of a UTF-8 text file, the first ``limit`` of them; lines that are blank
    (or hold only control characters) are skipped. The file is read a line at a time, so a huge
    one costs no more memory than its longest line and the kept prompts."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise PromptError(f"no such prompts file: {path}")
    kept: list[str] = []
    total = 0
    try:
        with file.open(encoding="utf-8", newline=None) as lines:
            for line in lines:
                text = line.rstrip("\n")
                if is_blank(text):
                    continue
                total += 1
                if len(kept) < limit:
                    kept.append(text)
    except UnicodeDecodeError:
        raise PromptError(
            f"{path}: bytes that are not UTF-8; re-save the prompts file as UTF-8"
        ) from None
    if not total:
        raise PromptError(f"{path} holds no prompt (one prompt per line; blank lines are skipped)")
    return PromptFile(kept, total)


def is_blank(text: str) -> bool:
    """True for text with nothing to show: only spaces, NUL bytes or other control characters."""
    return all(ch.isspace() or not ch.isprintable() for ch in text)


def show(
    run_dir: str | Path,
    prompts: Sequence[str],
    heads: str | Sequence[X.Head] | None = None,
    out: str | Path | None = None,
    top: int = 3,
    model: Any = None,
    device: str | None = None,
    dtype: DType | None = None,
    progress: bool = True,
) -> Shown:
    """Run ``prompts`` through the run's model and show where ``heads`` attend on them.

    ``heads``: ``"18.6,L17H3"`` or [(18, 6), (17, 3)]; None: :func:`interp.report.explorer.default_heads`.
    ``model``: a LoadedModel to use instead of loading the recorded one (a run made from a model
    built in Python needs it); ``device`` and ``dtype`` change how the recorded one loads;
    ``progress``: a bar over the prompts as they run.
    Writes ``RUN_DIR/prompts.npz`` (replacing earlier prompts) and, with ``out``, an HTML page.
    """
    run = load_run(run_dir)
    texts = list(prompts)
    if not texts:
        raise PromptError("give a prompt: --prompt TEXT or --prompts FILE")
    if len(texts) > MAX_PROMPTS:
        raise PromptError(
            f"{len(texts)} prompts: interp show stores at most {MAX_PROMPTS} at a time; "
            "show them in parts"
        )
    for i, text in enumerate(texts, 1):
        if is_blank(text):
            raise PromptError(f"prompt {i} is empty: give some text")
    shape = head_shape(run.manifest, run.roles, run.features, run.effects)
    if isinstance(heads, str):
        chosen = X.parse_heads(heads, shape)
    elif heads:
        chosen = X.parse_heads(",".join(f"{l}.{h}" for l, h in heads), shape)
    else:
        chosen = X.default_heads(run)
    if not chosen:
        raise RunError(
            f"{run.path} has no roles or effects table to choose heads from; name them with --heads, "
            "e.g. --heads 0.1,2.3"
        )
    page = check_out_file(out) if out is not None else None
    loaded = model if model is not None else _load(run.path, run.manifest, device, dtype)
    model_shape = (loaded.n_layers, loaded.n_heads)
    if shape != (0, 0) and model_shape != shape:
        raise RunError(
            f"the model has {model_shape[0]} layers x {model_shape[1]} heads, the run "
            f"{shape[0]} x {shape[1]}: give the model the run was made with"
        )

    from interp.pipeline.prompts import prompt_patterns  # torch: only once a model runs

    patterns = prompt_patterns(
        loaded,
        texts,
        lambda lengths: P.stored_heads(model_shape, lengths, chosen),
        progress=progress,
    )
    saved = P.write_prompts(run.path, patterns)
    if page is not None:
        from interp.report.html import render_explorer_page

        data = X.explorer_data(run, prompts=patterns, selected=chosen[0], marked=chosen)
        if data is None:
            raise ValueError("the stored prompts give the explorer something to show")
        title = f"Attention of {model_name(run.manifest)} on your prompts"
        lead = [f"Run {run.path.name}, {len(texts)} prompt(s)."]
        write_text(page, render_explorer_page(data, title, lead))
    return Shown(patterns, tuple(chosen), X.text_view(run, patterns, chosen, top), saved, page)


def _load(run_dir: Path, manifest: dict[str, Any], device: str | None, dtype: DType | None) -> Any:
    """The model the run recorded, on ``device`` / in ``dtype`` where given."""
    from interp.model.load import load_model
    from interp.pipeline.execute import model_spec_of

    facts = manifest.get("model") or {}
    if facts.get("source") == "bridge":
        raise RunError(
            f"{run_dir} was made with a model built in Python ({facts.get('name')}), which the command line "
            "cannot load: call interp.pipeline.show.show(RUN_DIR, prompts, model=...) with that model"
        )
    spec = model_spec_of(run_dir)
    return load_model(
        dataclasses.replace(spec, device=device or spec.device, dtype=dtype or spec.dtype)
    )

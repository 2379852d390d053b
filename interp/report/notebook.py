"""A run in a notebook: the report's figures as matplotlib figures, and its explorer inline.

``interp.figure(run, "role_map")`` returns the figure the report draws under that name (the
file stem in ``RUN_DIR/figures/``), built from the run's tables alone and not written anywhere;
a notebook shows it as the cell's value. ``interp.explorer(run)`` returns the report's attention
explorer as a page of its own, which a notebook shows inline in a sandboxed frame: the same
self-contained page as ``interp show --out`` writes, so it needs no network and no extension
(``.save(path)`` writes it to a file). A run shows itself as a short summary table
(:meth:`interp.pipeline.results.RunTables._repr_html_`).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from interp.errors import RunError
from interp.pipeline.results import RunTables, load_run
from interp.pipeline.rundir import write_text
from interp.report import effect_plots as E
from interp.report import explorer as X
from interp.report import feature_plots, plots
from interp.report import summary as S
from interp.report import syntax_section as Y
from interp.report.exemplar_plots import exemplars_of, plot_exemplars
from interp.report.figures import SavedFigure
from interp.report.html import prompts_of, render_explorer_page

Builder = Callable[[RunTables], list[SavedFigure] | list[SavedFigure | None] | SavedFigure | None]


def _shape(run: RunTables) -> tuple[int, int]:
    return S.head_shape(run.manifest, run.roles, run.features, run.effects)


def _features(run: RunTables) -> list[SavedFigure] | None:
    causal = (run.manifest.get("model") or {}).get("causal")
    return feature_plots.plot_feature_heatmaps(run.features, None, _shape(run), causal)


def _syntax(run: RunTables) -> list[SavedFigure] | None:
    corpora = Y.classifier_corpora(run.tables.get("syntax"), run.manifest.get("stages"))
    return feature_plots.plot_relation_heatmaps(run.features, None, _shape(run), corpora)


# figure name (or the prefix of numbered or per-role figures) -> what draws it, in report order
BUILDERS: dict[str, Builder] = {
    "role_map": lambda run: plots.plot_role_map(run.roles, None, _shape(run)),
    "role_counts": lambda run: plots.plot_role_counts(run.roles, None, _shape(run)),
    "sink_by_layer": lambda run: plots.plot_sink_by_layer(run.roles, None, _shape(run)),
    "features_": _features,
    "syntax_": _syntax,
    "effect_maps": lambda run: E.plot_effect_maps(run.effects, None, _shape(run)),
    "effect_vs_role": lambda run: E.plot_effect_vs_role(run.effects, run.roles, None),
    "estimator_audit": lambda run: E.plot_estimator_audit(run.effects, run.roles, None),
    "score_vs_effect": lambda run: E.plot_score_vs_effect(run.roles, run.effects, None),
    "pruning": lambda run: E.plot_pruning(run.pruning, None, run.effects),
    "exemplar_": lambda run: plot_exemplars(
        exemplars_of(run.path)[0], run.roles, run.features, None
    ),
}


def _run(run: RunTables | str | Path) -> RunTables:
    return run if isinstance(run, RunTables) else load_run(run)


def figure(run: RunTables | str | Path, name: str) -> Figure:
    """The report's figure ``name`` for this run, as a matplotlib figure (nothing is written).

    Names are the report's file stems: ``role_map``, ``role_counts``, ``sink_by_layer``,
    ``features_1`` (and ``_2``, ... when the features take several pages), ``syntax_1``, ...,
    ``effect_maps``, ``effect_vs_role``, ``estimator_audit``, ``score_vs_effect``, ``pruning``,
    ``exemplar_<role>`` (``exemplar_induction``). A figure whose tables the run lacks is refused
    in one line naming the figures it has of that kind.
    """
    run = _run(run)
    key = next(
        (key for key in BUILDERS if name == key or (key[-1] == "_" and name.startswith(key))), None
    )
    if key is None:
        raise RunError(
            f"no figure named {name!r}: the report draws {', '.join(k + '*' if k[-1] == '_' else k for k in BUILDERS)}"
        )
    built = BUILDERS[key](run)
    found = [f for f in (built if isinstance(built, list) else [built]) if f is not None]
    chosen = next((f for f in found if f.name == name), None)
    for other in found:
        if other is not chosen and other.figure is not None:
            other.figure.clear()
    if chosen is None or chosen.figure is None:
        have = ", ".join(f.name for f in found) or "none (the tables it needs are missing)"
        raise RunError(f"{run.path} has no figure {name!r}; of that kind it has: {have}")
    return chosen.figure


@dataclass(frozen=True)
class Page:
    """A self-contained HTML page; a notebook shows it inline, in a sandboxed frame."""

    html: str
    height: int = 760  # pixels of the frame in a notebook

    def _repr_html_(self) -> str:
        # srcdoc holds the page itself (escaped): nothing is fetched, and its script runs in
        # the frame's sandbox, apart from the notebook's
        return (
            f'<iframe srcdoc="{html.escape(self.html, quote=True)}" sandbox="allow-scripts" '
            f'style="width:100%;height:{self.height}px;border:1px solid #ddd"></iframe>'
        )

    def save(self, path: str | Path) -> Path:
        """Write the page to ``path`` (atomically) and return it."""
        out = Path(path)
        write_text(out, self.html)
        return out


def explorer(run: RunTables | str | Path, prompts_only: bool = False) -> Page:
    """The report's attention explorer for a run: its heads and their attention on the stored
    probes and on the prompts ``interp show`` stored; ``prompts_only``: on those prompts alone,
    as ``interp show --out`` writes it."""
    run = _run(run)
    prompts, note = prompts_of(run.path)
    marked = X.default_heads(run)
    if prompts_only:
        if prompts is None:
            if note:
                raise RunError(
                    f"{run.path}: the stored prompts cannot be read; run `interp show {run.path} "
                    f"--prompt TEXT` to store them again ({note})"
                )
            raise RunError(
                f"{run.path} has no prompts: run `interp show {run.path} --prompt TEXT` first"
            )
        data = X.explorer_data(
            run, prompts=prompts, selected=marked[0] if marked else None, marked=marked
        )
        lead = [f"Run {run.path.name}, {len(prompts.prompts)} prompt(s)."]
    else:
        found, _ = exemplars_of(run.path)
        data = X.explorer_data(run, found, prompts, marked=marked)
        if data is not None and note:
            data["notes"].insert(0, note)
        lead = [f"Run {run.path.name}: every head, on the stored probes and your prompts."]
    if data is None:
        raise RunError(
            f"{run.path} has no attention patterns to explore: collect stores them "
            f"(`interp collect {run.path}`), `interp show` stores your prompts"
        )
    title = f"Attention of {S.model_name(run.manifest)}"
    label = "the heads worth a first look, by effect and by role"
    return Page(render_explorer_page(data, title, lead, marked_label=label))

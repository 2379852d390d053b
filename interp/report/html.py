"""The report stage's entry point, and the HTML renderer of the content model.

``build_report(run_dir)`` turns whatever tables a run has into figures, a content model
(:mod:`interp.report.document`), ``report.html`` (one file: the figures are embedded as base64
PNG, style and script are inline, nothing is fetched from the network, so it can be mailed or
opened offline on a laptop or a phone) and ``report.pdf`` (:mod:`interp.report.pdf`, from the
same content). ``compare_runs(a, b, out)`` puts two runs' role maps side by side (two models, or
two corpora on one model) and lists what changed for their matching heads (roles, role scores,
feature lifts, effects: :mod:`interp.report.compare`). The page also holds
the attention explorer (:mod:`interp.report.explorer`, after the roles section): interactive,
so HTML only.

Corpus and model text is untrusted (a probe corpus can hold ``<script>``): the templates are
rendered with autoescape on and no ``|safe`` anywhere.
"""

from __future__ import annotations

import base64
import logging
from pathlib import Path
from typing import Any

import pandas as pd
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from interp.pipeline.results import RunTables, load_run
from interp.pipeline.rundir import write_text
from interp.pipeline.stages import STAGES
from interp.report import content as C
from interp.report import explorer as X
from interp.report import plots
from interp.report import prompt_store as P
from interp.report import summary as S
from interp.report.compare import effect_differences, role_differences, score_differences
from interp.report.document import compare_document, report_document, stage_sections
from interp.report.exemplar_plots import exemplars_of
from interp.report.figures import png_bytes
from interp.report.pdf import write_pdf

log = logging.getLogger(__name__)
TEMPLATES = Path(__file__).parent / "templates"
SCREEN = 120 / 150  # CSS px per PNG pixel: figures show a bit above true size (fonts stay legible)


def environment() -> Environment:
    return Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def image(block: C.FigureBlock) -> dict[str, Any]:
    """What an <img> needs: the PNG as a data: URI and its display size."""
    width, height = block.pixels
    return {
        "src": "data:image/png;base64," + base64.b64encode(block.png).decode("ascii"),
        "width": round(width * SCREEN),
        "height": round(height * SCREEN),
    }


def render_html(doc: C.Document, explorer: dict[str, Any] | None = None) -> str:
    """The page of a content model; ``explorer`` (:func:`explorer_view`) adds the attention
    explorer after the roles section (HTML only: it is interactive)."""
    if explorer is not None:
        ids = [s.id for s in doc.sections]
        explorer = {**explorer, "after": "roles" if "roles" in ids else ids[0]}
    return (
        environment()
        .get_template("document.html.j2")
        .render(doc=doc, image=image, explorer=explorer)
    )


def explorer_view(
    data: dict[str, Any] | None,
    marked_label: str = "the heads worth a first look, by effect and by role",
) -> dict[str, Any] | None:
    """What the explorer template needs from :func:`interp.report.explorer.explorer_data`."""
    if data is None:
        return None
    kinds = {s["kind"] for s in data["sources"]}
    return {
        "json": X.to_json(data),
        "cells": X.grid_cells(data),
        "sources": [s["name"] for s in data["sources"]],
        "notes": data["notes"],
        "has_prompts": "prompt" in kinds,
        "has_probes": "probe" in kinds,
        "marked_label": marked_label,
    }


def prompts_of(run_dir: Path) -> tuple[P.PromptSet | None, str | None]:
    """The prompts `interp show` stored in the run, or None and a note saying why they are missing."""
    try:
        return P.read_prompts(run_dir), None
    except P.PromptsUnreadable as exc:
        log.warning("%s", exc)
        return None, f"Your prompts are left out of the explorer: {exc}."


def explorer_of(run_dir: str | Path) -> dict[str, Any] | None:
    """The explorer of a run: its heads, and their patterns on the stored probes and on the
    prompts `interp show` stored; None when the run has neither."""
    run = load_run(run_dir)
    found, _ = exemplars_of(run.path)
    prompts, note = prompts_of(run.path)
    data = X.explorer_data(run, found, prompts, marked=X.default_heads(run))
    if data is not None and note:
        data["notes"].insert(0, note)
    return explorer_view(data)


def render_explorer_page(
    data: dict[str, Any],
    title: str,
    lead: list[str],
    marked_label: str = "the heads interp show printed",
) -> str:
    """A page of its own with the explorer only (`interp show --out`, a notebook's explorer)."""
    view = explorer_view(data, marked_label=marked_label)
    return (
        environment()
        .get_template("explorer_page.html.j2")
        .render(title=title, lead=lead, explorer=view)
    )


def build_document(run_dir: str | Path, processes: int = 1) -> C.Document:
    """The report's content: every registered stage's sections (drawing their figures under
    ``RUN_DIR/figures``, up to ``processes`` sections at once) between the summary and the heads
    table."""
    run = load_run(run_dir)
    sections = stage_sections(run, run.path / "figures", STAGES, processes)
    return report_document(run, S.report_summary(run), sections)


def build_report(run_dir: str | Path, pdf: bool = True, processes: int = 1) -> Path:
    """Build figures, ``report.html`` and (unless ``pdf=False``) ``report.pdf``; return the HTML path.
    ``processes``: how many sections draw their figures at once (the same files for any count).

    Works with whatever tables the run has: a run that only collected features gets a report
    with its feature heatmaps and a note saying which stages are missing.
    """
    doc = build_document(run_dir, processes)
    out = Path(run_dir) / "report.html"
    write_text(out, render_html(doc, explorer_of(run_dir)))
    if pdf:
        write_pdf(doc, Path(run_dir) / "report.pdf")
    return out


# --- two runs side by side ---------------------------------------------------------------------


def _label(run: RunTables) -> str:
    return f"{S.model_name(run.manifest)} / {run.path.name}"


def _map(run: RunTables, letter: str, legend: list[str]) -> C.FigureBlock | None:
    if run.roles is None or run.roles.empty:
        return None
    shape = S.head_shape(run.manifest, run.roles)
    png = png_bytes(
        plots.role_map_figure(
            run.roles, shape, title=f"{letter}: {_label(run)}", legend_roles=legend
        )
    )
    return C.FigureBlock(
        f"role_map_{letter.lower()}",
        f"Run {letter}",
        "Colour and code: primary role; number: confidence (paler = less sure).",
        png,
    )


def compare_runs(run_a: str | Path, run_b: str | Path, out_path: str | Path) -> Path:
    """Write an HTML page with both runs' role maps, the heads whose primary role differs, and
    for every matching head what changed: its role scores and feature lifts, and its effect on
    each metric (:mod:`interp.report.compare`; the largest changes first).

    The difference tables need both runs to have a roles table and the same layers x heads
    shape; otherwise the page says why and shows the maps it can.
    """
    a, b = load_run(run_a), load_run(run_b)
    shape_a, shape_b = S.head_shape(a.manifest, a.roles), S.head_shape(b.manifest, b.roles)
    notes, diff, scores, effects = [], None, None, None
    for run in (a, b):
        if run.roles is None or run.roles.empty:
            notes.append(f"{_label(run)} has no roles table (the classify stage has not run).")
    if not notes and shape_a != shape_b:
        notes.append(
            f"The shapes differ ({shape_a[0]} × {shape_a[1]} vs {shape_b[0]} × {shape_b[1]} layers × heads), "
            "so heads cannot be matched one to one; compare the maps by eye."
        )
    elif not notes:
        diff, scores, effects = (
            role_differences(a.roles, b.roles),
            score_differences(a, b),
            effect_differences(a, b),
        )
    legend = S.role_order(
        pd.concat(
            [r["role"] for r in (a.roles, b.roles) if r is not None and not r.empty]
            or [pd.Series(dtype=str)]
        )
    )
    maps = [m for m in (_map(a, "A", legend), _map(b, "B", legend)) if m is not None]
    choice = S.choose_effect(a.effects)
    doc = compare_document(
        _label(a),
        _label(b),
        maps,
        notes,
        diff,
        shape_a[0] * shape_a[1],
        scores,
        effects,
        f"{choice.ablation} ablation, {choice.estimator}" if choice else None,
    )
    out = Path(out_path)
    write_text(out, render_html(doc))
    return out

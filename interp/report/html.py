"""The report stage's entry point: figures, a self-contained HTML page, and the PDF.

``build_report(run_dir)`` turns whatever tables a run has into ``report.html`` (one file: the
figures are embedded as base64 PNG, style and script are inline, nothing is fetched from the
network, so it can be mailed or opened offline on a laptop or a phone) and ``report.pdf``.
``compare_runs(a, b, out)`` puts two runs' role maps side by side and lists the heads whose
primary role differs (two models, or two corpora on one model).

Corpus and model text is untrusted (a probe corpus can hold ``<script>``): the templates are
rendered with autoescape on and no ``|safe`` anywhere.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from pathlib import Path
from typing import Any

import pandas as pd
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from interp.report import plots
from interp.report import summary as S
from interp.report.figures import SavedFigure, png_bytes, role_colour
from interp.report.pdf import write_pdf
from interp.report.summary import fmt, percent
from interp.rundir import RunTables, load_run, write_text

TEMPLATES = Path(__file__).parent / "templates"
MODEL_FACTS = ("name", "source", "causal", "n_layers", "n_heads", "n_kv_heads", "d_head", "n_ctx", "bos_policy",
               "dtype", "device")
SCREEN = 120 / 150  # CSS px per PNG pixel: figures show a bit above true size (fonts stay legible)
NUMERIC_KINDS = "iufb"


def environment() -> Environment:
    return Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined,
                       trim_blocks=True, lstrip_blocks=True)


# --- values to text ----------------------------------------------------------------------------

def table_view(frame: pd.DataFrame, role_columns: tuple[str, ...] = ("role", "second_role"),
               percent_columns: tuple[str, ...] = ()) -> dict[str, Any]:
    """A DataFrame as template data: header names, and cells with text, sort key and role colour."""
    numeric = {c for c in frame.columns if frame[c].dtype.kind in NUMERIC_KINDS}
    columns = [{"name": str(c), "num": c in numeric} for c in frame.columns]
    rows = []
    for record in frame.itertuples(index=False):
        cells = []
        for col, value in zip(frame.columns, record):
            missing = value is None or (isinstance(value, float) and math.isnan(value))
            text = percent(value) if col in percent_columns else fmt(value)
            cells.append({
                "text": text, "num": col in numeric,
                "sort": ("" if missing else repr(float(value))) if col in numeric else None,
                "colour": role_colour(str(value)) if col in role_columns and not missing else None,
            })
        rows.append(cells)
    return {"columns": columns, "rows": rows}


def figure_view(fig: SavedFigure, data: bytes | None = None) -> dict[str, Any]:
    """Template data for one figure: its PNG as a data: URI plus title, caption and display size."""
    data = data if data is not None else fig.png.read_bytes()
    width, height = struct.unpack(">II", data[16:24])  # PNG IHDR
    return {"name": fig.name, "title": fig.title, "caption": fig.caption, "kind": fig.kind,
            "src": "data:image/png;base64," + base64.b64encode(data).decode("ascii"),
            "width": round(width * SCREEN), "height": round(height * SCREEN)}


# --- the report --------------------------------------------------------------------------------

def _cards(summary: dict[str, Any]) -> list[dict[str, str]]:
    n_layers, n_heads = summary["shape"]
    cards = [{"value": f"{n_layers} × {n_heads}", "label": "layers × heads"}]
    if summary["role_counts"]:
        named = sum(r["heads"] for r in summary["role_counts"] if r["role"] != "unexplained")
        cards.append({"value": str(named), "label": "heads with a named role"})
        cards.append({"value": percent(summary["share_unexplained"]), "label": "share unexplained"})
    for row in summary["prunable"] or []:
        cards.append({"value": f"{percent(row['within_1%'])} / {percent(row['within_5%'])}",
                      "label": f"prunable within 1% / 5% of {row['metric']}"})
    return cards


def _missing(summary: dict[str, Any]) -> list[str]:
    why = {"features": "collect", "roles": "classify", "effects": "ablate", "pruning": "ablate"}
    return [f"This run has no {name} table yet (the {stage} stage has not run), so its figures are left out."
            for name, stage in why.items() if not summary["tables"][name]]


def _corpora(corpora: dict[str, Any]) -> dict[str, Any] | None:
    if not corpora:
        return None
    rows = [{"suite": suite, "sequences": (info or {}).get("n_sequences"), "tokens": (info or {}).get("n_tokens"),
             "hash": (info or {}).get("hash")} for suite, info in corpora.items()]
    return table_view(pd.DataFrame(rows))


def _provenance(prov: dict[str, Any]) -> list[tuple[str, str]]:
    keys = ("created", "seed", "git_hash", "machine", "python")
    return [(k, fmt(prov.get(k)) or "unknown") for k in keys if k in prov] + [
        (k, fmt(v)) for k, v in prov.items() if k not in keys and k != "versions" and not isinstance(v, (dict, list))]


def _stages(stages: dict[str, Any]) -> list[dict[str, str]]:
    return [{"name": name, "seconds": fmt((info or {}).get("seconds")), "finished": fmt((info or {}).get("finished")),
             "config": json.dumps((info or {}).get("config"), indent=1, default=str)} for name, info in stages.items()]


def report_context(run: RunTables, summary: dict[str, Any], figures: list[SavedFigure],
                   heads: pd.DataFrame | None) -> dict[str, Any]:
    """Everything the report template shows, as plain data."""
    model = summary["model"]
    counts = pd.DataFrame(summary["role_counts"]) if summary["role_counts"] else None
    prunable = pd.DataFrame(summary["prunable"]) if summary["prunable"] else None
    views = [figure_view(f) for f in figures]
    return {
        "model_name": str(model.get("name") or "unknown model"), "run_name": summary["run"],
        "created": summary["provenance"].get("created"), "cards": _cards(summary), "missing": _missing(summary),
        "role_counts": table_view(counts, percent_columns=("share",)) if counts is not None else None,
        "prunable": table_view(prunable, percent_columns=("within_1%", "within_5%")) if prunable is not None else None,
        "model_facts": [(k, fmt(model[k])) for k in MODEL_FACTS if k in model],
        "corpora": _corpora(summary["corpora"]),
        "figures": [v for v in views if v["kind"] != "exemplar"],
        "exemplars": [v for v in views if v["kind"] == "exemplar"],
        "heads": table_view(heads) if heads is not None else None, "effect_label": summary["exact_effect"],
        "clusters": table_view(run.clusters) if run.clusters is not None and not run.clusters.empty else None,
        "provenance": _provenance(summary["provenance"]),
        "versions": [(k, fmt(v) or "not installed") for k, v in (summary["provenance"].get("versions") or {}).items()],
        "stages": _stages(summary["stages"]),
    }


def build_report(run_dir: str | Path, pdf: bool = True) -> Path:
    """Build figures, ``report.html`` and (unless ``pdf=False``) ``report.pdf``; return the HTML path.

    Works with whatever tables the run has: a run that only collected features gets a report
    with its feature heatmaps and a note saying which stages are missing.
    """
    run = load_run(run_dir)
    figures = plots.make_all(run)
    summary = S.report_summary(run)
    heads = S.head_table(run.roles, run.effects)
    html = environment().get_template("report.html.j2").render(**report_context(run, summary, figures, heads))
    out = run.path / "report.html"
    write_text(out, html)
    if pdf:
        write_pdf(run.path, figures, summary, heads)
    return out


# --- two runs side by side ---------------------------------------------------------------------

def _label(run: RunTables) -> str:
    return f"{(run.manifest.get('model') or {}).get('name') or 'unknown model'} / {run.path.name}"


def role_differences(roles_a: pd.DataFrame, roles_b: pd.DataFrame) -> pd.DataFrame:
    """Heads whose primary role differs: layer, head, role_a, confidence_a, role_b, confidence_b."""
    cols = ["layer", "head", "role", "confidence"]
    both = roles_a[cols].merge(roles_b[cols], on=["layer", "head"], how="outer", suffixes=("_a", "_b"))
    differs = both["role_a"].fillna("(none)") != both["role_b"].fillna("(none)")
    return both[differs].sort_values(["layer", "head"]).reset_index(drop=True)


def _map_view(run: RunTables, letter: str, legend: list[str]) -> dict[str, Any] | None:
    if run.roles is None or run.roles.empty:
        return None
    shape = S.head_shape(run.manifest, run.roles)
    png = png_bytes(plots.role_map_figure(run.roles, shape, title=f"{letter}: {_label(run)}", legend_roles=legend))
    fig = SavedFigure(f"role_map_{letter.lower()}", f"Run {letter}",
                      "Colour and code: primary role; number: confidence (paler = less sure).", Path(), Path())
    return figure_view(fig, png)


def compare_runs(run_a: str | Path, run_b: str | Path, out_path: str | Path) -> Path:
    """Write an HTML page with both runs' role maps and the heads whose primary role differs.

    The difference table needs both runs to have a roles table and the same layers x heads
    shape; otherwise the page says why and shows the maps it can.
    """
    a, b = load_run(run_a), load_run(run_b)
    shape_a = S.head_shape(a.manifest, a.roles)
    shape_b = S.head_shape(b.manifest, b.roles)
    notes, diff = [], None
    for run in (a, b):
        if run.roles is None or run.roles.empty:
            notes.append(f"{_label(run)} has no roles table (the classify stage has not run).")
    if not notes and shape_a != shape_b:
        notes.append(f"The shapes differ ({shape_a[0]} × {shape_a[1]} vs {shape_b[0]} × {shape_b[1]} layers × heads), "
                     "so heads cannot be matched one to one; compare the maps by eye.")
    elif not notes:
        diff = role_differences(a.roles, b.roles)
    legend = S.role_order(pd.concat([r["role"] for r in (a.roles, b.roles) if r is not None and not r.empty]
                                    or [pd.Series(dtype=str)]))
    context = {
        "label_a": _label(a), "label_b": _label(b), "notes": notes,
        "maps": [m for m in (_map_view(a, "A", legend), _map_view(b, "B", legend)) if m is not None],
        "diff": table_view(diff, role_columns=("role_a", "role_b")) if diff is not None and not diff.empty else None,
        "n_diff": None if diff is None else len(diff), "n_heads": shape_a[0] * shape_a[1],
    }
    out = Path(out_path)
    write_text(out, environment().get_template("compare.html.j2").render(**context))
    return out

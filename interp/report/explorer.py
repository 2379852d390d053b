"""The attention explorer: any head's attention, token by token, on the stored probes and on the
researcher's own prompts, with what the run says about the head.

Three consumers read what this module builds, none of them needs torch:

- ``interp show RUN_DIR --prompt TEXT`` (:mod:`interp.pipeline.show`) runs the prompts through the
  run's model once and stores every head's pattern in ``RUN_DIR/prompts.npz``
  (:func:`interp.report.prompt_store.write_prompts`); it prints :func:`text_view` for the chosen heads and can write a page
  of its own (:func:`interp.report.html.render_explorer_page`).
- The HTML report: :func:`explorer_data` packs the run's heads (role, features, effects) and the
  patterns of ``exemplars.npz`` and ``prompts.npz`` into one JSON object that the page's inline
  script (``templates/explorer.js``) draws: a clickable head grid coloured by role, the chosen
  head's facts, its query x key heatmap, and the tokens coloured by where the query under the
  pointer attends.
- Notebooks: :func:`circuitsvis_export` gives a head's patterns in the shape circuitsvis'
  ``attention_heads`` and ``attention_patterns`` take.

The prompts are stored by :mod:`interp.report.prompt_store`; what the run says about each head
is gathered by :mod:`interp.report.head_facts`.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import numpy as np
import pandas as pd

from interp.errors import ConfigError
from interp.pipeline.results import RunTables
from interp.report import summary as S
from interp.report.head_facts import head_facts, head_name, page_number
from interp.report.prompt_store import Head, PromptSet
from interp.roles import NO_ROLE, ROLES, palette

PAGE_CELLS = 6_000_000  # pattern cells one HTML page embeds (one byte each, about 8 MB as base64)
DEFAULT_BY_EFFECT = 3  # heads `interp show` picks by effect, before one per role
DEFAULT_LIMIT = 10


class HasPatterns(Protocol):
    """A stored probe (:class:`interp.collect.exemplars.Probe`) or a :class:`Prompt`."""

    @property
    def tokens(self) -> tuple[str, ...]: ...

    def pattern(self, layer: int, head: int) -> np.ndarray: ...


# --- which heads -------------------------------------------------------------------------------

_HEAD = re.compile(r"^\s*(?:L(\d+)H(\d+)|(\d+)\.(\d+))\s*$", re.I)


def parse_heads(text: str, shape: Head) -> list[Head]:
    """``"18.6,L17H3"`` -> [(18, 6), (17, 3)]: heads as ``layer.head`` or ``LlayerHhead``, in the given order."""
    heads: list[Head] = []
    for item in text.split(","):
        found = _HEAD.match(item)
        if not found:
            raise ConfigError(
                f"--heads: {item.strip()!r} is not a head; write layer.head, e.g. 3.2 or L3H2, "
                "separated by commas"
            )
        layer, head = (int(g) for g in found.groups() if g is not None)
        if not (layer < shape[0] and head < shape[1]):
            raise ConfigError(
                f"--heads: the model has no head {head_name(layer, head)} "
                f"({shape[0]} layers x {shape[1]} heads, numbered from 0)"
            )
        if (layer, head) not in heads:
            heads.append((layer, head))
    return heads


def effect_ranking(run: RunTables) -> pd.DataFrame | None:
    """layer, head, delta of the effect slice the report shows, most important head first."""
    choice = S.choose_effect(run.effects)
    if choice is None:
        return None
    ranked = S.head_effects(run.effects, choice).sort_values(
        "delta", ascending=False, kind="stable"
    )
    return ranked.reset_index(drop=True)


def default_heads(
    run: RunTables, by_effect: int = DEFAULT_BY_EFFECT, limit: int = DEFAULT_LIMIT
) -> list[Head]:
    """The heads worth a first look: the ``by_effect`` most important by effect, then the most
    confident head of every named role (catalogue order), ``limit`` in all; [] without a roles
    or effects table."""
    chosen: list[Head] = []
    ranking = effect_ranking(run)
    if ranking is not None:
        chosen += [(int(r.layer), int(r.head)) for r in ranking.head(by_effect).itertuples()]
    roles = run.roles
    if roles is not None and not roles.empty:
        ranked = roles.sort_values("confidence", ascending=False, kind="stable")
        for role in [r for r in ROLES if r not in NO_ROLE]:
            best = ranked[ranked["role"] == role].head(1)
            chosen += [(int(r.layer), int(r.head)) for r in best.itertuples()]
    return list(dict.fromkeys(chosen))[:limit]


def head_line(run: RunTables, layer: int, head: int) -> str:
    """One line about a head for the text view: role, confidence, effect and its rank."""
    parts = ["no role (the classify stage has not run)"]
    roles = run.roles
    row = roles[(roles["layer"] == layer) & (roles["head"] == head)] if roles is not None else None
    if row is not None and not row.empty:
        parts = [str(row["role"].iloc[0])]
        if page_number(row["confidence"].iloc[0]) is not None:
            parts.append(f"confidence {float(row['confidence'].iloc[0]):.2f}")
    ranking, choice = effect_ranking(run), S.choose_effect(run.effects)
    if ranking is not None and choice is not None:
        mine = ranking.index[(ranking["layer"] == layer) & (ranking["head"] == head)]
        if len(mine) and page_number(ranking.loc[mine[0], "delta"]) is not None:
            parts.append(
                f"effect {float(ranking.loc[mine[0], 'delta']):+.3g} on {choice.metric} "
                f"(rank {mine[0] + 1} of {len(ranking)} measured)"
            )
    return f"{head_name(layer, head)}  " + "; ".join(parts)


# --- the text view -----------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def visible(token: str) -> str:
    """A token with line breaks, tabs and other control characters written as escapes (\\n, \\x00)."""
    named = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
    return _CONTROL.sub(lambda m: named.get(m.group(), f"\\x{ord(m.group()):02x}"), token)


def display_token(token: str) -> str:
    """A token as the text view prints it: quoted, control characters escaped."""
    return json.dumps(token, ensure_ascii=False)


def top_keys(row: np.ndarray, top: int) -> list[tuple[int, float]]:
    """(key position, weight) of the ``top`` largest weights of one query row, largest first."""
    order = np.argsort(-row, kind="stable")[:top]
    return [(int(k), float(row[k])) for k in order]


def pattern_lines(source: HasPatterns, layer: int, head: int, top: int = 3) -> list[str]:
    """One line per query token: its position, the token, and the ``top`` keys it attends to
    (token@position weight), most attended first."""
    pattern = source.pattern(layer, head)
    width = max(len(display_token(t)) for t in source.tokens)
    lines = []
    for q, token in enumerate(source.tokens):
        keys = "  ".join(
            f"{display_token(source.tokens[k])}@{k} {w:.2f}" for k, w in top_keys(pattern[q], top)
        )
        lines.append(f"  {q:>3} {display_token(token):<{width}} -> {keys}")
    return lines


def text_view(run: RunTables, prompts: PromptSet, heads: Iterable[Head], top: int = 3) -> str:
    """Per head, its role and, per prompt, each query token's most attended tokens (the compact
    view ``interp show`` prints)."""
    out = []
    for layer, head in heads:
        out.append(head_line(run, layer, head))
        for i, p in enumerate(prompts.prompts, 1):
            out.append(f" prompt {i}: {display_token(p.text)}")
            out += pattern_lines(p, layer, head, top)
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# --- circuitsvis -------------------------------------------------------------------------------


def circuitsvis_export(source: HasPatterns, heads: Sequence[Head]) -> dict[str, Any]:
    """Heads' patterns on one probe or prompt as circuitsvis takes them:
    ``circuitsvis.attention.attention_heads(**export)``, or
    ``attention_patterns(tokens=export["tokens"], attention=export["attention"])``.

    ``tokens``: list of str (one per position); ``attention``: float32 ``[head, q, k]`` (circuitsvis
    calls q the destination and k the source); ``attention_head_names``: ``"L18H6"`` per head.
    """
    if not heads:
        raise ValueError("name at least one (layer, head)")
    attention = np.stack([source.pattern(layer, head) for layer, head in heads]).astype(np.float32)
    return {
        "tokens": list(source.tokens),
        "attention": attention,
        "attention_head_names": [head_name(layer, head) for layer, head in heads],
    }


# --- what the page's script draws --------------------------------------------------------------


def _packed(patterns: np.ndarray) -> str:
    """float [..., q, k] in [0, 1] -> one byte per weight (1/255 steps), base64."""
    quantized = np.clip(np.rint(np.nan_to_num(patterns.astype(np.float32)) * 255), 0, 255).astype(
        np.uint8
    )
    return base64.b64encode(quantized.tobytes()).decode("ascii")


def _source(
    name: str,
    kind: str,
    tokens: Sequence[str],
    patterns: np.ndarray,
    heads: Sequence[Head] | None,
    note: str = "",
) -> dict[str, Any]:
    """``patterns``: [layer * head, q, k] with ``heads=None`` (every head, in order), else [len(heads), q, k]."""
    return {
        "name": name,
        "kind": kind,
        "tokens": [visible(t) for t in tokens],
        "note": note,
        "heads": None if heads is None else [f"{l}.{h}" for l, h in heads],
        "data": _packed(patterns),
    }


def explorer_data(
    run: RunTables,
    exemplars: Any = None,
    prompts: PromptSet | None = None,
    selected: Head | None = None,
    marked: Sequence[Head] = (),
    budget: int = PAGE_CELLS,
) -> dict[str, Any] | None:
    """Everything the explorer view draws, as JSON-ready data; None when the run has no patterns
    to show (no exemplars, no prompts).

    Sources are the user's prompts first, then the stored probes, while they fit ``budget``
    pattern cells; ``notes`` says what was left out. ``marked`` heads are outlined in the grid
    (those ``interp show`` printed, or worth a first look); ``selected`` is shown first.
    """
    shape = S.head_shape(run.manifest, run.roles, run.features, run.effects)
    if prompts is not None and prompts.prompts:
        shape = prompts.shape
    elif exemplars is not None and exemplars.probes:
        shape = exemplars.shape
    sources, notes, used = [], [], 0
    candidates: list[tuple[str, str, Sequence[str], Any, Sequence[Head] | None, str]] = []
    for i, p in enumerate(prompts.prompts if prompts else (), 1):
        kept = (
            None
            if len(p.heads) == shape[0] * shape[1] and list(p.heads) == sorted(p.heads)
            else p.heads
        )
        candidates.append(
            (f"your prompt {i}: {_short(p.text)}", "prompt", p.tokens, p.patterns, kept, "")
        )
    counts: dict[str, int] = {}
    for probe in exemplars.probes if exemplars else ():
        counts[probe.suite] = counts.get(probe.suite, 0) + 1
        cut = (
            f"cut to its first {len(probe.tokens)} of {probe.full_length} tokens"
            if probe.cut
            else ""
        )
        flat = probe.patterns.reshape(-1, *probe.patterns.shape[2:])
        candidates.append(
            (
                f"{probe.suite} probe {counts[probe.suite]} ({probe.kind})",
                "probe",
                probe.tokens,
                flat,
                None,
                cut,
            )
        )
    for name, kind, tokens, patterns, heads, note in candidates:
        cells = int(np.prod(patterns.shape))
        if used + cells > budget:
            notes.append(f"{name} is left out (the page keeps {budget:,} attention weights).")
            continue
        used += cells
        sources.append(_source(name, kind, tokens, patterns, heads, note))
    if not sources:
        return None
    facts = head_facts(run)
    if selected is None:
        selected = marked[0] if marked else (default_heads(run, limit=1) or [(0, 0)])[0]
    from interp.report.figures import (
        role_code,  # matplotlib: only once a page is built, not for `interp show`'s text
    )

    roles = {
        name: {"colour": colour, "code": role_code(name)} for name, colour in palette().items()
    }
    ablation = S.preferred_ablation(run.effects)
    effect_note = (
        f"{ablation} ablation, exact where measured; positive: the model gets worse without the head"
        if ablation
        else ""
    )
    return {
        "shape": list(shape),
        "heads": facts,
        "roles": roles,
        "sources": sources,
        "notes": notes,
        "effect_note": effect_note,
        "marked": [f"{l}.{h}" for l, h in marked],
        "selected": f"{selected[0]}.{selected[1]}",
        "causal": bool((run.manifest.get("model") or {}).get("causal", True)),
    }


def _short(text: str, limit: int = 48) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def grid_cells(data: dict[str, Any]) -> list[list[dict[str, str]]]:
    """The head grid's rows (layers) of cells: key ``"layer.head"``, role code, colour, tooltip."""
    roles, facts = data["roles"], data["heads"]
    rows = []
    for layer in range(data["shape"][0]):
        row = []
        for head in range(data["shape"][1]):
            key = f"{layer}.{head}"
            role = (facts.get(key) or {}).get("role")
            info = roles.get(role) or {"colour": "#e8eaed", "code": ""}
            conf = (facts.get(key) or {}).get("confidence")
            tip = f"{head_name(layer, head)}: {role or 'no role'}" + (
                f" ({conf:.2f})" if conf is not None else ""
            )
            row.append(
                {
                    "key": key,
                    "code": info["code"],
                    "colour": info["colour"],
                    "ink": _ink(info["colour"]),
                    "tip": tip,
                    "marked": key in data.get("marked", ()),
                }
            )
        rows.append(row)
    return rows


def _ink(colour: str) -> str:
    """Dark text on a light cell, white on a dark one."""
    r, g, b = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return "#1d1d1f" if 0.299 * r + 0.587 * g + 0.114 * b > 0.55 else "#ffffff"


def to_json(data: dict[str, Any]) -> str:
    """The data as the page's ``data-explorer`` attribute holds it. ``<``, ``>`` and ``&`` are
    JSON escapes, so that no corpus text appears as markup even where a browser serializes the
    attribute unescaped; the template escapes the rest."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")

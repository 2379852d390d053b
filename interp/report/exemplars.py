"""Exemplar attention patterns: for each role, the strongest head's pattern on one probe.

Input is ``RUN_DIR/exemplars.json`` (written by collect)::

    {"items": [{"feature": str, "layer": int, "head": int, "suite": str,
                "tokens": [str, ...], "pattern": [[float, ...], ...]}]}   # pattern is q x k

An item belongs to a role when its feature is the role's catalogue feature, or a sub-feature of
it (``syntactic:nsubj:head2dep`` belongs to ``syntactic``). Among a role's items, the strongest
head is the one with the largest value - baseline in the features table (else the largest
``score_<role>`` in the roles table, else the first item).

Tokens are corpus text: they are drawn as plain text (mathtext off, so ``$`` is literal),
non-printable characters become visible marks, and long tokens are cut.
"""

from __future__ import annotations

import json
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from interp.report.figures import SavedFigure, new_figure, save, styled
from interp.roles import ROLES

log = logging.getLogger(__name__)

MAX_TOKENS = 64  # longer probes are cut to their first 64 tokens (labels stay legible)
TOKEN_WIDTH = 14
VISIBLE = {"\n": "↵", "\r": "↵", "\t": "→"}


@dataclass(frozen=True)
class Exemplar:
    role: str
    feature: str
    layer: int
    head: int
    suite: str
    tokens: tuple[str, ...]
    pattern: np.ndarray  # (q, k)


def role_for_feature(feature: str) -> str | None:
    """The catalogue role a feature measures: exact match, or ``<role feature>:<detail>``."""
    for role in ROLES.values():
        if role.feature and (feature == role.feature or feature.startswith(role.feature + ":")):
            return role.name
    return None


def token_label(token: object) -> str:
    """A token as a tick label: control characters shown as marks, blank tokens visible, long ones cut."""
    text = "".join(VISIBLE.get(ch, ch if ch.isprintable() else "·") for ch in str(token))
    if not text.strip():
        text = "␣" * len(text) if text else "∅"
    return text if len(text) <= TOKEN_WIDTH else text[: TOKEN_WIDTH - 1] + "…"


def parse_item(item: object) -> Exemplar | None:
    """An exemplar from one JSON item, or None (logged) if it is malformed or matches no role."""
    try:
        feature, layer, head = str(item["feature"]), int(item["layer"]), int(item["head"])
        tokens = tuple(str(t) for t in item["tokens"])
        pattern = np.asarray(item["pattern"], dtype=float)
    except (KeyError, TypeError, ValueError) as exc:
        log.warning("skipping malformed exemplar %r: %s", str(item)[:80], exc)
        return None
    role = role_for_feature(feature)
    if role is None:
        return None
    if pattern.ndim != 2 or pattern.shape[1] > len(tokens) or pattern.shape[0] > len(tokens) or pattern.size == 0:
        log.warning("skipping exemplar %s L%dH%d: pattern %s does not fit %d tokens",
                    feature, layer, head, pattern.shape, len(tokens))
        return None
    return Exemplar(role, feature, layer, head, str(item.get("suite", "")), tokens, pattern)


def _strength(ex: Exemplar, features: pd.DataFrame | None, roles: pd.DataFrame | None) -> float:
    if features is not None and not features.empty:
        rows = features[(features["feature"] == ex.feature) & (features["layer"] == ex.layer)
                        & (features["head"] == ex.head)]
        if not rows.empty:
            return float((rows["value"] - rows["baseline"]).mean())
    column = f"score_{ex.role}"
    if roles is not None and column in roles.columns:
        rows = roles[(roles["layer"] == ex.layer) & (roles["head"] == ex.head)]
        if not rows.empty and pd.notna(rows[column].iloc[0]):
            return float(rows[column].iloc[0])
    return float("-inf")


def strongest_per_role(items: list, features: pd.DataFrame | None = None,
                       roles: pd.DataFrame | None = None) -> list[Exemplar]:
    """One exemplar per role (catalogue order): the item whose head scores highest on the role."""
    best: dict[str, tuple[float, Exemplar]] = {}
    for item in items:
        ex = parse_item(item)
        if ex is None:
            continue
        strength = _strength(ex, features, roles)
        if ex.role not in best or strength > best[ex.role][0]:
            best[ex.role] = (strength, ex)
    return [best[r][1] for r in ROLES if r in best]


@styled
def exemplar_figure(ex: Exemplar) -> Figure:
    """Heatmap of one head's attention: row = query token, column = key token, darker = more weight."""
    pattern = ex.pattern[:MAX_TOKENS, :MAX_TOKENS]
    n_q, n_k = pattern.shape
    cell = 0.24 if max(n_q, n_k) <= 24 else 0.15
    font = 8 if cell > 0.2 else 6
    fig = new_figure(max(4.5, n_k * cell + 2.8), max(3.8, n_q * cell + 2.2))
    ax = fig.add_subplot()
    image = ax.imshow(pattern, cmap="Blues", vmin=0, vmax=max(float(np.nanmax(pattern)), 1e-9),
                      aspect="auto", interpolation="none")
    fig.colorbar(image, ax=ax, shrink=0.8, pad=0.02, label="attention weight")
    ax.set_xticks(range(n_k), [token_label(t) for t in ex.tokens[:n_k]], rotation=90, fontsize=font)
    ax.set_yticks(range(n_q), [token_label(t) for t in ex.tokens[:n_q]], fontsize=font)
    ax.tick_params(length=0)
    ax.set_xlabel("key (attended-to token)")
    ax.set_ylabel("query token")
    cut = f", first {MAX_TOKENS} of {len(ex.tokens)} tokens" if len(ex.tokens) > MAX_TOKENS else ""
    ax.set_title(f"{ex.role.replace('_', ' ')}: L{ex.layer}H{ex.head} on {ex.suite or 'a probe'}{cut}\n"
                 f"feature {ex.feature}")
    return fig


def plot_exemplars(items: list | None, fig_dir: Path, features: pd.DataFrame | None = None,
                   roles: pd.DataFrame | None = None) -> list[SavedFigure] | None:
    """One attention-pattern figure per role with an exemplar (see the module docstring)."""
    if not items:
        return None
    saved = []
    with warnings.catch_warnings():
        # Tokens in scripts the default font lacks (CJK, emoji) draw as boxes; say nothing.
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        for ex in strongest_per_role(items, features, roles):
            saved.append(save(
                exemplar_figure(ex), fig_dir, f"exemplar_{ex.role}", f"{ex.role.replace('_', ' ')} head L{ex.layer}H{ex.head}",
                f"Attention of L{ex.layer}H{ex.head} on a {ex.suite or 'probe'} sequence: row = query token, "
                f"column = the token it attends to; darker = more attention.", kind="exemplar"))
    return saved or None


def read_exemplars(run_dir: Path) -> list[dict] | None:
    """Items of ``RUN_DIR/exemplars.json``, or None if absent or unreadable (logged, not raised)."""
    path = Path(run_dir) / "exemplars.json"
    if not path.exists():
        return None
    try:
        items = json.loads(path.read_text(encoding="utf-8")).get("items")
    except (json.JSONDecodeError, AttributeError, UnicodeDecodeError) as exc:
        log.warning("skipping %s: %s", path, exc)
        return None
    return items if isinstance(items, list) else None

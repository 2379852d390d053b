"""Exemplar attention patterns: for each role, its strongest head's attention on a stored probe.

The patterns come from ``RUN_DIR/exemplars.npz`` (every head on a few short probes per suite,
captured by the collect stage: :mod:`interp.collect.exemplars`), so any head can be drawn without the
model: :func:`exemplar_figure` takes a stored probe and a (layer, head).

The strongest head of a role is, among the heads whose primary role it is, the one that puts the
largest share of all its attention on the role's targets (the features table's ``raw``, sink
included, as detect_head measures it; positional: its best position), not of its attention off
the sink, which would crown a head that parks 0.9 on the first token and 0.09 on the targets.
Where there is no raw share (``broad``, ``syntactic``, a table written before it), the one that
exceeds the baseline most (``value - baseline``; syntactic: its best relation); without a
features table, the highest ``score_<role>`` (else confidence) in the roles table. It is drawn on a probe of the kind its
feature is measured on (:data:`SHOWN_ON`): repeated random tokens for induction and duplicate
heads, syntax sentences for syntactic heads, natural text for the rest.

Tokens are corpus text: they are drawn as plain text (mathtext off, so ``$`` is literal), in a
chain of fonts with wide coverage, with a visible stand-in for whatever no font of the chain
draws (:mod:`interp.report.glyphs`), so that no token shows as an empty box; long tokens are cut.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from interp.collect.exemplars import Exemplars, ExemplarsUnreadable, Probe, read_exemplars
from interp.report.figures import SavedFigure, new_figure, save, styled
from interp.report.glyphs import token_fonts, token_text
from interp.roles import FEATURE_GROUP_PREFIX, NO_ROLE, ROLES

log = logging.getLogger(__name__)
TOKEN_WIDTH = 14
# The probe kind each role's feature reads (interp.collect.features.FEATURE_PROBE_KINDS, restated here
# because that module needs torch; a test keeps the two in step). Other roles: natural text.
SHOWN_ON = {"duplicate_token": "repeated", "induction": "repeated", "syntactic": "syntax"}
DEFAULT_KIND = "natural"


@dataclass(frozen=True)
class Pick:
    """The head shown for a role, and why it was chosen."""

    role: str
    layer: int
    head: int
    strength: float  # raw share or lift on the role's feature, or the role's score
    measure: str  # what strength is


def token_label(token: object) -> str:
    """A token as a tick label: what no font draws shown as a mark or code (``token_text``), blank
    tokens visible, long ones cut."""
    text = token_text(token)
    if not text.strip():
        text = "␣" * len(text) if text else "∅"
    return text if len(text) <= TOKEN_WIDTH else text[: TOKEN_WIDTH - 1] + "…"


def _strength(features: pd.DataFrame, role: str) -> tuple[pd.Series, str]:
    """Per (layer, head), the raw share on the role's feature, else its lift (a feature group's: its best,
    e.g. over positions or relations), and what it is."""
    feature = ROLES[role].feature
    prefix = FEATURE_GROUP_PREFIX.get(role, f"{feature}:")
    mine = features[(features["feature"] == feature) | features["feature"].str.startswith(prefix)]
    raw = "raw" in mine.columns and mine["raw"].notna().any()
    score = mine["raw"] if raw else mine["value"] - mine["baseline"]
    return score.groupby(
        [mine["layer"], mine["head"]]
    ).max().dropna(), f"{feature} {'raw share' if raw else 'lift'}"


def strongest_heads(roles: pd.DataFrame | None, features: pd.DataFrame | None) -> list[Pick]:
    """One head per role present (catalogue order, unexplained and unmeasured left out); see the module docstring."""
    if roles is None or roles.empty:
        return []
    picks = []
    for role in ROLES:
        if role in NO_ROLE:
            continue
        heads = roles[roles["role"] == role]
        if heads.empty:
            continue
        keys = pd.MultiIndex.from_arrays([heads["layer"], heads["head"]])
        strength, measure = (
            _strength(features, role) if features is not None and not features.empty else (None, "")
        )
        strength = strength.reindex(keys).dropna() if strength is not None else None
        if strength is not None and not strength.empty:
            (layer, head), value = strength.idxmax(), float(strength.max())
        else:
            column = f"score_{role}" if f"score_{role}" in heads.columns else "confidence"
            best = heads.loc[heads[column].fillna(-np.inf).idxmax()]
            layer, head, value, measure = best["layer"], best["head"], float(best[column]), column
        picks.append(Pick(role, int(layer), int(head), value, measure))
    return picks


def probe_for(role: str, exemplars: Exemplars) -> Probe | None:
    """The first stored probe of the kind the role's feature reads, else the first probe."""
    kind = SHOWN_ON.get(role, DEFAULT_KIND)
    probes = exemplars.of_kind(kind) or list(exemplars.probes)
    return probes[0] if probes else None


@styled
def exemplar_figure(probe: Probe, layer: int, head: int, title: str | None = None) -> Figure:
    """Heatmap of one head's attention on a stored probe: row = query token, column = key token."""
    pattern = probe.pattern(layer, head)
    n = len(probe.tokens)
    cell = 0.24 if n <= 24 else 0.16
    font = 8 if cell > 0.2 else 6.5
    fig = new_figure(max(4.5, n * cell + 2.6), max(3.8, n * cell + 2.0))
    ax = fig.add_subplot()
    labels = [token_label(t) for t in probe.tokens]
    sns.heatmap(
        pattern,
        ax=ax,
        cmap="Blues",
        vmin=0,
        vmax=max(float(np.nanmax(pattern)), 1e-9),
        square=True,
        xticklabels=labels,
        yticklabels=labels,
        cbar_kws={"label": "attention weight", "shrink": 0.8},
    )
    ax.tick_params(length=0, labelsize=font)
    ax.tick_params(axis="x", labelrotation=90)
    ax.tick_params(axis="y", labelrotation=0)
    for label in (*ax.get_xticklabels(), *ax.get_yticklabels()):
        label.set_fontfamily(token_fonts())
    ax.set_xlabel("key (attended-to token)")
    ax.set_ylabel("query token")
    cut = f", first {n} of {probe.full_length} tokens" if probe.cut else ""
    ax.set_title(title or f"L{layer}H{head} on {probe.suite}{cut}")
    return fig


def plot_exemplars(
    exemplars: Exemplars | None,
    roles: pd.DataFrame | None,
    features: pd.DataFrame | None,
    fig_dir: Path | None,
) -> list[SavedFigure] | None:
    """One attention-pattern figure per role present, for its strongest head (see the module docstring)."""
    if exemplars is None or not exemplars.probes:
        return None
    n_layers, n_heads = exemplars.shape
    saved = []
    for pick in strongest_heads(roles, features):
        probe = probe_for(pick.role, exemplars)
        if probe is None or not (pick.layer < n_layers and pick.head < n_heads):
            continue
        name = pick.role.replace("_", " ")
        cut = f", first {len(probe.tokens)} of {probe.full_length} tokens" if probe.cut else ""
        fig = exemplar_figure(
            probe, pick.layer, pick.head, f"{name}: L{pick.layer}H{pick.head} on {probe.suite}{cut}"
        )
        saved.append(
            save(
                fig,
                fig_dir,
                f"exemplar_{pick.role}",
                f"{name} head L{pick.layer}H{pick.head}",
                f"Attention of L{pick.layer}H{pick.head}, the {name} head with the largest "
                f"{pick.measure} ({pick.strength:.2f}), on a {probe.suite} probe: row = query token, "
                "column = the token it attends to; darker = more attention.",
                kind="exemplar",
            )
        )
    return saved or None


def exemplars_of(run_dir: Path) -> tuple[Exemplars | None, str | None]:
    """The run's stored exemplar patterns (None when collect has not stored them), or None and a
    note saying why they cannot be read."""
    try:
        return read_exemplars(run_dir), None
    except ExemplarsUnreadable as exc:
        log.warning("%s", exc)
        return None, f"Exemplar patterns are left out: {exc}."

"""Exemplar attention patterns: the strongest head of each feature, on one probe it can show.

The report draws these as token-by-token heatmaps. They are chosen after collection (the head
with the largest lift ``value - baseline`` per feature) and gathered in one short extra forward
pass per probe, capturing only the layers needed.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import torch

from interp.lens import run_patterns
from interp.features import FEATURE_FAMILIES
from interp.models import LoadedModel
from interp.probes.base import REPEATED, SYNTAX, ProbeSequence

MAX_TOKENS = 24  # longer probes make unreadable heatmaps


def pick_heads(features: pd.DataFrame) -> pd.DataFrame:
    """Per feature, the head with the largest lift; for syntax, only the single best relation."""
    f = features.dropna(subset=["value"]).assign(lift=lambda d: d.value - d.baseline)
    best = f.loc[f.groupby("feature").lift.idxmax()]
    syn = best[best.feature.str.startswith("syntactic:")]
    plain = best[~best.feature.str.startswith("syntactic:")]
    return pd.concat([plain, syn.nlargest(1, "lift")]).reset_index(drop=True)


def pick_probe(seqs: list[ProbeSequence], feature: str) -> ProbeSequence | None:
    """A short probe of the family the feature reads, preferring ones that show what it looks at."""
    if feature.startswith("syntactic:"):
        families = (SYNTAX,)
    else:
        families = FEATURE_FAMILIES.get(feature, ())
    candidates = [s for s in seqs if s.family in families and 8 <= len(s) <= MAX_TOKENS]
    if not candidates:
        candidates = [s for s in seqs if s.family in families]
    if not candidates:
        return None
    if REPEATED in families and feature in ("induction", "duplicate_token"):
        return min(candidates, key=len)
    # Punctuation makes delimiter and sink behaviour visible.
    return max(candidates[:200], key=lambda s: (int(s.is_delim.sum()) >= 2, -abs(len(s) - 18)))


def token_labels(model: LoadedModel, tokens: torch.Tensor) -> list[str]:
    return [model.tokenizer.decode([int(t)]) for t in tokens]


def gather(model: LoadedModel, features: pd.DataFrame, seqs: list[ProbeSequence]) -> dict[str, Any]:
    """The exemplars.json payload: one item per feature (feature, layer, head, suite, tokens, pattern)."""
    items = []
    for row in pick_heads(features).itertuples():
        seq = pick_probe(seqs, row.feature)
        if seq is None:
            continue
        seq_tokens = seq.tokens[: min(len(seq), 2 * MAX_TOKENS)]
        captured: dict[int, torch.Tensor] = {}

        def keep(layer: int, pattern: torch.Tensor, want=int(row.layer)) -> None:
            if layer == want:
                captured[layer] = pattern[0].float().clone()

        run_patterns(model, seq_tokens[None], torch.ones(1, len(seq_tokens), dtype=torch.long), keep)
        pattern = captured[int(row.layer)][int(row.head)]
        items.append({
            "feature": row.feature, "layer": int(row.layer), "head": int(row.head), "suite": seq.suite,
            "lift": float(row.lift), "tokens": token_labels(model, seq_tokens),
            "pattern": [[round(float(x), 4) for x in r] for r in pattern],
        })
    return {"items": items}

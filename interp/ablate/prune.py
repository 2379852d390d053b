"""The ablate stage's last step: each metric's pruning curve and every role's heads removed at once.

The curves' machinery (the order, the grid and bisection, the bootstrap of the removable share,
the role rows) is :mod:`interp.ablate.pruning`'s; this step builds the held-out corpus
(:func:`interp.ablate.corpora.stage_corpus`, split 1) and runs it for every metric the stage
measures.
"""

from __future__ import annotations

import pandas as pd
import torch

from interp.ablate.config import AblateConfig
from interp.ablate.corpora import measurable, stage_corpus
from interp.ablate.forward import Ablator
from interp.ablate.pruning import Removals, metric_curve, pruning_order, role_rows
from interp.pipeline.tables import PRUNING


def prune(
    ablator: Ablator,
    effects: pd.DataFrame,
    cfg: AblateConfig,
    metrics: tuple[str, ...],
    means: torch.Tensor | None,
    roles: pd.DataFrame | None,
    progress: bool,
) -> tuple[pd.DataFrame, dict]:
    """Each metric's pruning curve in its own order (primary ablation kind), measured on the
    held-out split (split 1, :mod:`interp.ablate.corpora`), then every role's heads removed at once: (the
    ``pruning`` rows, metric -> tolerance -> removable share with its bootstrap interval)."""
    model = ablator.model
    held_out = stage_corpus(model, cfg, metrics, split=1)
    heads = [(layer, head) for layer in range(model.n_layers) for head in range(model.n_heads)]
    by_role = heads_by_role(roles)
    frames, shares = [], {}
    for metric in measurable(metrics, held_out, cfg):
        removals = Removals(
            ablator, held_out, metric, cfg.ablations[0], means, cfg.max_tokens_per_batch
        )
        order = pruning_order(effects, heads, metric, cfg.ablations[0])
        curve, shares[metric] = metric_curve(
            removals, order, cfg.prune_step, cfg.n_bootstrap, cfg.seed, progress
        )
        frames += [curve, role_rows(removals, by_role, len(heads), cfg.n_bootstrap, cfg.seed)]
    frames = [f for f in frames if len(f)]
    pruning = (
        pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=PRUNING.names)
    )
    return pruning, shares


def heads_by_role(roles: pd.DataFrame | None) -> dict[str, list[tuple[int, int]]]:
    """Primary role -> its heads, from a roles table (empty without one)."""
    if roles is None or roles.empty:
        return {}
    return {
        str(role): sorted(zip(group["layer"].astype(int), group["head"].astype(int)))
        for role, group in roles.groupby("role")
    }

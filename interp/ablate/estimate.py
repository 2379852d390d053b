"""The ablate stage's first step: every head's effect estimated at once, and the heads' means.

The stage's estimator (``cfg.estimator``: first-order attribution, :mod:`interp.ablate.attribution`;
integrated gradients, :mod:`interp.ablate.integrated`; or AtP*, :mod:`interp.ablate.atp_star`)
reads the wide estimator corpus (:func:`interp.ablate.corpora.estimator_corpus`); with ``top_k``
the second opinions run too, on the opening rounds of the exact sweep's corpus
(:func:`interp.ablate.corpora.opening_corpus`). Attribution's forward pass also gives every
head's mean output, which mean and resample ablation need; without an estimator the means take a
pass of their own over those opening rounds.

In a run directory the estimate is kept beside the exact sweep's state
(:func:`interp.ablate.round_state.save_estimate`), so that a stopped sweep resumed with the same
config, model and corpora reuses it, rows and means bit for bit, instead of estimating again
(minutes for SmolLM2-135M's attribution over 4,000 positions per metric on a 2-core CPU: the
estimators section of benchmarks/RESULTS.md).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from interp.ablate import atp_star, round_state
from interp.ablate.attribution import attribute
from interp.ablate.batches import EvalCorpus
from interp.ablate.catalogue import SECOND_OPINIONS
from interp.ablate.config import AblateConfig
from interp.ablate.corpora import corpus_facts, estimator_corpus, in_tiers, opening_corpus
from interp.ablate.forward import Ablator
from interp.ablate.integrated import integrate
from interp.ablate.phases import done, timed
from interp.ablate.stats import effects_from_sums, sequence_tokens
from interp.ablate.values import MeanAccumulator


@dataclass
class Estimated:
    """What the estimate step hands the exact sweep."""

    rows: pd.DataFrame | None  # every estimator's effect rows; None when none ran
    means: torch.Tensor | None  # [layer, head, d_head]; None when nothing needs them
    facts: dict[str, Any] = field(default_factory=dict)  # the estimator corpus' sizes


def estimate_heads(
    ablator: Ablator,
    corpus: EvalCorpus,
    cfg: AblateConfig,
    metrics: tuple[str, ...],
    timings: dict[str, float],
    progress: bool,
    state_dir: Path | None = None,
) -> Estimated:
    """Every head's estimated effect (when ``cfg`` asks for an estimate: ``attribution`` or
    ``top_k``) and the means the ablation kinds need; with ``state_dir``, a kept estimate of the
    same config, model and corpora is reused and a new one is kept there."""
    corpus = opening_corpus(ablator.model, cfg, metrics, corpus)
    if not (cfg.attribution or cfg.top_k is not None):
        means = None
        if set(cfg.ablations) & {"mean", "resample"}:
            with timed(timings, "means"):
                means = head_means(ablator, corpus)
            done(progress, "head means", timings["means"])
        return Estimated(None, means)
    with timed(timings, "estimator_corpus"):
        wide = estimator_corpus(ablator.model, cfg, metrics, corpus)
    facts = {"estimator_corpus": corpus_facts(wide)}
    key = None
    if state_dir is not None:
        key = round_state.estimate_key(cfg, ablator.model, [corpus, wide])
        kept = round_state.load_estimate(state_dir, key, ablator.model.device)
        if kept is not None:
            print(
                f"ablate: the {cfg.estimator} estimate of the stopped run is kept "
                f"({round_state.ESTIMATE_FILE})",
                file=sys.stderr,
                flush=True,
            )
            return Estimated(*kept, facts)
    # top_k ranks heads by the second opinions too (attribution first: it also gives the
    # means); the stage's own estimator reads the wide corpus, the others the exact sweep's
    frames, means = [], None
    names = (*SECOND_OPINIONS, cfg.estimator) if cfg.top_k is not None else (cfg.estimator,)
    for name in dict.fromkeys(names):
        with timed(timings, name):
            frame, means = estimator_rows(
                ablator, wide if name == cfg.estimator else corpus, cfg, name, means, progress
            )
        done(progress, f"{name} estimate", timings[name])
        frames.append(frame)
    rows = pd.concat(frames, ignore_index=True)
    if state_dir is not None and key is not None:
        round_state.save_estimate(state_dir, key, rows, means)
    return Estimated(rows, means, facts)


def estimator_rows(
    ablator: Ablator,
    corpus: EvalCorpus,
    cfg: AblateConfig,
    estimator: str,
    means: torch.Tensor | None,
    progress: bool,
) -> tuple[pd.DataFrame, torch.Tensor | None]:
    """Every head's estimated effect rows (``estimator`` the estimator's name) and the heads' means
    (None where no kind needs them and no estimator computed them anyway)."""
    if estimator == "attribution":
        attr = attribute(ablator, corpus, cfg.ablations, progress)
        return effects_from_sums(
            attr.store, "attribution", cfg.n_bootstrap, cfg.seed, sequence_tokens(corpus)
        ), attr.means
    if means is None and set(cfg.ablations) & {"mean", "resample"}:
        means = head_means(ablator, corpus)
    if estimator == atp_star.NAME:
        tiers = atp_star.tiers_for(corpus, cfg.qk_positions, cfg.graddrop_positions)
        narrow = {f: min(tiers.qk[f], tiers.graddrop[f]) for f in corpus.sizes}
        wide = {f: max(tiers.qk[f], tiers.graddrop[f]) for f in corpus.sizes}
        pad = ablator.model.tokenizer.pad_token_id or 0
        tiered = in_tiers(corpus, [narrow, wide], cfg.tokens_per_pass, pad)
        star = atp_star.estimate(ablator, tiered, cfg.ablations, means, tiers, cfg.seed, progress)
        return atp_star.rows(star, tiered, cfg.n_bootstrap, cfg.seed), means
    store = integrate(ablator, corpus, cfg.ablations, means, cfg.ig_steps, progress)
    return effects_from_sums(
        store, "integrated", cfg.n_bootstrap, cfg.seed, sequence_tokens(corpus)
    ), means


def head_means(ablator: Ablator, corpus: EvalCorpus) -> torch.Tensor:
    """Every head's mean z over the valid positions of the corpus: ``[layer, head, d_head]``."""
    acc = MeanAccumulator()
    for batch in corpus.batches:
        acc.add(ablator.clean(batch, keep_z=True).z, batch.valid)
    return acc.means()

"""The exact sweep of the ablate stage: the chosen heads ablated one by one and the model rerun
from each head's layer on, in rounds that give more sequences only to the heads whose effect is
still open (:mod:`interp.ablate.sequential`), under the rounds' time budget, with the sweep's
state kept in the run directory after each round so that a stopped sweep continues
(:mod:`interp.ablate.round_state`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from interp.ablate import round_state
from interp.ablate.batches import EvalCorpus
from interp.ablate.catalogue import ENCODER, LOSS_PROSE, LOSS_REPEATED, SV_LOGIT_DIFF
from interp.ablate.config import PRECISE_DECIDE, RUN_TARGET, AblateConfig, exact_budget
from interp.ablate.corpora import asked_sizes
from interp.ablate.executor import SweepJob, sweep_with
from interp.ablate.forward import Ablator
from interp.ablate.metrics import metric_sizes
from interp.ablate.round_budget import layer_units
from interp.ablate.sequential import (
    ROUNDS,
    Rounds,
    ended_heads,
    precision,
    rounds,
    sequential_sweep,
)
from interp.ablate.stats import SumStore, effects_from_sums, sequence_tokens
from interp.executors.work import Executor
from interp.pipeline import clock
from interp.pipeline.tables import EFFECTS


@dataclass(frozen=True)
class Sweep:
    """What the exact rounds and the pruning curves run on."""

    ablator: Ablator
    corpus: EvalCorpus
    cfg: AblateConfig  # resolved
    metrics: tuple[str, ...]
    threads: int
    state_dir: Path | None  # where the rounds' state is kept; None: nowhere
    by_run: bool  # the rounds' budget is the default one, which the run's clock may shorten
    # --quick chose the top heads (the user gave no --top-k): the budget they leave unspent goes
    # to the heads the estimators rank next
    widen: bool = False


def rounds_budget(cfg: AblateConfig, by_run: bool) -> float | None:
    """The exact rounds' seconds, read when they start. ``by_run``: the budget is the default
    one, which the run's clock may shorten (:func:`interp.ablate.config.exact_budget`); the stage
    says so when it does."""
    elapsed = clock.elapsed() if by_run else None
    budget = exact_budget(cfg.time_budget, elapsed)
    if elapsed is not None and budget != cfg.time_budget:
        print(
            f"ablate: the exact rounds get {budget:.0f} s, not {cfg.time_budget:.0f}: the run has taken "
            f"{elapsed:.0f} s, and what follows the rounds must fit its {RUN_TARGET / 60:.0f} minutes "
            "(--time-budget S sets the budget)",
            file=sys.stderr,
            flush=True,
        )
    return budget


def exact_effects(
    run: Sweep,
    heads: list[tuple[int, int]],
    means: torch.Tensor | None,
    executor: Executor,
    progress: bool,
    budget: float | None,
    later: list[list[tuple[int, int]]],
) -> tuple[pd.DataFrame, bool, list[dict[str, int]]]:
    """Exact effect rows of ``heads``, whether layer reuse held, and the heads each round ran per
    eval set (one round unless ``max_rounds > 1``: then :mod:`interp.ablate.sequential`, no round
    starting after ``budget`` seconds (None: no limit), the batches of ``later`` joining while
    the budget lasts, its state kept in ``run.state_dir`` after each round, where given); each
    sweep's shards run on ``executor`` (:mod:`interp.executors.work`), their sums merged here."""
    ablator, corpus, cfg = run.ablator, run.corpus, run.cfg
    store = SumStore(metric_sizes(corpus.sizes))
    if not heads:
        return pd.DataFrame(columns=EFFECTS.names), False, []
    tokens, reused = sequence_tokens(corpus), []

    def sweep(part: EvalCorpus, chosen: list[tuple[int, int]]) -> None:
        job = SweepJob(part, cfg.ablations, means, cfg.heads_per_pass, cfg.max_tokens_per_batch)
        reused.append(sweep_with(executor, job, chosen, ablator.n_layers, store, progress))

    def table() -> pd.DataFrame:
        return effects_from_sums(store, "exact", cfg.n_bootstrap, cfg.seed, tokens)

    # the built-in eval sets were made max_rounds times as large (stage_corpus); the user's
    # sequences were not
    whole = frozenset(corpus.sizes) - (
        {LOSS_PROSE, LOSS_REPEATED, SV_LOGIT_DIFF} | ({ENCODER} if not cfg.eval_corpus else set())
    )
    parts = rounds(
        corpus,
        cfg.n_rounds,
        cfg.tokens_per_pass,
        ablator.model.tokenizer.pad_token_id or 0,
        whole,
        asked_sizes(ablator.model, cfg),
    )
    if len(parts) == 1:
        sweep(corpus, heads)
        log, stopped_by, ended = [dict.fromkeys(corpus.sizes, len(heads))], ROUNDS, {}
    else:
        deadline = None if budget is None else time.perf_counter() + budget
        begun, after_round = _kept_rounds(run.state_dir, ablator, cfg, heads, corpus, store, reused)
        decide = PRECISE_DECIDE if cfg.precise else None
        state, stopped_by = sequential_sweep(
            parts,
            heads,
            sweep,
            table,
            deadline,
            cfg.precision,
            begun,
            after_round,
            later,
            decide,
            layer_units(ablator.n_layers),
        )
        log, ended = state.log, ended_heads(parts, state.cursors, cfg.n_rounds)
    return precision(table(), stopped_by, cfg.precision, ended), all(reused), log


def _kept_rounds(
    state_dir: Path | None,
    ablator: Ablator,
    cfg: AblateConfig,
    heads: list[tuple[int, int]],
    corpus: EvalCorpus,
    store: SumStore,
    reused: list[bool],
) -> tuple[Rounds | None, Callable[[Rounds], None] | None]:
    """A stopped sweep's rounds from ``state_dir`` (its sums loaded into ``store``, its layer
    reuse into ``reused``), and the callback that keeps the state there after each round; (None,
    None) without a ``state_dir``."""
    if state_dir is None:
        return None, None
    key = round_state.sweep_key(cfg, ablator.model, heads, corpus)
    found = round_state.load(state_dir, key, store)
    if found is not None:
        reused.append(found[1])

    def keep(rounds: Rounds) -> None:
        round_state.save(state_dir, key, store, rounds, all(reused))

    return (found[0] if found else None), keep

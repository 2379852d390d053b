"""Which sequences the ablate stage reads, and which of its metrics they can serve.

- the sweep's corpus (split 0, every round of the sequential sweep; :func:`stage_corpus`), batched
  within the memory the passes may take (:func:`fit_memory`);
- the estimator's corpus (:func:`estimator_corpus`): the sweep's sequences and more of each
  built-in eval set, so that a ranking that chooses the exactly-ablated heads rests on thousands
  of scored positions and not on the sweep's few sentences;
- split 1, held out for the pruning curve (``stage_corpus(..., split=1)``).

A metric the model cannot be scored on stops the stage in one line (:func:`scorable`); one whose
sequences all fell out (a short context, a small vocabulary) is dropped with a warning
(:func:`measurable`).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

from interp.ablate.batches import EvalCorpus, EvalItem, make_batches
from interp.ablate.catalogue import (
    CAUSAL_METRICS,
    CORPUS,
    ENCODER,
    ENCODER_METRICS,
    KL_CORPUS,
    LOSS_PROSE,
    LOSS_REPEATED,
    SV_LOGIT_DIFF,
    SV_PROB,
    eval_set_metrics,
)
from interp.ablate.config import ESTIMATE_ROUNDS, AblateConfig
from interp.ablate.evaluation import build_corpus, prose_subset, read_eval_corpus
from interp.ablate.metrics import metric_sizes
from interp.ablate.pruning import step_sizes
from interp.ablate.stats import sequence_tokens
from interp.ablate.sweep import pass_size
from interp.collect.config import MAX_GENERATED
from interp.errors import ConfigError
from interp.model import memory
from interp.model.load import LoadedModel


def stage_metrics(model: LoadedModel, cfg: AblateConfig) -> tuple[str, ...]:
    available = CAUSAL_METRICS if model.causal else ENCODER_METRICS
    if model.causal and cfg.eval_corpus:  # the user's task first: it orders the pruning curve
        available = (CORPUS, KL_CORPUS, *available)
    if cfg.tasks:
        if not model.causal:
            raise ConfigError(
                "tasks read logits, which an encoder's metrics do not use: give tasks to a causal LM"
            )
        available = (*(t.name for t in cfg.tasks), *available)
    chosen = available if cfg.metrics is None else cfg.metrics
    wrong = [m for m in chosen if m not in available]
    if wrong:
        kind = "causal LM" if model.causal else "encoder"
        raise ConfigError(
            f"metrics {', '.join(wrong)} do not apply to a {kind}; choose from {', '.join(available)}"
        )
    return tuple(chosen)


def eval_set_counts(
    model: LoadedModel, cfg: AblateConfig, metrics: tuple[str, ...], split: int = 0
) -> dict[str, int]:
    """Sequences of each built-in eval set the corpus of ``split`` asks for (``n_prose``,
    ``n_repeated``, ``n_syntax``)."""
    wants = {
        eval_set
        for eval_set in (LOSS_PROSE, LOSS_REPEATED, SV_LOGIT_DIFF)
        if set(eval_set_metrics(eval_set)) & set(metrics)
    }
    rounds_ = cfg.n_rounds if split == 0 else 1  # split 0 holds every round of the sequential sweep
    return {
        "n_prose": rounds_ * cfg.n_prose if (not model.causal or LOSS_PROSE in wants) else 0,
        "n_repeated": rounds_ * cfg.n_repeated if LOSS_REPEATED in wants else 0,
        "n_syntax": rounds_ * cfg.n_syntax if SV_LOGIT_DIFF in wants else 0,
    }


def asked_sizes(model: LoadedModel, cfg: AblateConfig) -> dict[str, int]:
    """Bounded built-in eval set (prose: the shipped lines run out) -> the sequences split 0 asks
    of it over every round of the exact sweep; it may hold fewer. The generated sets (repeated
    tokens, agreement prefixes) are made as large as the rounds ask, less the few the model
    cannot score, and are not listed: they fill every round (interp.ablate.sequential.rounds)."""
    return {
        eval_sets[model.causal]: cfg.n_rounds * getattr(cfg, name)
        for name, eval_sets in _EVAL_SET_OF.items()
        if name in BOUNDED and model.causal in eval_sets
    }


def stage_corpus(
    model: LoadedModel,
    cfg: AblateConfig,
    metrics: tuple[str, ...],
    split: int = 0,
    counts: dict[str, int] | None = None,
) -> EvalCorpus:
    """The evaluation corpus of ``split``, with the built-in eval sets' ``counts`` where given."""
    wants = set(metrics)
    user = (
        read_eval_corpus(cfg.eval_corpus)
        if cfg.eval_corpus and (wants & {CORPUS, KL_CORPUS} or not model.causal)
        else None
    )
    corpus = build_corpus(
        model,
        **(counts or eval_set_counts(model, cfg, metrics, split)),
        repeated_lengths=cfg.repeated_lengths,
        seed=cfg.seed,
        max_tokens=cfg.tokens_per_pass,
        split=split,
        user=user,
        tasks=tuple(t for t in cfg.tasks if t.name in wants),
    )
    if not corpus.batches:
        unfit = [m for m in metrics if _asked(cfg, m)]
        if unfit:
            raise ConfigError(
                f"no evaluation sequence for {', '.join(unfit)} fits this model and tokenizer: nothing "
                f"to measure; choose other metrics (--metric)"
            )
        raise ConfigError("the evaluation corpus is empty: raise n_prose / n_repeated / n_syntax")
    return corpus


def opening_corpus(
    model: LoadedModel, cfg: AblateConfig, metrics: tuple[str, ...], corpus: EvalCorpus
) -> EvalCorpus:
    """The first ``ESTIMATE_ROUNDS`` rounds' worth of the exact sweep's ``corpus`` (the same
    sequences: the built-in eval sets are drawn in one order whatever their size), which the
    estimators and the heads' means read: the sweep's corpus is made for all of its rounds, and
    a pass over it all would cost what the rounds themselves cost."""
    if cfg.n_rounds <= ESTIMATE_ROUNDS:
        return corpus
    return stage_corpus(model, _opening(cfg), metrics)


def _opening(cfg: AblateConfig) -> AblateConfig:
    """``cfg`` with no more rounds than the opening corpus holds."""
    return dataclasses.replace(cfg, max_rounds=min(cfg.n_rounds, ESTIMATE_ROUNDS))


def estimator_corpus(
    model: LoadedModel, cfg: AblateConfig, metrics: tuple[str, ...], corpus: EvalCorpus
) -> EvalCorpus:
    """The corpus the stage's estimator reads: ``corpus`` (the exact sweep's opening rounds,
    :func:`opening_corpus`) and more sequences of
    each built-in eval set, drawn the same way (the first ones are ``corpus``'s), until every metric
    has ``estimator_positions`` scored positions or its eval set has no more: prose stops at the
    lines of its half, and the user's corpus and tasks are in ``corpus`` whole already."""
    counts = eval_set_counts(model, _opening(cfg), metrics)
    most = {
        "n_prose": len(prose_subset(MAX_GENERATED).sentences)
    }  # generated eval sets: up to MAX_GENERATED
    wide = corpus
    for _ in range(GROWTH_STEPS):
        scored = {eval_set: int(n.sum()) for eval_set, n in _eval_set_tokens(wide).items()}
        grown = {
            name: min(
                _grown(
                    count,
                    scored.get(_EVAL_SET_OF[name][model.causal], 0),
                    cfg.estimator_positions or 0,
                ),
                most.get(name, MAX_GENERATED),
            )
            for name, count in counts.items()
            if count
        }
        grown = {name: n for name, n in grown.items() if n > counts[name]}
        if not grown:
            break
        counts.update(grown)
        bigger = stage_corpus(model, cfg, metrics, counts=counts)
        if (
            bigger.n_tokens == wide.n_tokens
        ):  # every eval set that falls short has no further sequence
            break
        wide = bigger
    if cfg.estimator == "attribution":  # integrated gradients keeps no per-sequence gradient sums
        memory.check_estimator_terms(
            model.n_layers,
            model.n_heads,
            int(model.bridge.cfg.d_head),
            len(wide.items),
            "resample" in cfg.ablations,
            model.device,
        )
    return wide


GROWTH_STEPS = (
    4  # each step aims at the target from the positions per sequence seen; sv drops a few sentences
)
BOUNDED = ("n_prose",)  # built-in eval sets read from a shipped file, not generated
_EVAL_SET_OF = {
    "n_prose": {True: LOSS_PROSE, False: ENCODER},
    "n_repeated": {True: LOSS_REPEATED},
    "n_syntax": {True: SV_LOGIT_DIFF},
}


def _grown(count: int, scored: int, target: int) -> int:
    """Sequences that should hold ``target`` scored positions where ``count`` held ``scored`` (2% over,
    since an eval set may drop some of its new sequences); ``count`` where none of them was
    scorable."""
    if scored >= target or not scored:  # none fits this model: more of the same would not either
        return count
    return math.ceil(count * target / scored * 1.02)


def _eval_set_tokens(corpus: EvalCorpus) -> dict[str, Any]:
    """eval set -> scored positions per sequence (of its first metric)."""
    scored = sequence_tokens(corpus)
    return {eval_set: scored[eval_set_metrics(eval_set)[0]] for eval_set in corpus.sizes}


def corpus_facts(corpus: EvalCorpus) -> dict[str, dict[str, int]]:
    """eval set -> its sequences and scored positions, as the manifest records them."""
    scored = _eval_set_tokens(corpus)
    return {
        f: {"n_sequences": n, "n_scored": int(scored[f].sum())} for f, n in corpus.sizes.items()
    }


def _asked(cfg: AblateConfig, metric: str) -> int:
    """How many evaluation sequences the config asks for ``metric``'s eval set."""
    return getattr(
        cfg,
        {LOSS_REPEATED: "n_repeated", SV_LOGIT_DIFF: "n_syntax", SV_PROB: "n_syntax"}.get(
            metric, "n_prose"
        ),
    )


def measurable(metrics: tuple[str, ...], corpus: EvalCorpus, cfg: AblateConfig) -> tuple[str, ...]:
    """The metrics the corpus has sequences for. One whose sequences were asked for but none fits
    (a short context or a small vocabulary can empty an eval set) is dropped with a warning."""
    sizes = metric_sizes(corpus.sizes)
    empty = [m for m in metrics if not sizes.get(m)]
    unfit = [m for m in empty if _asked(cfg, m)]
    if unfit:
        warnings.warn(
            f"no evaluation sequence for {', '.join(unfit)} fits this model and tokenizer: not measured",
            stacklevel=3,
        )
    return tuple(m for m in metrics if m not in empty)


def scorable(metrics: tuple[str, ...], corpus: EvalCorpus, model: LoadedModel) -> tuple[str, ...]:
    """``metrics``, once each is known to have a position to score: a metric whose sequences
    have none (every target token beyond a small output vocabulary, a task without positions)
    stops the stage with one line naming it."""
    scored = sequence_tokens(corpus)
    for metric in metrics:
        if not scored[metric].sum():
            why = (
                f"has a target token among the model's {model.d_vocab_out} output logit(s)"
                if model.d_vocab_out < model.d_vocab
                else "gives it a position"
            )
            raise ConfigError(
                f"metric {metric} has no position to score: none of its {len(scored[metric])} "
                f"evaluation sequence(s) {why}; leave it out (--metric), or give it positions a model "
                f"with these output logits can score"
            )
    return metrics


def fit_memory(
    model: LoadedModel,
    cfg: AblateConfig,
    metrics: tuple[str, ...],
    corpus: EvalCorpus,
    grow: bool = False,
) -> tuple[AblateConfig, EvalCorpus]:
    """The config and corpus with a token budget per pass whose estimated peak memory fits (see
    interp.model.memory), grown to the free memory with ``grow``; the corpus is batched again
    when the budget changed."""
    pad = model.tokenizer.pad_token_id or 0
    # Copies per pass: at most a layer's heads (sweep) or the pruning steps, within the budget.
    steps = len(step_sizes(model.n_layers * model.n_heads, cfg.prune_step)) if cfg.prune else 0
    most = max(cfg.heads_per_pass or model.n_heads, steps)

    def shapes(budget: int) -> list[tuple[int, int, int, int]]:
        return [
            (len(b), b.tokens.shape[1], len(b.row_batch), min(most, pass_size(b, None, budget)))
            for b in make_batches(corpus.items, budget, pad)
        ]

    budget = memory.ablate_budget(
        memory.Shape.of(model), cfg.tokens_per_pass, shapes, model.device, grow=grow
    )
    if budget == cfg.max_tokens_per_batch:
        return cfg, corpus
    cfg = dataclasses.replace(cfg, max_tokens_per_batch=budget)
    return cfg, stage_corpus(model, cfg, metrics)


def in_tiers(
    corpus: EvalCorpus, bounds: list[dict[str, int]], max_tokens: int, pad_id: int
) -> EvalCorpus:
    """``corpus`` batched again so that no batch mixes tiers: each of ``bounds`` (metric's sequences
    -> how many of the first ones) closes a tier, a wider one after a narrower; the tiers' batches
    come first, in order, the other sequences' after them. AtP* computes its QK fix and GradDrop on
    the first sequences only and carries what they find to the rest."""
    edges = [*bounds, dict(corpus.sizes)]

    def tier(eval_set: str, index: int) -> int:
        return next(i for i, edge in enumerate(edges) if index < edge.get(eval_set, 0))

    groups: dict[int, list[EvalItem]] = {}
    for item in corpus.items:
        groups.setdefault(tier(item.eval_set, item.unit), []).append(item)
    batches = [b for i in sorted(groups) for b in make_batches(groups[i], max_tokens, pad_id)]
    return EvalCorpus(corpus.items, batches, corpus.sizes)

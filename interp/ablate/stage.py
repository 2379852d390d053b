"""Ablate stage: how much does the model need each attention head?

Each query head's output (``hook_z``) is replaced, alone, by its corpus mean (the default), zero
or its output on another sequence (:mod:`interp.ablate.values`), and the model is rerun on a small
evaluation corpus (:mod:`interp.ablate.evaluation`) to read metrics that do not depend on
attention patterns (:mod:`interp.ablate.metrics`): next-token loss on prose and on repeated
random tokens and subject-verb agreement for causal LMs; sentence-embedding drift and
retrieval for encoders. Every effect comes with a paired bootstrap interval over sequences.

Steps, each with a progress bar (with the bars off, one line on stderr as each finishes):

1. **estimate**: every head's effect estimated at once, by first-order attribution
   (:mod:`interp.ablate.attribution`, one forward and backward pass per batch; the default:
   it agrees best with exact ablation on the packaged models, benchmarks/estimators.py) or by
   integrated gradients over the clean -> ablated path (:mod:`interp.ablate.integrated`,
   ``ig_steps`` passes; it sees through a saturated downstream softmax, which attribution
   cannot); rows with ``estimator`` the estimator's name. With ``top_k`` both run
   (:mod:`interp.ablate.estimate`, which keeps the estimate for a resumed sweep).
2. **exact** (:mod:`interp.ablate.exact`, its passes :mod:`interp.ablate.sweep`): every head (or, with ``top_k``, each estimator's
   top k on each metric, their union, ties included, plus a random audit sample,
   :mod:`interp.ablate.selection`; the heads left out are listed in the summary)
   ablated and the model rerun from that head's layer on; with ``max_rounds > 1`` in rounds,
   only heads whose effect is not yet settled going on (:mod:`interp.ablate.sequential`).
3. **pruning** (:mod:`interp.ablate.prune`, its curves :mod:`interp.ablate.pruning`'s): per
   metric, heads removed cumulatively in that metric's order, least important first (by the
   effects above), measured on a held-out corpus of the same make-up, to one head near the
   1% / 5% crossings; the share of heads removable within each (either side of the intact
   value), with intervals, and how much a metric improved where it did; and every head of one
   role removed at once.

A task that names positions (:mod:`interp.ablate.tasks`) also gets the ``task_attention`` table:
every head's attention between its named positions (:mod:`interp.ablate.task_attention`).

:func:`role_effects` and :func:`surprises` relate the effects to the classifier's roles.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from interp.ablate import round_state
from interp.ablate.config import AblateConfig
from interp.ablate.corpora import (
    corpus_facts,
    fit_memory,
    measurable,
    scorable,
    stage_corpus,
    stage_metrics,
)
from interp.ablate.estimate import estimate_heads
from interp.ablate.evaluation import read_eval_corpus
from interp.ablate.exact import Sweep, exact_effects, rounds_budget
from interp.ablate.executor import SWEEP
from interp.ablate.forward import Ablator
from interp.ablate.phases import done, timed
from interp.ablate.prune import prune
from interp.ablate.removable import improved
from interp.ablate.selection import (
    WIDENED,
    annotate,
    audit_summary,
    choose,
    flag_estimates,
    never_exact,
    reserve,
)
from interp.ablate.surprises import role_effects, surprises
from interp.ablate.task_attention import task_attention
from interp.classify.evidence import Evidence
from interp.classify.stage import classify
from interp.errors import RunError
from interp.executors.choice import check_executor, open_executor
from interp.executors.threads import choose_threads, stage_threads
from interp.model.load import LoadedModel
from interp.model.spec import DType
from interp.pipeline import rundir
from interp.pipeline.contract import StageRecord, loaded
from interp.pipeline.tables import EFFECTS, PRUNING

__all__ = [
    "AblateConfig",
    "AblateResult",
    "ablate",
    "role_effects",
    "run_stage",
    "surprises",
    "write",
]


@dataclass
class AblateResult:
    effects: pd.DataFrame  # the `effects` table
    pruning: pd.DataFrame  # the `pruning` table (empty when prune=False)
    timings: dict[str, float]  # seconds per step, plus per-head and per-pass figures
    summary: dict[str, Any] = field(
        default_factory=dict
    )  # corpus sizes, removable fractions, settings used
    task_attention: pd.DataFrame | None = (
        None  # the `task_attention` table; None: no task names positions
    )


def ablate(
    model: LoadedModel,
    config: AblateConfig = AblateConfig(),
    progress: bool = True,
    roles: pd.DataFrame | None = None,
    state_dir: Path | None = None,
) -> AblateResult:
    """Measure every head's effect (exact and/or estimated) and the pruning curves; with a
    ``roles`` table, also the curves that remove every head of one role. With ``state_dir`` (a
    run directory), the exact sweep keeps its state there after each round and continues a
    stopped sweep of the same config and corpus (:mod:`interp.ablate.round_state`)."""
    grow = (
        config.max_tokens_per_batch is None and model.device != "cpu"
    )  # an accelerator's memory sets the pass
    cfg = config.resolved(model.n_layers * model.n_heads)
    metrics = stage_metrics(model, cfg)
    timings: dict[str, float] = {}
    with timed(timings, "total"), _in_dtype(model, cfg.dtype) as m:
        with timed(timings, "corpus"):
            corpus = stage_corpus(m, cfg, metrics)
            cfg, corpus = fit_memory(m, cfg, metrics, corpus, grow)
        metrics = scorable(measurable(metrics, corpus, cfg), corpus, m)
        done(progress, f"evaluation corpus {corpus.n_tokens} tokens", timings["corpus"])
        with timed(
            timings, "task_attention"
        ):  # where heads attend between the tasks' named positions
            attention = task_attention(
                m,
                tuple(t for t in cfg.tasks if t.name in metrics),
                cfg.n_bootstrap,
                cfg.seed,
                cfg.tokens_per_pass,
            )
        ablator = Ablator(m)
        with timed(timings, "threads"):
            threads = choose_threads(cfg.threads)
        done(progress, f"thread count ({threads})", timings["threads"])
        with stage_threads(threads.n):
            run = Sweep(
                ablator,
                corpus,
                cfg,
                metrics,
                threads.n,
                state_dir,
                by_run=config.time_budget is None and not config.precise,
                widen=config.quick and config.top_k is None,
            )
            effects, pruning, found = _measure(run, roles, timings, progress)
    summary = {
        "corpus": corpus_facts(corpus),
        "n_tokens": corpus.n_tokens,
        "metrics": list(metrics),
        **found,
        "never_exact": never_exact(effects, model.n_layers, model.n_heads),
        "improved": {
            metric: by for metric in metrics if (by := improved(pruning, metric)) is not None
        },
        "threads": threads.n,
        "estimator": cfg.estimator if cfg.attribution or cfg.top_k else None,
        "audit": audit_summary(effects),
        "resolved_config": dataclasses.asdict(cfg),
    }
    return AblateResult(
        effects, PRUNING.validate(PRUNING.finite(pruning)), timings, summary, attention
    )


def _measure(
    run: Sweep,
    roles: pd.DataFrame | None,
    timings: dict[str, float],
    progress: bool,
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Estimates, the exact sweep and the pruning curves: (effects, pruning, summary facts:
    exact heads, layer reuse, the rounds' budget, removable shares with their intervals)."""
    ablator, corpus, cfg, metrics = run.ablator, run.corpus, run.cfg, run.metrics
    estimated = estimate_heads(ablator, corpus, cfg, metrics, timings, progress, run.state_dir)
    estimates, means = estimated.rows, estimated.means
    if estimates is not None:
        check_measured(estimates)
    model = ablator.model
    every = [(layer, head) for layer in range(model.n_layers) for head in range(model.n_heads)]
    chosen = choose(every, estimates, cfg.top_k, cfg.audit, cfg.ablations[0], metrics, cfg.seed)
    heads = sorted(chosen)
    later = (
        reserve(every, estimates, cfg.top_k, cfg.ablations[0], metrics, set(chosen))
        if run.widen and cfg.top_k is not None and len(chosen) < len(every)
        else []
    )
    placed = open_executor(
        cfg, ablator.model, run.threads, cfg.dtype, model.n_layers, {SWEEP.name: ablator}
    )
    budget = rounds_budget(cfg, run.by_run)
    with timed(timings, "exact"), placed as executor:
        exact, reused, log = exact_effects(run, heads, means, executor, progress, budget, later)
    # round 0 measures every chosen head, so the measured ones are those and any that joined
    measured = set(zip(exact["layer"].astype(int), exact["head"].astype(int)))
    chosen |= {h: WIDENED for h in measured - set(chosen)}
    heads = sorted(measured)
    timings["exact_per_head"] = timings["exact"] / max(len(heads) * len(cfg.ablations), 1)
    done(progress, f"exact sweep {len(heads)} heads", timings["exact"])
    primary = None if estimates is None else estimates[estimates["estimator"] == cfg.estimator]
    effects = _finish_effects(
        [flag_estimates(estimates, exact), annotate(exact, primary, chosen)], metrics
    )
    check_measured(effects)
    pruning, shares = pd.DataFrame(columns=PRUNING.names), dict[str, Any]()
    if cfg.prune:
        with timed(timings, "pruning"):
            pruning, shares = prune(ablator, effects, cfg, metrics, means, roles, progress)
        done(progress, f"pruning {len(shares)} metric(s)", timings["pruning"])
    return (
        effects,
        pruning,
        {
            **estimated.facts,
            "exact_heads": len(heads),
            "exact_budget": budget,
            "layer_reuse": reused,
            "rounds": log,
            "executor": executor.record(),
            "removable": shares,
        },
    )


def check_measured(effects: pd.DataFrame) -> None:
    """RunError when the intact model's metrics are NaN or infinite (its output is: a NaN weight
    of a model built in Python, an overflow in half precision). A sequence whose metric is NaN
    counts as not measured (interp.ablate.stats), so such a model would leave an effects table
    with no row, or rows that mean nothing, instead of failing."""
    lost = (
        effects.empty or "baseline" not in effects.columns or bool(effects["baseline"].isna().all())
    )
    if lost:
        raise RunError(
            "the model's output is NaN or infinite on the evaluation corpus: no effect can be measured; "
            "check the weights, or load the model with --dtype float32 if it overflows in half precision"
        )


def write(run_dir: Path, result: AblateResult) -> None:
    """Write the ``effects`` and ``pruning`` tables into the run, and ``task_attention`` when a
    task names positions (else an earlier run's copy goes: it would describe other tasks)."""
    rundir.write_table(run_dir, "effects", result.effects)
    rundir.write_table(run_dir, "pruning", result.pruning)
    if result.task_attention is not None:
        rundir.write_table(run_dir, "task_attention", result.task_attention)
    else:
        rundir.remove_table(run_dir, "task_attention")


def check_inputs(config: AblateConfig) -> None:
    """Read the evaluation corpus now, and check that the executor can run here, so that a bad
    one fails before the model loads."""
    check_executor(config)
    if config.eval_corpus:
        read_eval_corpus(config.eval_corpus)


@dataclass(frozen=True)
class AblateRecord(StageRecord):
    """What the manifest records about an ablate run (the report and ``--from-manifest`` read it)."""

    timings: dict[str, float]  # seconds per step, plus per-head and per-pass figures
    corpus: dict[
        str, dict[str, int]
    ]  # the exact sweep's corpus: per eval set, sequences and scored positions
    n_tokens: int  # tokens of that corpus
    metrics: list[str]  # the metrics measured
    exact_heads: int  # heads ablated exactly
    layer_reuse: bool  # whether every sweep reused the layers below the ablated head
    rounds: list[dict[str, int]]  # per round of the sequential sweep, the heads it ran per eval set
    executor: dict[str, Any]  # where the sweep ran: the executor, its workers, each shard's time
    removable: dict[str, Any]  # per metric and tolerance, the share of heads removable (interval)
    never_exact: list[str]  # the heads with estimates only, as L{layer}H{head}
    improved: dict[str, Any]  # per metric that got better as heads were removed: by how much, where
    threads: int  # torch threads the sweep ran on (its sums depend on it in the 8th digit)
    estimator: str | None  # the estimator of every head's effect, if one ran
    audit: dict[str, Any]  # the estimators against the exact effects of the heads both measured
    resolved_config: dict[str, Any]  # the settings used (quick sizes, pass size filled in)
    estimator_corpus: dict[str, dict[str, int]] | None = None  # what the estimator read, if more
    exact_budget: float | None = None  # seconds the exact rounds had (None: no limit)


def run_stage(
    run_dir: Path,
    model: LoadedModel | None,
    config: AblateConfig = AblateConfig(),
    progress: bool = True,
) -> AblateRecord:
    """The ablate stage of a run: measure, write, and hand the timings and corpus facts to the manifest.

    The classify stage runs after this one (its task roles read these effects), so the curves
    that remove every head of one role read the roles the shipped classifier gives from what the
    run has measured so far (features, weights): :func:`pruning_roles`."""
    result = ablate(
        loaded(model, "ablate"), config, progress, roles=pruning_roles(run_dir), state_dir=run_dir
    )
    write(run_dir, result)
    round_state.remove(run_dir)  # the tables hold what the rounds measured
    timings = {k: round(v, 3) for k, v in result.timings.items()}
    return AblateRecord(timings=timings, **result.summary)


def pruning_roles(run_dir: Path) -> pd.DataFrame | None:
    """The roles of the run's heads by their features and weights (no task roles: those need the
    effects this stage measures), for the curves that remove every head of one role; None when
    the run has no features table."""
    features = rundir.read_table(run_dir, "features")
    if features is None:
        return None
    evidence = Evidence.read(run_dir)
    evidence.effects = evidence.task_attention = None  # an earlier run's: not this one's
    causal = (rundir.read_manifest(run_dir).get("model") or {}).get("causal")
    return classify(
        features,
        sinks=rundir.read_table(run_dir, "sinks"),
        causal=causal if isinstance(causal, bool) else None,
        evidence=evidence,
    ).roles


# --- helpers -------------------------------------------------------------------------------


def _finish_effects(frames: list[pd.DataFrame | None], metrics: tuple[str, ...]) -> pd.DataFrame:
    frames = [f for f in frames if f is not None and len(f)]
    if not frames:
        return pd.DataFrame(columns=EFFECTS.names)
    effects = pd.concat(frames, ignore_index=True)
    effects = effects[effects["metric"].isin(metrics)]
    effects = effects.astype({"layer": int, "head": int})
    if "graddrop" not in effects:  # only AtP* computes it; the table always has the column
        effects = effects.assign(graddrop=float("nan"))
    effects = effects.sort_values(
        ["estimator", "ablation", "metric", "layer", "head"], kind="stable"
    )
    return EFFECTS.validate(EFFECTS.finite(effects.reset_index(drop=True)))


@contextlib.contextmanager
def _in_dtype(model: LoadedModel, dtype: DType | None) -> Iterator[LoadedModel]:
    """The model itself, or a converted copy when the stage asks for another dtype (the
    caller's model is never cast in place: bf16 -> fp32 would not give the weights back)."""
    current = str(next(model.bridge.parameters()).dtype).removeprefix("torch.")
    if dtype is None or dtype == current:
        yield model
        return
    from interp.model.load import check_dtype

    bridge = copy.deepcopy(model.bridge).to(check_dtype(model.device, dtype))
    try:
        yield dataclasses.replace(model, bridge=bridge, dtype=dtype)
    finally:
        del bridge

"""The ablate stage's config: which ablations, metrics and heads, on what, how precisely."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from interp.ablate.catalogue import CORPUS, ESTIMATORS, KINDS, METRICS, Estimator, Kind
from interp.ablate.tasks import Task
from interp.collect.config import (  # the same caps as collect's probes
    MAX_GENERATED,
    require_repeated_lengths,
)
from interp.config import MAX_INT, config, option, require
from interp.executors.placement import Placement
from interp.model.spec import DType

QUICK_ABLATE_SIZES = {"n_prose": 3, "n_repeated": 3, "n_syntax": 8}
QUICK_BOOTSTRAP = 200
QUICK_TOP_SHARE = 0.02  # quick mode: exact ablation of the 2% of heads each estimator ranks highest on each metric,
QUICK_MIN_HEADS = 5  # but at least 5 per list (a tiny model's circuit has more than one head)
AUDIT_SHARE = 0.25  # with top_k: a random sample of a quarter as many other heads (at least one), to audit the estimator
QUICK_PRUNE_STEP = 0.1
CPU_TOKENS_PER_PASS = (
    2048  # the ablate stage's pass on a CPU, and where an accelerator's pass starts growing
)
# The sequential sweep is on by default: heads still open after a round get new sequences, those
# whose effect contends for the 20 largest of a metric first (interp.ablate.sequential). Its
# rounds are as large as the default corpus, and the time budget, not this count, ends them: on
# SmolLM2 the largest effects need 5 to 100 times the positions of 3 rounds (the projection of
# interp.ablate.settle.positions_needed), and prose holds 33 rounds of lines.
DEFAULT_ROUNDS = 50
# The estimators and the heads' means read the sequences of the first rounds only: a pass over a
# corpus made for every round would cost what the rounds cost.
ESTIMATE_ROUNDS = 3
# The precision rule of the exact rounds (interp.ablate.sequential): an important head's interval
# half-width, relative to its effect (--precision), or this much absolute (nats, logits), whichever
# is larger
REL_PRECISION = 0.10
ABS_PRECISION = 0.01
# Shortest job first: an open effect among the largest of its metric that would meet the precision rule
# with at most this many times its positions gets the next round before the others (each head reads its
# own next sequences, so the heads that wait lose none; interp.ablate.sequential). On SmolLM2's default
# run (one seed) the top 20 met per metric were 1/0/2/0/10 with 2 and 3/0/3/0/12 with 4 (kl_prose,
# loss_prose, loss_repeated, sv_logit_diff, sv_prob; 0/0/0/0/7 with no such tier)
REACH = 4.0
# quick mode: seconds of exact sweep, what its rounds took on SmolLM2 when they were 3. A round
# that would end after them runs the heads that fit (interp.ablate.round_budget), so the rounds
# end within it but for round 0: benchmarks/run_time.py records the whole --quick run's time
QUICK_BUDGET = 35.0
# Scored positions per metric the stage's estimator reads where it chooses the heads that are ablated exactly
# (--top-k): enough that its ranking is not sampling noise. Attribution's cost grows with the tokens read, and
# sv_logit_diff reads one position per sentence, so --quick reads fewer, to stay within its 3 minutes
# (benchmarks/run_time.py). A full sweep measures every head exactly, so its estimator reads the sweep's
# own corpus: the minutes go to the exact rounds instead (docs/concepts/effects.md).
ESTIMATOR_POSITIONS = 4000
QUICK_ESTIMATOR_POSITIONS = 200
# AtP*'s QK fix and GradDrop cost several passes per token (interp.ablate.atp_star): they read the
# first sequences of each eval set only, and the rest of them take the same correction per position.
QK_POSITIONS = 300
GRADDROP_POSITIONS = 50
QUICK_IG_STEPS = 2  # quick mode's second opinion: integrated gradients over 2 path points (recall as 4 on the toys)
MAX_ROUNDS = (
    1000  # rounds of the sequential sweep: each adds sequences, so this is far beyond any budget
)
DEFAULT_BUDGET = 300.0  # seconds of exact sweep: a round that would end after them is trimmed
# Under a default `interp run` (no --time-budget, not --precise) the exact rounds also leave the
# run its RUN_TARGET seconds on a slower machine than the one the budget was set on: they stop
# once what the run has taken before them, and AFTER_SWEEP times that again for the stages after
# them (pruning, classify, report), would pass it. On SmolLM2's default run the stages after the
# rounds took 0.9 times those before them on a 2-core Xeon (120 s after, 129 s before) and 1.3
# times on a 2-core EPYC (79 s, 61 s; benchmarks/run_time.py).
RUN_TARGET = 600.0
AFTER_SWEEP = 1.5
# --precise: rounds of the exact sweep, with no time budget, until no effect is open. An interval's
# half-width shrinks as one over the square root of the sequences it rests on. After 100 slices,
# SmolLM2's unmet top-20 effects on the generated eval sets needed at most 2.5x (loss_repeated) and
# 2.9x (sv_logit_diff) their positions (benchmarks/precise_run.py, 2026-12-07): the generated eval
# sets are made PRECISE_ROUNDS slices large, 3.2 times that. An effect still undecided
# against the tolerance after PRECISE_DECIDE slices stops there (one whose true value sits on the
# tolerance never decides): the slices beyond go to effects decided but not yet precise. Prose stops
# earlier: its lines are bounded, and its open effects then say ``corpus``.
PRECISE_ROUNDS = 320
PRECISE_DECIDE = 100


def exact_budget(time_budget: float | None, run_elapsed: float | None) -> float | None:
    """Seconds the exact rounds may take: ``time_budget`` (None: no limit), and where the run's
    clock counts (``run_elapsed``: seconds the run has taken before the rounds; None when the
    rounds are not a default run's) no more than leaves the run within ``RUN_TARGET``: never
    below 0 (round 0 runs in full whatever the budget)."""
    if time_budget is None or run_elapsed is None:
        return time_budget
    return max(0.0, min(time_budget, RUN_TARGET - (1 + AFTER_SWEEP) * run_elapsed))


@config
class AblateConfig(Placement):
    """How heads are ablated and on what.

    The default evaluation corpus is deliberately small: an exact sweep reruns (on average
    half of) the model once per head, 270 times for SmolLM2, and on a 2-core CPU that is
    compute-bound at ~15-20 GFLOP/s, i.e. about 1 s per 100 tokens per full forward. It holds
    6 prose lines, 6 repeated-token sequences (10 random tokens, twice) and 16 syntax prefixes:
    392 tokens (425 padded, 7 batches) for SmolLM2, enough for bootstrap intervals over 6-16
    sequences per metric (see interp/ablate/evaluation.py for what each metric measures).
    """

    # mean by default: it removes what a head says about *this* input and keeps its constant part,
    # which zero ablation also removes (doubling the median effect on SmolLM2, and changing which
    # heads rank top); resample does the same as mean but is noisier on a small corpus
    # (benchmarks/ablation_kinds.py; docs/concepts/effects.md).
    ablations: tuple[Kind, ...] = option(default=("mean",), flag="--ablation")
    """ablation kind (repeatable; the first orders the pruning curve)"""
    metrics: tuple[str, ...] | None = option(default=None, flag="--metric")
    """metric to measure (repeatable; the first orders the pruning curve); default: all of the model's kind"""
    n_prose: int = option(default=6, ge=0, le=MAX_GENERATED)
    """prose lines (every second line of the shipped corpus)"""
    n_repeated: int = option(default=6, ge=0, le=MAX_GENERATED)
    """repeated-random-token sequences (causal only)"""
    repeated_lengths: tuple[int, ...] = option(default=(10,), flag="--repeated-length")
    """length of the random half of a repeated-token sequence (repeatable)"""
    n_syntax: int = option(default=16, ge=0, le=MAX_GENERATED)
    """syntax sentences for subject-verb agreement (causal only)"""
    eval_corpus: str | None = option(default=None, file=True)
    """your own evaluation sequences (.txt one a line, .jsonl / .csv a text field): a causal LM adds the metric
    loss_corpus (first: it orders the pruning curve), an encoder reads them instead of the prose"""
    tasks: tuple[Task, ...] = option(default=(), cli=False)
    """your own metrics, in Python (interp.Task); causal LMs only"""
    max_tokens_per_batch: int | None = option(default=None, ge=1, le=MAX_INT)
    """padded tokens per forward pass (batch x stacked heads); default: 2048 on a CPU, on an accelerator as many as
    its free memory holds (interp.model.memory); lower it when memory is short"""
    dtype: DType | None = option(default=None, cli=False)
    """run the ablations in this dtype instead of the model's (on the command line: the stage's --dtype, which loads
    the model in that dtype)"""
    top_k: int | None = option(default=None, ge=1, le=MAX_INT)
    """exact ablation only for the heads among the k that attribution or integrated gradients rank highest on some
    metric (the union; ties at the k-th included), plus a random audit sample"""
    attribution: bool = option(default=True)
    """estimate every head with the estimator (always on with top_k)"""
    estimator: Estimator = option(default=ESTIMATORS[0])
    """how every head's effect is estimated: attribution (first order), integrated (integrated
    gradients) or atp_star (attribution with the QK fix and GradDrop: it sees effects that run
    through a later head's attention)"""
    estimator_positions: int | None = option(default=None, ge=0, le=MAX_INT)
    """scored positions per metric the estimator reads at least: the exact sweep's sequences and more of each built-in
    metric's (prose stops at the lines its half holds; your own corpus and tasks are read whole); 0: the exact sweep's
    corpus; default: 4000 with --top-k, 200 with --quick, 0 for a full sweep (every head is measured exactly)"""
    qk_positions: int = option(default=QK_POSITIONS, ge=0, le=MAX_INT)
    """atp_star: scored positions per metric on which the QK fix is computed (the first sequences;
    the others take the same correction per position); 0: none"""
    graddrop_positions: int = option(default=GRADDROP_POSITIONS, ge=0, le=MAX_INT)
    """atp_star: scored positions per metric on which the GradDrop score is computed (about
    n_layers / 2 extra backward passes per batch); 0: none"""
    ig_steps: int = option(default=4, ge=1, le=MAX_INT)
    """integrated gradients: path points (one forward + backward each)"""
    audit: int | None = option(default=None, ge=1, le=MAX_INT)
    """with top_k: heads ablated exactly at random besides the top ones, always at least one; default: a quarter as
    many as the top ones"""
    max_rounds: int | None = option(default=None, ge=1, le=MAX_ROUNDS)
    """exact sweep over up to this many slices of new evaluation sequences, each head reading its next one while its
    effect is not yet settled (interval vs the tolerance, precision), those contending for the 20 largest of a metric
    first, nearest the rule first; 1: one sweep of every chosen head; default: 50 (the time budget ends a default run
    first), 100 with --precise"""
    time_budget: float | None = option(default=None, gt=0, le=1e9)
    """seconds the exact sweep may spend: a round that would end after them runs only the heads that fit, the
    nearest the precision rule first (round 0 always runs in full); default: 300,
    less where a default interp run would pass 10 minutes, no limit with --precise"""
    precision: float = option(default=REL_PRECISION, gt=0, le=1, allow_inf_nan=False)
    """the precision rule of the exact rounds: a head that matters, or ranks among the 20 largest
    effects of a metric, goes on to the next round until its interval's half-width is at most
    max(P x |effect|, 0.01) (0 < P <= 1); with more --max-rounds and --time-budget, a smaller P
    buys narrower intervals, and each row's precision column says whether it was met"""
    precise: bool = option(default=False)
    """run the exact rounds until no effect is open (the precision rule met, every head decided
    against the tolerance), with no time budget and up to 320 rounds unless --time-budget or
    --max-rounds says otherwise; an effect still undecided after 100 stops there"""
    heads_per_pass: int | None = option(default=None, ge=1, le=MAX_INT)
    """heads of a layer per forward (stacked batch copies); default: all that fit"""
    prune: bool = option(default=True)
    """compute the pruning curve"""
    prune_step: float | None = option(default=None, gt=0, le=1)
    """share of heads removed per pruning step; default: 1 head (<= 64 heads) or 5%"""
    n_bootstrap: int = option(default=1000, ge=10, le=MAX_INT)
    """bootstrap replicates of the effect intervals"""
    quick: bool = option(default=False, cli=False)
    """sized by --quick (:meth:`for_quick`: small evaluation corpus, a 35 s time budget for its rounds, 10% pruning
    steps); then exact ablation only of the top 2% (at least 5) per metric and estimator, estimated on 200 positions
    per metric, and of the heads they rank next while the time budget lasts"""
    seed: int = option(default=0, ge=0, le=MAX_INT)
    """seed of the evaluation sequences, the audit sample and the bootstrap"""

    def __post_init__(self) -> None:
        super().__post_init__()
        require(
            self,
            "ablations",
            bool(self.ablations) and len(set(self.ablations)) == len(self.ablations),
            f"distinct kinds among {', '.join(KINDS)}",
        )
        known = METRICS + tuple(t.name for t in self.tasks)
        require(
            self,
            "metrics",
            self.metrics is None or (bool(self.metrics) and all(m in known for m in self.metrics)),
            f"None or a non-empty subset of {', '.join(known)}",
        )
        require(
            self,
            "metrics",
            CORPUS not in (self.metrics or ()) or bool(self.eval_corpus),
            f"without {CORPUS} unless an eval_corpus is given (--eval-corpus FILE)",
        )
        require_repeated_lengths(self)

    def for_quick(self, keep: tuple[str, ...] = ()) -> AblateConfig:
        """The config under ``interp run --quick``: a small evaluation corpus, fewer bootstrap
        replicates and integrated-gradient points, a short time budget and 10% pruning steps,
        except for the fields in ``keep`` (set by the user). How many heads are ablated exactly
        depends on the model, so :meth:`resolved` chooses it."""
        smaller: dict[str, Any] = {
            k: min(getattr(self, k), v) for k, v in QUICK_ABLATE_SIZES.items()
        }
        smaller |= {
            "n_bootstrap": min(self.n_bootstrap, QUICK_BOOTSTRAP),
            "ig_steps": min(self.ig_steps, QUICK_IG_STEPS),
            "prune_step": self.prune_step or QUICK_PRUNE_STEP,
        }
        if not self.precise:  # --precise asks for no time budget: --quick only sizes its rounds
            smaller["time_budget"] = min(self.time_budget or QUICK_BUDGET, QUICK_BUDGET)
        return self.replaced(smaller, keep).replaced({"quick": True})

    @classmethod
    def run_wide(cls, seed: int | None, builtin: bool) -> dict[str, Any]:
        """``--seed`` seeds the evaluation sequences, the audit sample and the bootstrap."""
        return {"seed": seed} if seed is not None else {}

    @property
    def random_seed(self) -> int:
        return self.seed

    @property
    def tokens_per_pass(self) -> int:
        """Padded tokens per forward pass: the configured budget, else a CPU's (what
        :meth:`resolved` fills in)."""
        return self.max_tokens_per_batch or CPU_TOKENS_PER_PASS

    @property
    def n_rounds(self) -> int:
        """Rounds of the exact sweep: ``max_rounds``, else ``DEFAULT_ROUNDS`` (``PRECISE_ROUNDS``
        under ``precise``)."""
        return self.max_rounds or (PRECISE_ROUNDS if self.precise else DEFAULT_ROUNDS)

    def resolved(self, n_heads: int) -> AblateConfig:
        """The settings actually used: the pass size filled in (2048 where none is configured),
        the estimator's corpus, the rounds and time budget of the exact sweep (under ``precise``
        ``PRECISE_ROUNDS`` rounds and no limit, where the user set neither), and under ``quick`` the heads
        ablated exactly (the top 2%, at least 5, of a model with ``n_heads`` heads) unless
        ``top_k`` is set. In the settings used, ``time_budget`` None means no limit."""
        filled: dict[str, Any] = {}
        if self.max_rounds is None:
            filled["max_rounds"] = self.n_rounds
        if self.time_budget is None and not self.precise:
            filled["time_budget"] = DEFAULT_BUDGET
        if (
            self.max_tokens_per_batch is None
        ):  # an accelerator's pass grows from here (interp.ablate.stage)
            filled["max_tokens_per_batch"] = CPU_TOKENS_PER_PASS
        if self.estimator_positions is None:
            filled["estimator_positions"] = (
                QUICK_ESTIMATOR_POSITIONS
                if self.quick
                else ESTIMATOR_POSITIONS
                if self.top_k
                else 0
            )
        if self.quick and self.top_k is None:
            filled["top_k"] = max(QUICK_MIN_HEADS, math.ceil(QUICK_TOP_SHARE * n_heads))
        return dataclasses.replace(self, **filled) if filled else self

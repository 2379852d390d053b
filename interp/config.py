"""Every configuration of the toolkit, in one place: the model spec, one frozen dataclass per
pipeline stage, and the options of a whole run.

They validate in ``__post_init__`` (ValueError, never assert), use None for "not set", and are
plain data: the manifest records them with ``dataclasses.asdict`` and ``--resume`` compares them.
A field whose metadata has ``cli`` becomes an option of that stage's command (``interp classify
RUN_DIR --refit``, ...): the CLI builds those options from here, so a new field is one line.
Versions of what a stage computes are config fields (``features_version``,
``reference_version``), so a run made under another definition never counts as done.

Nothing here imports torch: the report stage and ``interp --help`` stay light.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from interp.ablation.catalogue import CORPUS, ESTIMATORS, KINDS, METRICS
from interp.ablation.tasks import Task
from interp.errors import ConfigError
from interp.reference import REFERENCE_VERSION

# float16 needs a device with float16 kernels: any CUDA GPU; on a CPU torch 2.13 runs it too
# (measured: benchmarks/dtype_speed.py), only slowly.
DTYPES = ("float32", "bfloat16", "float16")
# A run name is one path component: no separators, no leading dot (hidden, or '..').
RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# Bump when a feature's definition changes (interp/features.py), so that a run collected under
# the old definitions is neither resumed nor classified as if it meant the new ones (2: the
# syntactic baseline also takes word positions and word forms; 3: features read the attention
# renormalised over the non-sink keys, broad over the content keys, duplicate_token and
# induction set the query itself aside, local needs content beyond its window, positional
# features, a sink_mass column).
FEATURES_VERSION = 3


def cli(flag: str, help: str, **click_kwargs: Any) -> dict[str, Any]:
    """Field metadata that makes a config field an option of its stage's command."""
    return {"cli": flag, "help": help, **click_kwargs}


def require(config: Any, name: str, ok: bool, rule: str) -> None:
    """Raise ConfigError "<field> must be <rule>, got <value>" (naming the option, where the field
    has one) unless ``ok``."""
    if ok:
        return
    flag = next((f.metadata["cli"] for f in dataclasses.fields(config) if f.name == name and "cli" in f.metadata), None)
    value = getattr(config, name)
    shown = list(value) if isinstance(value, tuple) else value
    raise ConfigError(f"{name} must be {rule}, got {shown!r}" + (f" (option {flag})" if flag else ""))


@dataclass(frozen=True)
class ModelSpec:
    """Which model to load: a packaged name, a local HF directory, a .gguf file or a Hub name."""

    name: str = "smollm2-135m"
    device: str = "cpu"
    dtype: str = "float32"
    causal: bool | None = None  # None: measured on the model (interp.models); True/False: --causal/--bidirectional

    def __post_init__(self) -> None:
        require(self, "name", bool(self.name), "a model name, path or Hub id")
        require(self, "dtype", self.dtype in DTYPES, f"one of {', '.join(DTYPES)}")


@dataclass(frozen=True)
class CollectConfig:
    """How attention patterns are gathered and turned into features."""

    suites: tuple[str, ...] = ("prose", "repeated", "syntax")
    corpora: tuple[str, ...] = field(default=(), metadata=cli(
        "--corpus", "extra probe corpus: .txt, .jsonl, .csv or .conllu (repeatable)"))
    text_column: str | None = field(default=None, metadata=cli(
        "--text-column", "field / column holding the text in a .jsonl or .csv corpus"))
    n_repeated: int = 64  # repeated-random-token sequences
    repeated_lengths: tuple[int, ...] = (16, 24, 32)  # length of the random half
    n_syntax: int = field(default=800, metadata=cli("--n-syntax", "generated syntax sentences"))
    max_sentences: int | None = field(default=None, metadata=cli(
        "--max-sentences", "use at most this many sentences of the prose suite and of each corpus"))
    max_tokens_per_batch: int = field(default=4096, metadata=cli(
        "--max-tokens-per-batch", "padded tokens per forward pass: lower it when memory is short"))
    max_seq_len: int | None = field(default=None, metadata=cli(
        "--max-seq-len", "truncate probes longer than this (with a warning)"))
    local_window: int = 3
    n_bootstrap: int = 200
    exemplar_tokens: int = 32  # exemplar probes are cut to this many tokens (the report draws them)
    seed: int = 0
    features_version: int = FEATURES_VERSION

    def __post_init__(self) -> None:
        require(self, "n_repeated", self.n_repeated >= 0, ">= 0")
        require(self, "n_syntax", self.n_syntax >= 0, ">= 0")
        require(self, "repeated_lengths", bool(self.repeated_lengths) and min(self.repeated_lengths) >= 2, "lengths >= 2")
        require(self, "max_sentences", self.max_sentences is None or self.max_sentences >= 1, ">= 1")
        require(self, "max_tokens_per_batch", self.max_tokens_per_batch >= 1, ">= 1")
        require(self, "local_window", self.local_window >= 1, ">= 1")
        require(self, "n_bootstrap", self.n_bootstrap >= 10, ">= 10")
        require(self, "max_seq_len", self.max_seq_len is None or self.max_seq_len >= 2, ">= 2")
        require(self, "exemplar_tokens", self.exemplar_tokens >= 2, ">= 2")

    def quick(self, keep: tuple[str, ...] = ()) -> CollectConfig:
        """A smaller probe set for --quick: the same features on fewer sequences. Fields named in
        ``keep`` (the ones a user set explicitly) stay as they are: a flag wins over --quick."""
        smaller = {"n_repeated": min(self.n_repeated, 32), "n_syntax": min(self.n_syntax, 300),
                   "max_sentences": min(self.max_sentences or 120, 120), "n_bootstrap": min(self.n_bootstrap, 100)}
        return dataclasses.replace(self, **{k: v for k, v in smaller.items() if k not in keep})


@dataclass(frozen=True)
class ClassifyConfig:
    """How heads are labelled.

    refit: rebuild the reference bank and refit the classifier first (about a minute); the model
        and its bank are written into the run directory and used instead of the shipped one.
    reference: a fitted model JSON file; None: the shipped default model (or the refit one).
    reference_version: the reference version the model file must carry (provenance; a run
        classified with another bank does not count as done on ``--resume``).
    second_min_lift: overrides the model's threshold for reporting a second role (None: keep it).
    max_replicates: use at most this many bootstrap replicates for stability (None: all).
    cluster_distance: Euclidean distance (in standard deviations) below which unexplained heads
        are merged; None: the number of groups with the best silhouette.
    min_cluster_size: smallest group of unexplained heads reported.
    """

    refit: bool = field(default=False, metadata=cli(
        "--refit", "rebuild the reference bank and refit the classifier first", is_flag=True))
    reference: str | None = None
    reference_version: str = REFERENCE_VERSION
    second_min_lift: float | None = None
    max_replicates: int | None = None
    cluster_distance: float | None = None
    min_cluster_size: int = 2

    def __post_init__(self) -> None:
        require(self, "reference_version", bool(self.reference_version), "a version string")
        require(self, "second_min_lift", self.second_min_lift is None or 0.0 <= self.second_min_lift <= 1.0,
                "in [0, 1] or None")
        require(self, "max_replicates", self.max_replicates is None or self.max_replicates >= 1, ">= 1 or None")
        require(self, "cluster_distance", self.cluster_distance is None or self.cluster_distance > 0, "> 0 or None")
        require(self, "min_cluster_size", self.min_cluster_size >= 2, ">= 2")


QUICK_ABLATE_SIZES = {"n_prose": 3, "n_repeated": 3, "n_syntax": 8}
QUICK_TOP_SHARE = 0.05  # quick mode: exact ablation of the 5% of heads the estimators rank highest,
QUICK_MIN_HEADS = 4  # but at least 4 (a tiny model's circuit has more than one head)
AUDIT_SHARE = 0.25  # with top_k: a random sample of a quarter as many other heads, to audit the estimator
QUICK_PRUNE_STEP = 0.1


@dataclass(frozen=True)
class AblateConfig:
    """How heads are ablated and on what.

    The default evaluation corpus is deliberately small: an exact sweep reruns (on average
    half of) the model once per head, 270 times for SmolLM2, and on a 2-core CPU that is
    compute-bound at ~15-20 GFLOP/s, i.e. about 1 s per 100 tokens per full forward. It holds
    6 prose lines, 6 repeated-token sequences (10 random tokens, twice) and 16 syntax prefixes:
    392 tokens (425 padded, 7 batches) for SmolLM2, enough for bootstrap intervals over 6-16
    sequences per metric (see interp/ablation/corpus.py for what each family measures).
    """

    # mean by default: it removes what a head says about *this* input and keeps its constant part,
    # which zero ablation also removes (doubling the median effect on SmolLM2, and changing which
    # heads rank top); resample does the same as mean but is noisier on a small corpus
    # (benchmarks/ablation_kinds.py; README, "Effects: how they are measured").
    ablations: tuple[str, ...] = field(default=("mean",), metadata=cli(
        "--ablation", "ablation kind (repeatable; the first orders the pruning curve)  [default: mean]",
        choices=KINDS))
    metrics: tuple[str, ...] | None = field(default=None, metadata=cli(
        "--metric", "metric to measure (repeatable; the first orders the pruning curve)  "
        "[default: all of the model's kind]"))
    n_prose: int = 6  # prose lines (every second line of the shipped corpus)
    n_repeated: int = 6  # repeated-random-token sequences (causal only)
    repeated_lengths: tuple[int, ...] = (10,)  # length of the random half
    n_syntax: int = 16  # syntax sentences for subject-verb agreement (causal only)
    eval_corpus: str | None = field(default=None, metadata=cli(
        "--eval-corpus", "your own evaluation sequences (.txt one a line, .jsonl / .csv a text field): a causal LM "
        "adds the metric loss_corpus (first: it orders the pruning curve), an encoder reads them instead of the prose"))
    tasks: tuple[Task, ...] = ()  # your own metrics, in Python (interp.ablation.tasks); causal LMs only
    max_tokens_per_batch: int = field(default=2048, metadata=cli(
        "--max-tokens-per-batch", "padded tokens per forward pass (batch x stacked heads): lower it when memory is short"))
    dtype: str | None = field(default=None, metadata=cli(
        "--dtype", "run the ablations in this dtype instead of the model's", choices=DTYPES))
    top_k: int | None = field(default=None, metadata=cli(
        "--top-k", "exact ablation only for the k heads that attribution or integrated gradients rank highest "
        "(plus a random audit sample)"))
    attribution: bool = True  # estimate every head with the estimator (always on with top_k)
    estimator: str = field(default=ESTIMATORS[0], metadata=cli(
        "--estimator", "how every head's effect is estimated",
        choices=ESTIMATORS))
    ig_steps: int = 4  # integrated gradients: path points (one forward + backward each)
    audit: int | None = None  # with top_k: heads ablated exactly at random besides the top k; None: AUDIT_SHARE of k
    max_rounds: int = field(default=1, metadata=cli(
        "--max-rounds", "exact sweep in up to this many rounds of new evaluation sequences: after each, only heads "
        "whose effect is not yet settled (interval vs the tolerance, precision) go on"))
    heads_per_pass: int | None = None  # heads of a layer per forward (stacked batch copies); None: all that fit
    prune: bool = True  # compute the pruning curve
    prune_step: float | None = None  # share of heads per step; None: 1 head (<= 64 heads) or 5%
    n_bootstrap: int = 1000
    threads: int | None = None  # torch intra-op threads; None: on <= 2 cores the faster of 1 and 2, measured
    quick: bool = field(default=False, metadata=cli(
        "--quick", "small evaluation corpus, exact ablation of the top 5% only, 10% pruning steps", is_flag=True))
    seed: int = 0

    def __post_init__(self) -> None:
        require(self, "ablations", bool(self.ablations) and all(k in KINDS for k in self.ablations)
                and len(set(self.ablations)) == len(self.ablations), f"distinct kinds among {', '.join(KINDS)}")
        require(self, "tasks", all(isinstance(t, Task) for t in self.tasks),
                "interp.ablation.tasks.Task objects made in Python (a run with tasks is rerun from Python)")
        known = METRICS + tuple(t.name for t in self.tasks)
        require(self, "metrics", self.metrics is None or (bool(self.metrics) and all(m in known for m in self.metrics)),
                f"None or a non-empty subset of {', '.join(known)}")
        require(self, "metrics", CORPUS not in (self.metrics or ()) or bool(self.eval_corpus),
                f"without {CORPUS} unless an eval_corpus is given (--eval-corpus FILE)")
        for name in ("n_prose", "n_repeated", "n_syntax"):
            require(self, name, getattr(self, name) >= 0, ">= 0")
        require(self, "repeated_lengths", bool(self.repeated_lengths) and min(self.repeated_lengths) >= 2, "lengths >= 2")
        require(self, "max_tokens_per_batch", self.max_tokens_per_batch >= 1, ">= 1")
        require(self, "dtype", self.dtype in (None, *DTYPES), f"None or one of {', '.join(DTYPES)}")
        require(self, "top_k", self.top_k is None or self.top_k >= 1, ">= 1 or None")
        require(self, "estimator", self.estimator in ESTIMATORS, f"one of {', '.join(ESTIMATORS)}")
        require(self, "ig_steps", self.ig_steps >= 1, ">= 1")
        require(self, "audit", self.audit is None or self.audit >= 0, ">= 0 or None")
        require(self, "max_rounds", self.max_rounds >= 1, ">= 1")
        require(self, "heads_per_pass", self.heads_per_pass is None or self.heads_per_pass >= 1, ">= 1 or None")
        require(self, "prune_step", self.prune_step is None or 0 < self.prune_step <= 1, "in (0, 1] or None")
        require(self, "n_bootstrap", self.n_bootstrap >= 10, ">= 10")
        require(self, "threads", self.threads is None or self.threads >= 1, ">= 1 or None")

    def resolved(self, n_heads: int) -> AblateConfig:
        """The settings actually used: ``quick`` applied for a model with ``n_heads`` heads."""
        if not self.quick:
            return self
        sizes = {k: min(getattr(self, k), v) for k, v in QUICK_ABLATE_SIZES.items()}
        return dataclasses.replace(
            self, **sizes, top_k=self.top_k or max(QUICK_MIN_HEADS, math.ceil(QUICK_TOP_SHARE * n_heads)),
            prune_step=self.prune_step or QUICK_PRUNE_STEP, n_bootstrap=min(self.n_bootstrap, 200),
        )


@dataclass(frozen=True)
class ReportConfig:
    """What the report stage writes: report.html always, report.pdf unless ``pdf`` is off."""

    pdf: bool = True


@dataclass(frozen=True)
class RunOptions:
    """What ``interp run`` does: the model, every stage's config, where the run goes and which
    stages run. ``quick`` shrinks the collect and ablate configs (see their ``quick``), except
    the collect fields named in ``explicit`` (set by a flag: a flag wins over --quick)."""

    model: ModelSpec = field(default_factory=ModelSpec)
    collect: CollectConfig = field(default_factory=CollectConfig)
    classify: ClassifyConfig = field(default_factory=ClassifyConfig)
    ablate: AblateConfig = field(default_factory=AblateConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    out_dir: str = field(default="reports", metadata=cli("--out", "folder for run directories"))
    run_name: str | None = field(default=None, metadata=cli("--name", "run name"))
    quick: bool = False
    skip: tuple[str, ...] = ()
    resume: bool = False
    explicit: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        require(self, "run_name", self.run_name is None or bool(RUN_NAME.fullmatch(self.run_name)),
                "1-100 letters, digits, '.', '_' or '-', starting with a letter or digit (no '/', no '..')")
        require(self, "out_dir", bool(self.out_dir) and "\0" not in self.out_dir, "a folder path")

    def stage_config(self, name: str) -> Any:
        """The config a stage runs with under these options (``quick`` applied)."""
        config = getattr(self, name)
        if self.quick and name == "collect":
            return config.quick(keep=self.explicit)
        if self.quick and name == "ablate":
            return dataclasses.replace(config, quick=True)
        return config

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunOptions:
        """The options recorded in a manifest (``dataclasses.asdict`` turned JSON) back as objects."""
        return from_jsonable(cls, data)


def from_jsonable(cls: type, data: Any) -> Any:
    """A config dataclass from its JSON form: nested configs rebuilt, lists turned back into
    tuples; an unknown field or a wrong type is a ConfigError (a manifest of another version)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{cls.__name__} must be a JSON object, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"{cls.__name__} has no field {unknown[0]!r} (recorded by another version of interp)")
    return cls(**{k: _from_json_value(hints[k], v) for k, v in data.items()})


def _from_json_value(hint: Any, value: Any) -> Any:
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    for option in options:
        if dataclasses.is_dataclass(option) and isinstance(value, dict):
            return from_jsonable(option, value)
        if typing.get_origin(option) is tuple and isinstance(value, list):
            return tuple(value)
    return value

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
from dataclasses import dataclass, field
from typing import Any

from interp.ablation.catalogue import KINDS, METRICS
from interp.reference import REFERENCE_VERSION

DTYPES = ("float32", "bfloat16")
# Bump when a feature's definition changes (interp/features.py), so that a run collected under
# the old definitions is neither resumed nor classified as if it meant the new ones (2: the
# syntactic baseline also takes word positions and word forms).
FEATURES_VERSION = 2


def cli(flag: str, help: str, **click_kwargs: Any) -> dict[str, Any]:
    """Field metadata that makes a config field an option of its stage's command."""
    return {"cli": flag, "help": help, **click_kwargs}


@dataclass(frozen=True)
class ModelSpec:
    """Which model to load: a packaged name, a local HF directory, a .gguf file or a Hub name."""

    name: str = "smollm2-135m"
    device: str = "cpu"
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("model name is empty")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")


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
    max_sentences: int | None = None  # cap on prose / user sentences, None: all
    max_tokens_per_batch: int = 4096  # batches are bucketed by length under this budget
    max_seq_len: int | None = field(default=None, metadata=cli(
        "--max-seq-len", "truncate probes longer than this (with a warning)"))
    local_window: int = 3
    n_bootstrap: int = 200
    exemplar_tokens: int = 32  # exemplar probes are cut to this many tokens (the report draws them)
    seed: int = 0
    features_version: int = FEATURES_VERSION

    def __post_init__(self) -> None:
        if self.n_repeated < 0 or self.n_syntax < 0:
            raise ValueError("sequence counts must be >= 0")
        if not self.repeated_lengths or min(self.repeated_lengths) < 2:
            raise ValueError("repeated_lengths must be >= 2")
        if self.max_tokens_per_batch < 1:
            raise ValueError("max_tokens_per_batch must be >= 1")
        if self.local_window < 1:
            raise ValueError("local_window must be >= 1")
        if self.n_bootstrap < 10:
            raise ValueError("n_bootstrap must be >= 10")
        if self.max_seq_len is not None and self.max_seq_len < 2:
            raise ValueError("max_seq_len must be >= 2")
        if self.exemplar_tokens < 2:
            raise ValueError("exemplar_tokens must be >= 2")

    def quick(self) -> CollectConfig:
        """A smaller probe set for --quick: the same features on fewer sequences."""
        return dataclasses.replace(self, n_repeated=min(self.n_repeated, 32), n_syntax=min(self.n_syntax, 300),
                                   max_sentences=min(self.max_sentences or 120, 120),
                                   n_bootstrap=min(self.n_bootstrap, 100))


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
        if not self.reference_version:
            raise ValueError("reference_version is empty")
        if self.second_min_lift is not None and not 0.0 <= self.second_min_lift <= 1.0:
            raise ValueError(f"second_min_lift must be in [0, 1], got {self.second_min_lift}")
        if self.max_replicates is not None and self.max_replicates < 1:
            raise ValueError(f"max_replicates must be >= 1 or None, got {self.max_replicates}")
        if self.cluster_distance is not None and not self.cluster_distance > 0:
            raise ValueError(f"cluster_distance must be > 0 or None, got {self.cluster_distance}")
        if self.min_cluster_size < 2:
            raise ValueError(f"min_cluster_size must be >= 2, got {self.min_cluster_size}")


QUICK_ABLATE_SIZES = {"n_prose": 3, "n_repeated": 3, "n_syntax": 8}
QUICK_TOP_SHARE = 0.05  # quick mode: exact ablation of the 5% of heads attribution ranks highest
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

    ablations: tuple[str, ...] = field(default=("zero",), metadata=cli(
        "--ablation", "ablation kind (repeatable; the first orders the pruning curve)  [default: zero]",
        choices=KINDS))
    metrics: tuple[str, ...] | None = field(default=None, metadata=cli(
        "--metric", "metric to measure (repeatable; the first orders the pruning curve)  "
        "[default: all of the model's kind]"))
    n_prose: int = 6  # prose lines (every second line of the shipped corpus)
    n_repeated: int = 6  # repeated-random-token sequences (causal only)
    repeated_lengths: tuple[int, ...] = (10,)  # length of the random half
    n_syntax: int = 16  # syntax sentences for subject-verb agreement (causal only)
    max_tokens_per_batch: int = 2048  # padded tokens per forward (batch x stacked heads): bounds memory
    dtype: str | None = field(default=None, metadata=cli(
        "--dtype", "run the ablations in this dtype instead of the model's", choices=DTYPES))
    top_k: int | None = field(default=None, metadata=cli(
        "--top-k", "exact ablation only for the k heads attribution ranks highest"))
    attribution: bool = True  # estimate every head by attribution patching (always on with top_k)
    heads_per_pass: int | None = None  # heads of a layer per forward (stacked batch copies); None: all that fit
    prune: bool = True  # compute the pruning curve
    prune_step: float | None = None  # share of heads per step; None: 1 head (<= 64 heads) or 5%
    n_bootstrap: int = 1000
    threads: int | None = None  # torch intra-op threads; None: on <= 2 cores the faster of 1 and 2, measured
    quick: bool = field(default=False, metadata=cli(
        "--quick", "small evaluation corpus, exact ablation of the top 5% only, 10% pruning steps", is_flag=True))
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.ablations or any(k not in KINDS for k in self.ablations):
            raise ValueError(f"ablations must be a non-empty subset of {KINDS}, got {self.ablations!r}")
        if len(set(self.ablations)) != len(self.ablations):
            raise ValueError(f"ablations has duplicates: {self.ablations!r}")
        if self.metrics is not None and (not self.metrics or any(m not in METRICS for m in self.metrics)):
            raise ValueError(f"metrics must be None or a non-empty subset of {METRICS}, got {self.metrics!r}")
        if min(self.n_prose, self.n_repeated, self.n_syntax) < 0:
            raise ValueError("sequence counts must be >= 0")
        if not self.repeated_lengths or min(self.repeated_lengths) < 2:
            raise ValueError("repeated_lengths must be non-empty and >= 2")
        if self.max_tokens_per_batch < 1:
            raise ValueError("max_tokens_per_batch must be >= 1")
        if self.dtype not in (None, *DTYPES):
            raise ValueError(f"dtype must be None or one of {DTYPES}, got {self.dtype!r}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError("top_k must be None or >= 1")
        if self.heads_per_pass is not None and self.heads_per_pass < 1:
            raise ValueError("heads_per_pass must be >= 1")
        if self.prune_step is not None and not 0 < self.prune_step <= 1:
            raise ValueError("prune_step must be None or in (0, 1]")
        if self.n_bootstrap < 10:
            raise ValueError("n_bootstrap must be >= 10")
        if self.threads is not None and self.threads < 1:
            raise ValueError("threads must be None or >= 1")

    def resolved(self, n_heads: int) -> AblateConfig:
        """The settings actually used: ``quick`` applied for a model with ``n_heads`` heads."""
        if not self.quick:
            return self
        sizes = {k: min(getattr(self, k), v) for k, v in QUICK_ABLATE_SIZES.items()}
        return dataclasses.replace(
            self, **sizes, top_k=self.top_k or max(1, math.ceil(QUICK_TOP_SHARE * n_heads)),
            prune_step=self.prune_step or QUICK_PRUNE_STEP, n_bootstrap=min(self.n_bootstrap, 200),
        )


@dataclass(frozen=True)
class ReportConfig:
    """What the report stage writes: report.html always, report.pdf unless ``pdf`` is off."""

    pdf: bool = True


@dataclass(frozen=True)
class RunOptions:
    """What ``interp run`` does: the model, every stage's config, where the run goes and which
    stages run. ``quick`` shrinks the collect and ablate configs (see their ``quick``)."""

    model: ModelSpec = field(default_factory=ModelSpec)
    collect: CollectConfig = field(default_factory=CollectConfig)
    classify: ClassifyConfig = field(default_factory=ClassifyConfig)
    ablate: AblateConfig = field(default_factory=AblateConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    out_dir: str = "reports"
    run_name: str | None = None
    quick: bool = False
    skip: tuple[str, ...] = ()
    resume: bool = False

    def stage_config(self, name: str) -> Any:
        """The config a stage runs with under these options (``quick`` applied)."""
        config = getattr(self, name)
        if self.quick and name == "collect":
            return config.quick()
        if self.quick and name == "ablate":
            return dataclasses.replace(config, quick=True)
        return config

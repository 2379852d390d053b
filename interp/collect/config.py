"""The collect stage's config: which probes, how many, and how they are batched."""

from __future__ import annotations

from typing import Any

from interp.config import MAX_INT, config, option, require
from interp.executors.placement import Placement

# Bump when a feature's definition changes (interp/collect/features.py), so that a run collected under
# the old definitions is neither resumed nor classified as if it meant the new ones (2: the
# syntactic baseline also takes word positions and word forms; 3: features read the attention
# renormalised over the non-sink keys, broad over the content keys, duplicate_token and
# induction set the query itself aside, local needs content beyond its window, positional
# features, a sink_mass column; 4: frequent_token).
FEATURES_VERSION = 4
SUITES = ("prose", "repeated", "syntax")
# Generated probes are held in memory until collected (text, tokens, word spans: a few kB each),
# and a forward pass costs about 1 s per 100 tokens on a small CPU: 100,000 generated sentences are
# hours of collection and a few hundred MB, far beyond what any feature needs (800 by default).
# A larger count is refused before a sentence is built, instead of filling memory.
MAX_GENERATED = 100_000
MAX_REPEATED_LENGTH = 100_000  # tokens of a repeated-token half; a model's context is far shorter
# The first position (BOS / [CLS], the sink) plus three tokens: the shortest probe on which a query
# has a content key before it other than itself. Truncated any shorter, every probe measures
# next to nothing, however many there are.
MIN_SEQ_LEN = 4


def require_repeated_lengths(config: Any) -> None:
    """Refuse a config whose ``repeated_lengths`` (the halves of its repeated-token sequences,
    collect's probes and ablate's eval set alike) are empty, or one below 2 or above
    ``MAX_REPEATED_LENGTH`` tokens."""
    lengths = config.repeated_lengths
    require(
        config,
        "repeated_lengths",
        bool(lengths) and min(lengths) >= 2 and max(lengths) <= MAX_REPEATED_LENGTH,
        f"lengths from 2 to {MAX_REPEATED_LENGTH}",
    )


CPU_TOKENS_PER_BATCH = (
    4096  # collect's batch on a CPU, and where an accelerator's batch starts growing
)


@config
class CollectConfig(Placement):
    """How attention patterns are gathered and turned into features."""

    suites: tuple[str, ...] = option(default=SUITES, flag="--suite")
    """built-in probe suite to read (repeatable): prose, repeated, syntax"""
    corpora: tuple[str, ...] = option(default=(), flag="--corpus", file=True)
    """extra probe corpus: .txt, .jsonl, .csv or .conllu (repeatable)"""
    text_column: str | None = option(default=None)
    """field / column holding the text in a .jsonl or .csv corpus"""
    n_repeated: int = option(default=64, ge=0, le=MAX_GENERATED)
    """repeated-random-token sequences"""
    repeated_lengths: tuple[int, ...] = option(default=(16, 24, 32), flag="--repeated-length")
    """length of the random half of a repeated-token sequence (repeatable)"""
    n_syntax: int = option(default=800, ge=0, le=MAX_GENERATED)
    """generated syntax sentences"""
    pool_syntax: bool = option(default=False)
    """syntactic features pool the built-in syntax suite and every --corpus treebank (default: the
    built-in suite when collected, else the --corpus treebanks; the syntax table scores each apart)"""
    syntax_heads: int = option(default=3, ge=1, le=MAX_INT)
    """best heads per corpus, relation and direction in the syntax table"""
    max_sentences: int | None = option(default=None, ge=1, le=MAX_INT)
    """use at most this many sentences of the prose suite and of each corpus"""
    max_tokens_per_batch: int | None = option(default=None, ge=1, le=MAX_INT)
    """padded tokens per forward pass; default: 4096 on a CPU, on an accelerator as many as its free memory holds
    (interp.model.memory); lower it when memory is short"""
    max_seq_len: int | None = option(default=None, ge=2, le=MAX_INT)
    """truncate probes longer than this (with a warning)"""
    local_window: int = option(default=3, ge=1, le=MAX_INT)
    """the window (in tokens before the query) of the local feature"""
    n_bootstrap: int = option(default=200, ge=10, le=MAX_INT)
    """bootstrap replicates over probes (feature intervals, label stability)"""
    exemplar_tokens: int = option(default=32, ge=2, le=MAX_INT)
    """exemplar probes are cut to this many tokens (the report draws them)"""
    seed: int = option(default=0, ge=0, le=MAX_INT)
    """seed of the repeated-token probes, the syntax generator and the bootstrap"""
    features_version: int = option(default=FEATURES_VERSION, cli=False)
    """the version of the feature definitions (a run collected under another is not resumed)"""

    def __post_init__(self) -> None:
        super().__post_init__()
        require(
            self,
            "max_seq_len",
            self.max_seq_len is None or self.max_seq_len >= MIN_SEQ_LEN,
            f"at least {MIN_SEQ_LEN} tokens: shorter probes are too short to measure any feature",
        )
        require_repeated_lengths(self)

    @property
    def cpu_batch_tokens(self) -> int:
        """Padded tokens per batch on a CPU: the configured budget, else the default."""
        return self.max_tokens_per_batch or CPU_TOKENS_PER_BATCH

    def for_quick(self, keep: tuple[str, ...] = ()) -> CollectConfig:
        """A smaller probe set for --quick: the same features on fewer sequences (the fields in
        ``keep`` stay as the user set them)."""
        smaller = {
            "n_repeated": min(self.n_repeated, 32),
            "n_syntax": min(self.n_syntax, 300),
            "max_sentences": min(self.max_sentences or 120, 120),
            "n_bootstrap": min(self.n_bootstrap, 100),
        }
        return self.replaced(smaller, keep)

    @classmethod
    def run_wide(cls, seed: int | None, builtin: bool) -> dict[str, Any]:
        """``--seed`` seeds the probes and the bootstrap; ``--no-builtin`` keeps only the
        repeated random tokens (which every tokenizer can express) beside the user's corpora."""
        return {
            **({"seed": seed} if seed is not None else {}),
            **({} if builtin else {"suites": ("repeated",)}),
        }

    def with_corpora(self, corpora: tuple[str, ...]) -> CollectConfig:
        """Probe with these corpora too, after the ones configured."""
        return self.replaced({"corpora": self.corpora + corpora}) if corpora else self

    @property
    def random_seed(self) -> int:
        return self.seed

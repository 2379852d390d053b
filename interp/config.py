"""Frozen configuration dataclasses, one per pipeline stage.

They validate in ``__post_init__`` (ValueError, never assert), use None for "not set", and are
plain data: the manifest records them with ``dataclasses.asdict`` and ``--resume`` compares them.
"""

from __future__ import annotations

from dataclasses import dataclass

DTYPES = ("float32", "bfloat16")


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
    corpora: tuple[str, ...] = ()  # user corpus files (txt, jsonl, csv, conllu)
    text_column: str | None = None  # column name for csv / field for jsonl; None: "text"
    n_repeated: int = 64  # repeated-random-token sequences
    repeated_lengths: tuple[int, ...] = (16, 24, 32)  # length of the random half
    n_syntax: int = 800  # generated syntactic sentences (the generator makes any number; `--n-syntax`)
    max_sentences: int | None = None  # cap on prose / user sentences, None: all
    max_tokens_per_batch: int = 4096  # batches are bucketed by length under this budget
    max_seq_len: int | None = None  # None: the model's context; longer sequences are truncated
    local_window: int = 3
    n_bootstrap: int = 200
    seed: int = 0

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

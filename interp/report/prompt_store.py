"""The researcher's own prompts as ``interp show`` stores them: ``RUN_DIR/prompts.npz``, read by
the report without torch (:mod:`interp.report.explorer`).

Stored format of ``prompts.npz`` (``numpy.savez_compressed``, plain arrays, no pickles)::

    version      int                                    FORMAT_VERSION
    shape        int     [2]                            the model's (n_layers, n_heads)
    heads        int     [stored, 2]                    (layer, head) of every stored head
    patterns     float16 [prompt, stored, q, k]         zero beyond a prompt's tokens
    n_tokens     int     [prompt]
    tokens       str     [prompt]                       JSON list of the tokens, each as the tokenizer decodes it
    text         str     [prompt]                       the prompt as given

Every head is stored when the patterns fit :data:`STORE_CELLS`; longer prompts keep the heads
``interp show`` printed only.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from interp.pipeline.rundir import read_archive, write_bytes

FILE = "prompts.npz"
FORMAT_VERSION = 1
FIELDS = ("version", "shape", "heads", "patterns", "n_tokens", "tokens", "text")
STORE_CELLS = (
    50_000_000  # float16 cells of prompts.npz (100 MB) before only the printed heads are kept
)
Head = tuple[int, int]


@dataclass(frozen=True)
class Prompt:
    """One prompt of ``interp show`` and the attention of the stored heads on it."""

    text: str
    tokens: tuple[str, ...]
    heads: tuple[Head, ...]  # (layer, head) of each slice of ``patterns``
    patterns: np.ndarray  # float16 [stored, q, k], q = k = len(tokens)

    def has(self, layer: int, head: int) -> bool:
        return (layer, head) in self.heads

    def pattern(self, layer: int, head: int) -> np.ndarray:
        """float32 [q, k]: row q is where query token q attends."""
        if not self.has(layer, head):
            raise KeyError(f"L{layer}H{head} is not stored for this prompt")
        return self.patterns[self.heads.index((layer, head))].astype(np.float32)


@dataclass(frozen=True)
class PromptSet:
    """The prompts ``interp show`` ran, with the model's shape."""

    shape: Head  # (n_layers, n_heads)
    prompts: tuple[Prompt, ...]

    @property
    def heads(self) -> tuple[Head, ...]:
        return self.prompts[0].heads if self.prompts else ()


def stored_heads(shape: Head, lengths: Sequence[int], shown: Sequence[Head]) -> tuple[Head, ...]:
    """Every head when the prompts' patterns fit :data:`STORE_CELLS`, else the ``shown`` ones."""
    width = max(lengths, default=0)
    every = tuple((l, h) for l in range(shape[0]) for h in range(shape[1]))
    return every if len(lengths) * len(every) * width * width <= STORE_CELLS else tuple(shown)


def to_bytes(prompts: PromptSet) -> bytes:
    """The npz file this module describes."""
    heads = prompts.heads
    width = max((len(p.tokens) for p in prompts.prompts), default=0)
    patterns = np.zeros((len(prompts.prompts), len(heads), width, width), dtype=np.float16)
    for k, p in enumerate(prompts.prompts):
        n = len(p.tokens)
        patterns[k, :, :n, :n] = p.patterns
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        version=np.int64(FORMAT_VERSION),
        shape=np.array(prompts.shape, dtype=np.int64),
        heads=np.array(heads, dtype=np.int64).reshape(-1, 2),
        patterns=patterns,
        n_tokens=np.array([len(p.tokens) for p in prompts.prompts], dtype=np.int64),
        tokens=np.array([json.dumps(list(p.tokens)) for p in prompts.prompts], dtype=str),
        text=np.array([json.dumps(p.text) for p in prompts.prompts], dtype=str),
    )
    return buffer.getvalue()


def write_prompts(run_dir: Path, prompts: PromptSet) -> Path:
    """Write ``RUN_DIR/prompts.npz`` atomically (replacing the prompts of an earlier call)."""
    path = Path(run_dir) / FILE
    write_bytes(path, to_bytes(prompts))
    return path


class PromptsUnreadable(ValueError):
    """``prompts.npz`` exists but cannot be read (the report says so and leaves the prompts out)."""


def read_prompts(run_dir: str | Path) -> PromptSet | None:
    """The prompts ``interp show`` stored in the run; None if it stored none. Raises
    :class:`PromptsUnreadable` for a damaged file."""
    path = Path(run_dir) / FILE
    try:
        arrays = read_archive(path, FIELDS, FORMAT_VERSION)
        if arrays is None:
            return None
        heads = tuple((int(l), int(h)) for l, h in arrays["heads"].reshape(-1, 2).tolist())
        prompts = []
        for k, n in enumerate(arrays["n_tokens"].tolist()):
            tokens = tuple(str(t) for t in json.loads(str(arrays["tokens"][k])))
            if len(tokens) != n:
                raise ValueError(f"prompt {k} has {len(tokens)} token labels for {n} tokens")
            prompts.append(
                Prompt(
                    str(json.loads(str(arrays["text"][k]))),
                    tokens,
                    heads,
                    arrays["patterns"][k, :, :n, :n],
                )
            )
        shape = tuple(int(x) for x in arrays["shape"].tolist())
        return PromptSet((shape[0], shape[1]), tuple(prompts))
    except (OSError, ValueError, KeyError, IndexError, EOFError, zipfile.BadZipFile) as exc:
        raise PromptsUnreadable(
            f"{path} is unreadable ({exc}); run `interp show {run_dir}` again"
        ) from None

"""Exemplar attention patterns: every head's attention on a few short probes, stored with the run.

The collect stage's one pass hands each layer's pattern ``[batch, head, q, k]`` to an
:class:`ExemplarRecorder`, which keeps, for a few short probes of every suite (the prose, syntax
and repeated-token suites and each user corpus), every head's pattern on the probe's first
``CollectConfig.exemplar_tokens`` tokens. No extra forward pass runs. The collect stage writes
them to ``RUN_DIR/exemplars.npz`` with the token labels, so that the report can draw the
strongest head of every role (or any head) from the run alone, without the model.

This module imports no torch: the recorder receives tensors and only calls their methods, and
the reader needs numpy only (the report stage never loads the modelling stack).

Stored format (``numpy.savez_compressed``, plain arrays, no pickles)::

    version      int                                  FORMAT_VERSION
    patterns     float16 [probe, layer, head, q, k]   zero beyond a probe's kept tokens
    n_tokens     int     [probe]                      tokens kept (at most exemplar_tokens)
    full_length  int     [probe]                      the probe's length before the cut
    tokens       str     [probe]                      JSON list of the kept tokens, each as the tokenizer decodes it
    suite        str     [probe]                      suite name (a user corpus: its file stem)
    kind         str     [probe]                      probe kind: natural | syntax | repeated

A causal head's pattern cut to the first n tokens is exactly its pattern on those tokens. An
encoder's rows can sum to less than 1 when a probe was cut (attention to later keys is not kept),
so probes that fit whole are preferred.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from interp.pipeline.rundir import read_archive, write_bytes

FILE = "exemplars.npz"
FORMAT_VERSION = 2
PROBES_PER_SUITE = 2
MIN_TOKENS = 8  # shorter probes show little (a 3-token pattern says nothing about a local head)
FIELDS = ("version", "patterns", "n_tokens", "full_length", "tokens", "suite", "kind")


@dataclass(frozen=True)
class Probe:
    """One stored probe: its tokens and every head's attention on them."""

    suite: str
    kind: str
    tokens: tuple[str, ...]  # the kept tokens' labels
    full_length: int
    patterns: np.ndarray  # float16 [layer, head, q, k], q = k = len(tokens)

    @property
    def cut(self) -> bool:
        return self.full_length > len(self.tokens)

    def pattern(self, layer: int, head: int) -> np.ndarray:
        """float32 [q, k]: row q is where query token q attends."""
        return self.patterns[layer, head].astype(np.float32)


@dataclass(frozen=True)
class Exemplars:
    """The stored probes of a run, in corpus order."""

    probes: tuple[Probe, ...]

    @property
    def shape(self) -> tuple[int, int]:
        """(n_layers, n_heads) of the patterns."""
        if not self.probes:
            return 0, 0
        n_layers, n_heads = self.probes[0].patterns.shape[:2]
        return int(n_layers), int(n_heads)

    def of_kind(self, kind: str) -> list[Probe]:
        return [p for p in self.probes if p.kind == kind]


# --- capture (collect stage) -------------------------------------------------------------------


def choose_probes(
    seqs: Sequence[Any], max_tokens: int, per_suite: int = PROBES_PER_SUITE
) -> list[int]:
    """Corpus indices of a few short probes per suite.

    Among a suite's probes that fit whole (``MIN_TOKENS`` to ``max_tokens`` tokens): those with
    two or more delimiters first (punctuation makes delimiter and sink heads visible), then the
    longest. A suite none of whose probes fits (repeated tokens longer than the cut) gives its
    shortest probes of at least ``MIN_TOKENS`` tokens, cut.
    """
    chosen: list[int] = []
    for suite in dict.fromkeys(s.suite for s in seqs):
        mine = [i for i, s in enumerate(seqs) if s.suite == suite]
        fits = [i for i in mine if MIN_TOKENS <= len(seqs[i]) <= max_tokens]
        if fits:
            ranked = sorted(fits, key=lambda i: (int(seqs[i].is_delim.sum()) < 2, -len(seqs[i]), i))
        else:
            ranked = sorted(mine, key=lambda i: (len(seqs[i]) < MIN_TOKENS, len(seqs[i]), i))
        chosen += ranked[:per_suite]
    return chosen


class ExemplarRecorder:
    """Keeps the chosen probes' patterns as the collect pass goes by.

    ``start_batch(index)`` is told the corpus index of each batch row, ``add_layer(layer,
    pattern)`` receives each layer's ``[batch, head, q, k]`` pattern (read, never modified), and
    ``result()`` returns what was kept.
    """

    def __init__(
        self, seqs: Sequence[Any], max_tokens: int, n_layers: int, n_heads: int, tokenizer: Any
    ):
        self.index = choose_probes(seqs, max_tokens)
        self._slot = {i: k for k, i in enumerate(self.index)}
        self._seqs = [seqs[i] for i in self.index]
        self._kept = [min(len(s), max_tokens) for s in self._seqs]
        width = max(self._kept, default=0)
        self._patterns = np.zeros(
            (len(self.index), n_layers, n_heads, width, width), dtype=np.float16
        )
        self._labels = [
            tuple(tokenizer.decode([t]) for t in s.tokens[:n].tolist())
            for s, n in zip(self._seqs, self._kept)
        ]
        self._rows: list[tuple[int, int]] = []  # (batch row, slot) of the current batch
        self._filled = np.zeros(len(self.index), dtype=bool)  # slots whose probe has been seen

    def merge(self, other: ExemplarRecorder) -> None:
        """Take the patterns a recorder fed other sequences kept (each probe is in one shard only)."""
        for slot in np.flatnonzero(other._filled):
            self._patterns[slot] = other._patterns[slot]
            self._filled[slot] = True

    def start_batch(self, index: Sequence[int]) -> None:
        self._rows = [(row, self._slot[i]) for row, i in enumerate(index) if i in self._slot]
        self._filled[[slot for _, slot in self._rows]] = True

    def add_layer(self, layer: int, pattern: Any) -> None:
        for row, slot in self._rows:
            n = self._kept[slot]
            self._patterns[slot, layer, :, :n, :n] = pattern[row, :, :n, :n].float().cpu().numpy()

    def result(self) -> Exemplars:
        return Exemplars(
            tuple(
                Probe(s.suite, s.kind, labels, len(s), self._patterns[k, :, :, :n, :n])
                for k, (s, labels, n) in enumerate(zip(self._seqs, self._labels, self._kept))
            )
        )


# --- storage -----------------------------------------------------------------------------------


def to_bytes(exemplars: Exemplars) -> bytes:
    """The npz file of the module docstring."""
    probes = exemplars.probes
    width = max((len(p.tokens) for p in probes), default=0)
    n_layers, n_heads = exemplars.shape
    patterns = np.zeros((len(probes), n_layers, n_heads, width, width), dtype=np.float16)
    for k, p in enumerate(probes):
        n = len(p.tokens)
        patterns[k, :, :, :n, :n] = p.patterns
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        version=np.int64(FORMAT_VERSION),
        patterns=patterns,
        n_tokens=np.array([len(p.tokens) for p in probes], dtype=np.int64),
        full_length=np.array([p.full_length for p in probes], dtype=np.int64),
        # JSON keeps every character of a label (numpy's str arrays drop trailing NULs).
        tokens=np.array([json.dumps(list(p.tokens)) for p in probes], dtype=str),
        suite=np.array([p.suite for p in probes], dtype=str),
        kind=np.array([p.kind for p in probes], dtype=str),
    )
    return buffer.getvalue()


def write_exemplars(run_dir: Path, exemplars: Exemplars) -> None:
    """Write ``RUN_DIR/exemplars.npz`` (atomically)."""
    write_bytes(Path(run_dir) / FILE, to_bytes(exemplars))


class ExemplarsUnreadable(ValueError):
    """The stored file exists but cannot be read (the report says so and leaves exemplars out)."""


def read_exemplars(run_dir: Path) -> Exemplars | None:
    """The run's stored exemplars; None if it has none (an older run may have exemplars.json,
    which the report does not read). Raises :class:`ExemplarsUnreadable` for a damaged file."""
    path = Path(run_dir) / FILE
    try:
        arrays = read_archive(path, FIELDS, FORMAT_VERSION)
        return None if arrays is None else Exemplars(tuple(_probes(arrays)))
    except (OSError, ValueError, KeyError, IndexError, EOFError, zipfile.BadZipFile) as exc:
        raise ExemplarsUnreadable(
            f"{path} is unreadable ({exc}); rerun `interp collect {run_dir}`"
        ) from None


def _probes(arrays: dict[str, np.ndarray]) -> list[Probe]:
    probes = []
    for k, n in enumerate(arrays["n_tokens"].tolist()):
        tokens = tuple(str(t) for t in json.loads(str(arrays["tokens"][k])))
        if len(tokens) != n:
            raise ValueError(f"probe {k} has {len(tokens)} token labels for {n} tokens")
        probes.append(
            Probe(
                str(arrays["suite"][k]),
                str(arrays["kind"][k]),
                tokens,
                int(arrays["full_length"][k]),
                arrays["patterns"][k, :, :, :n, :n],
            )
        )
    return probes

"""Probe data types.

A probe corpus is read into word-level :class:`Sentence` objects (text, word spans, gold arcs);
:mod:`interp.probes.align` turns them into token-level :class:`ProbeSequence` objects for one
tokenizer. Repeated-random-token probes are generated directly at the token level.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

# Probe kinds decide which features read a sequence (see interp.collect.features.FEATURE_PROBE_KINDS).
NATURAL, REPEATED, SYNTAX = "natural", "repeated", "syntax"
PROBE_KINDS = (NATURAL, REPEATED, SYNTAX)


@dataclass(frozen=True)
class Arc:
    """A gold dependency arc between two words of a sentence (0-based word indices)."""

    dep: int
    head: int
    relation: str  # e.g. nsubj, det, amod, obj, pobj


@dataclass(frozen=True)
class Agreement:
    """A verb that agrees in number with its subject, and the form that would be wrong."""

    verb: int  # word index of the verb in the sentence
    subject: int  # word index of the subject noun
    correct: str  # the verb form the sentence has
    wrong: str  # the same verb with the other number


@dataclass(frozen=True)
class Sentence:
    """One probe text. ``words`` are character spans; empty when the text has no word annotation."""

    text: str
    words: tuple[tuple[int, int], ...] = ()
    arcs: tuple[Arc, ...] = ()
    agreement: Agreement | None = None
    source: str = ""  # "file:line" for error messages, or the generator's name


@dataclass(frozen=True)
class Suite:
    """A named set of probe sentences of one kind."""

    name: str
    kind: str
    sentences: tuple[Sentence, ...] = ()
    card: str = ""  # what it elicits, how it was made

    def __post_init__(self) -> None:
        if self.kind not in PROBE_KINDS:
            raise ValueError(f"kind must be one of {PROBE_KINDS}, got {self.kind!r}")


@dataclass
class ProbeSequence:
    """One tokenized probe with the annotations features need, all indexed by token position."""

    tokens: torch.Tensor  # long [pos]
    suite: str
    kind: str
    is_delim: torch.Tensor  # bool [pos]: punctuation (and [SEP] in encoders)
    is_special: torch.Tensor  # bool [pos]: BOS / [CLS] / [SEP]
    # filled in by __post_init__ when not given: no word spans, no arcs
    word_of_token: torch.Tensor = field(default=None)  # type: ignore[assignment]  # long [pos], -1 outside words
    word_pos: torch.Tensor = field(default=None)  # type: ignore[assignment]  # long [word]: the word's token
    arcs: torch.Tensor = field(default=None)  # type: ignore[assignment]  # long [arc, 3]: dep, head, relation
    source: str = ""
    # long [pos]: the rank of the token's type among the corpus's most frequent types (0: the
    # commonest; interp.probes.frequent), -1 for any other token; all -1 until the corpus marks it
    frequent_rank: torch.Tensor = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        n = len(self.tokens)
        if self.frequent_rank is None:
            self.frequent_rank = torch.full((n,), -1, dtype=torch.long)
        if self.word_of_token is None:
            self.word_of_token = torch.full((n,), -1, dtype=torch.long)
        if self.word_pos is None:
            self.word_pos = torch.zeros(0, dtype=torch.long)
        if self.arcs is None:
            self.arcs = torch.zeros((0, 3), dtype=torch.long)

    def __len__(self) -> int:
        return len(self.tokens)

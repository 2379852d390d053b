"""The corpus's most frequent token types: what a ``frequent_token`` head attends to.

Many heads of trained models put their attention on a handful of very common token types
(``the``, ``of``, ``.``, ``,``, a newline) wherever they stand: not on a position, not on a
relation, on the kind of token. Which types are common is a fact of the text, not of the
tokenizer, so it is counted on the probe corpus itself: the *frequent* types are the most frequent
types of its text probes (natural and syntax; repeated random tokens have no such types) that
together make up ``FREQUENT_SHARE`` of their ordinary tokens, counting types in order of
frequency (ties by id) until the share is reached. Special tokens and the tokenizer's unknown
token are no types of the text and are left out (a vocabulary that cannot spell most of a corpus
would otherwise make ``<unk>`` its commonest word). Punctuation is included: it is among the
most common tokens of any text, and a head that piles weight on both punctuation and function
words is one head, not two half-roles.

Each marked token carries its type's *rank* (0: the commonest). The ``frequent_token`` feature
(interp.collect.features) scores a head's mass on the frequent keys beside what uniform attention
over the same keys would give, so the share chosen sets only which types count, not how much a
head must prefer them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import torch

from interp.probes.base import NATURAL, SYNTAX, ProbeSequence

FREQUENT_SHARE = 0.4
TEXT_KINDS = (NATURAL, SYNTAX)


def frequent_types(
    seqs: Sequence[ProbeSequence], share: float = FREQUENT_SHARE, unknown: int | None = None
) -> list[int]:
    """The most frequent token ids of the text probes that together make up ``share`` of their
    ordinary tokens (neither special nor the ``unknown`` id), commonest first (see the module
    docstring); empty without text."""
    counts: Counter[int] = Counter()
    for s in seqs:
        if s.kind in TEXT_KINDS:
            counts.update(s.tokens[~s.is_special].tolist())
    if unknown is not None:
        counts.pop(unknown, None)
    total = sum(counts.values())
    chosen: list[int] = []
    covered = 0
    for token, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        if covered >= share * total:
            break
        chosen.append(token)
        covered += n
    return chosen


def mark_frequent(
    seqs: Sequence[ProbeSequence], share: float = FREQUENT_SHARE, unknown: int | None = None
) -> list[int]:
    """Set every sequence's ``frequent_rank`` (the rank of an ordinary token's type among
    :func:`frequent_types`, -1 for every other token) and return those types, commonest first."""
    chosen = frequent_types(seqs, share, unknown)
    if not chosen:  # no text probes (repeated tokens only): nothing to mark
        for s in seqs:
            s.frequent_rank = torch.full((len(s),), -1, dtype=torch.long)
        return chosen
    ids = torch.tensor(chosen, dtype=torch.long)
    for s in seqs:
        match = (s.tokens[:, None] == ids[None, :]) & ~s.is_special[:, None]
        s.frequent_rank = torch.where(match.any(1), match.long().argmax(1), -1)
    return chosen

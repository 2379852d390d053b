"""Ordinal sequences in a model's own vocabulary: what the successor score is read on.

Gould et al. (2023) found heads that map an item of an ordinal sequence to the next one
(1 -> 2, Monday -> Tuesday, March -> April, C -> D) across numbers, number words, days, months
and letters. A tokenizer spells these many ways (with or without a leading space, capitalised
or not) and splits many of them; only items that are one token of their own count. For each
sequence and spelling, :func:`ordinal_sequences` keeps the longest runs of consecutive items
that are single tokens (at least :data:`MIN_ITEMS` of them), so that every pair it scores is a
real successor in the model's vocabulary. A vocabulary without any has no successor score (NaN,
with the reason).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MIN_ITEMS = 3  # a run of two would make the successor a coin flip between two items

_NUMBER_WORDS = (
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty"
).split()
_ORDINAL_WORDS = "first second third fourth fifth sixth seventh eighth ninth tenth".split()
_DAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_MONTHS = (
    "january february march april may june july august september october november december"
).split()
_LETTERS = list("abcdefghijklmnopqrstuvwxyz")

# name -> items in order (the last has no successor: Sunday -> Monday is not asked)
SEQUENCES: dict[str, list[str]] = {
    "numbers": [str(i) for i in range(101)],
    "number_words": _NUMBER_WORDS,
    "ordinal_words": _ORDINAL_WORDS,
    "days": _DAYS,
    "months": _MONTHS,
    "letters": _LETTERS,
}


@dataclass(frozen=True)
class Ordinal:
    """One run of consecutive items, each a single token of the vocabulary."""

    name: str  # the sequence and its spelling, e.g. "days (space capitalised)"
    ids: tuple[int, ...]


def _spellings(item: str) -> dict[str, str]:
    """style -> spelling: bare or after a space, lower-case, capitalised and (letters) upper."""
    forms = {"lower": item, "capitalised": item.capitalize()}
    if len(item) == 1 and item.isalpha():
        forms = {"lower": item, "upper": item.upper()}
    return {
        f"{space}{case}": (" " if space == "space " else "") + text
        for case, text in forms.items()
        for space in ("", "space ")
    }


def single_token(tok: Any, text: str, limit: int, special: set[int]) -> int | None:
    """The id of ``text`` when the tokenizer spells it as exactly one ordinary token below
    ``limit`` that decodes back to it, else None (an unknown word's [UNK] is no item)."""
    ids = tok(text, add_special_tokens=False).input_ids
    if len(ids) != 1 or ids[0] in special or not 0 <= ids[0] < limit:
        return None
    return ids[0] if tok.decode(ids) == text else None


def ordinal_sequences(tok: Any, limit: int) -> list[Ordinal]:
    """Every run of at least :data:`MIN_ITEMS` consecutive single-token items, per sequence and
    spelling, for token ids below ``limit``; spellings that give the same ids count once."""
    special = set(tok.all_special_ids)
    found: list[Ordinal] = []
    seen: set[tuple[int, ...]] = set()
    for name, items in SEQUENCES.items():
        for style in _spellings(items[0]):
            ids = [single_token(tok, _spellings(item)[style], limit, special) for item in items]
            for run in _runs(ids):
                key = tuple(run)
                if len(run) >= MIN_ITEMS and key not in seen and len(set(run)) == len(run):
                    seen.add(key)
                    found.append(Ordinal(f"{name} ({style})", key))
    return found


def _runs(ids: list[int | None]) -> list[list[int]]:
    """The maximal stretches of consecutive items that are tokens."""
    runs: list[list[int]] = [[]]
    for i in ids:
        if i is None:
            runs.append([])
        else:
            runs[-1].append(i)
    return [r for r in runs if r]

"""The evaluation corpus's data and its batching: sequences (:class:`EvalItem`) bucketed by
length into padded batches (:class:`EvalBatch`) of one eval set each, an encoder's retrieval group
kept whole (:mod:`interp.ablate.evaluation` builds the sequences)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from interp.ablate.catalogue import SV_LOGIT_DIFF

MAX_PADDING = 0.15  # share of a batch that may be padding


@dataclass
class EvalItem:
    """One sequence and the positions its metric reads (causal) or its view partner (encoder)."""

    tokens: torch.Tensor  # long [pos]
    eval_set: str
    index: int  # position within its eval set's list: the unit the bootstrap resamples
    rows: torch.Tensor  # long [row]: positions whose logits are read (empty for encoders)
    targets: torch.Tensor  # long [row]: the next token (loss) or the correct verb form (sv)
    wrong: torch.Tensor | None = None  # long [row]: the wrong verb form (sv only)
    is_view: bool = False  # encoder: the word-deleted copy of sentence ``index``
    score: Any = None  # a user task's metric (interp.ablate.tasks); None: the eval set's own
    fields: dict[str, int | float] = field(
        default_factory=dict
    )  # a task's per-sequence data (Task.fields)
    group: int | None = None  # encoder: the index of its retrieval group's first sentence

    @property
    def unit(self) -> int:
        """The index that places it in a round's slice or an estimator's tier: its retrieval
        group's first sentence (a group is never cut), else its own."""
        return self.index if self.group is None else self.group


@dataclass
class EvalBatch:
    """A padded batch of one eval set. Shapes use: batch, pos, row (a scored position)."""

    eval_set: str
    tokens: torch.Tensor  # long [batch, pos]
    attention_mask: torch.Tensor  # long [batch, pos]
    index: torch.Tensor  # long [batch]: EvalItem.index
    is_view: torch.Tensor  # bool [batch]
    group: torch.Tensor  # long [batch]: EvalItem.group, -1 for none
    donor: torch.Tensor  # long [batch]: the sequence whose head output a resample ablation uses
    row_batch: torch.Tensor  # long [row]
    row_pos: torch.Tensor  # long [row]
    row_target: torch.Tensor  # long [row]
    row_wrong: torch.Tensor | None  # long [row] (sv only)
    score: Any = None  # a user task's metric (interp.ablate.tasks); None: the eval set's own
    row_fields: dict[str, torch.Tensor] = field(
        default_factory=dict
    )  # a task's fields, one value per row

    @property
    def valid(self) -> torch.Tensor:
        return self.attention_mask.bool()

    def __len__(self) -> int:
        return self.tokens.shape[0]


@dataclass
class EvalCorpus:
    items: list[EvalItem]
    batches: list[EvalBatch]
    sizes: dict[str, int]  # eval set -> number of sequences (the bootstrap's unit)

    @property
    def n_tokens(self) -> int:
        return int(sum(b.attention_mask.sum() for b in self.batches))


def make_batches(items: list[EvalItem], max_tokens: int, pad_id: int) -> list[EvalBatch]:
    """Bucket each eval set by length under ``max_tokens`` padded tokens; an encoder's retrieval
    group travels whole, its sentences first and then their views in the same order. A batch
    never holds a single sequence when avoidable (resampling needs a donor)."""
    batches: list[EvalBatch] = []
    for eval_set in dict.fromkeys(it.eval_set for it in items):
        units = _units([it for it in items if it.eval_set == eval_set])
        lengths = [max(len(it.tokens) for it in unit) for unit in units]
        groups = bucket_tight(lengths, max_tokens, MAX_PADDING, [len(u) for u in units])
        if all(len(unit) == 1 for unit in units):
            groups = _no_singletons(groups)
        for group in groups:
            members = [it for i in group for it in units[i]]
            members = [it for it in members if not it.is_view] + [
                it for it in members if it.is_view
            ]
            batches.append(_pad(eval_set, members, pad_id))
    return batches


def _units(items: list[EvalItem]) -> list[list[EvalItem]]:
    """The sequences that must share a batch: an encoder's retrieval group (sentences and views,
    each sentence before its view), else each sequence alone."""
    units: list[list[EvalItem]] = []
    groups: dict[int, list[EvalItem]] = {}  # a group's unit, by its first sentence's index
    for it in items:
        if it.group is None:
            units.append([it])
        elif it.group in groups:
            groups[it.group].append(it)
        else:
            groups[it.group] = [it]
            units.append(groups[it.group])
    return [sorted(unit, key=lambda it: (it.index, it.is_view)) for unit in units]


def bucket_tight(
    lengths: list[int],
    max_tokens: int,
    max_padding: float = MAX_PADDING,
    rows: list[int] | None = None,
) -> list[list[int]]:
    """Indices grouped by length: each group under ``max_tokens`` padded tokens *and* at most
    ``max_padding`` of it padding. Padding costs a full forward per token, and an exact sweep
    pays it once per head, so a few more (smaller) batches are cheaper than loose ones.
    ``rows``: the sequences each index stands for (1 each by default), all counted at its length;
    one that alone exceeds ``max_tokens`` gets a group of its own."""
    rows = rows or [1] * len(lengths)
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    groups: list[list[int]] = []
    current: list[int] = []
    real = n_rows = 0
    for i in order:
        width = lengths[i]  # ascending: the newest is the widest
        padded = width * (n_rows + rows[i])
        if current and (padded > max_tokens or 1 - (real + width * rows[i]) / padded > max_padding):
            groups.append(current)
            current, real, n_rows = [], 0, 0
        current.append(i)
        real += width * rows[i]
        n_rows += rows[i]
    if current:
        groups.append(current)
    return groups


def _no_singletons(groups: list[list[int]]) -> list[list[int]]:
    """Merge every one-sequence group into its neighbour (the next, or the previous for the
    last): a lone sequence has no resample donor and, in an encoder, no retrieval negatives."""
    out: list[list[int]] = []
    carry: list[int] = []
    for group in groups:
        group = carry + group
        carry = []
        if len(group) == 1:
            carry = group
        else:
            out.append(group)
    if carry:
        if out:
            out[-1] += carry
        else:
            out.append(carry)
    return out


def _pad(eval_set: str, members: list[EvalItem], pad_id: int) -> EvalBatch:
    n, width = len(members), max(len(it.tokens) for it in members)
    tokens = torch.full((n, width), pad_id, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    for i, it in enumerate(members):
        tokens[i, : len(it.tokens)] = it.tokens
        mask[i, : len(it.tokens)] = 1
    rows = [(i, it) for i, it in enumerate(members) if len(it.rows)]
    cat = lambda xs: torch.cat(xs) if xs else torch.zeros(0, dtype=torch.long)  # noqa: E731
    is_view = torch.tensor([it.is_view for it in members])
    group = [-1 if it.group is None else it.group for it in members]
    return EvalBatch(
        eval_set=eval_set,
        tokens=tokens,
        attention_mask=mask,
        index=torch.tensor([it.index for it in members]),
        is_view=is_view,
        group=torch.tensor(group, dtype=torch.long),
        donor=derangement(is_view),
        row_batch=cat([torch.full((len(it.rows),), i) for i, it in rows]),
        row_pos=cat([it.rows for _, it in rows]),
        row_target=cat([it.targets for _, it in rows]),
        row_wrong=cat([it.wrong for _, it in rows]) if eval_set == SV_LOGIT_DIFF else None,
        score=members[0].score,
        row_fields=_row_fields(members),
    )


def _row_fields(members: list[EvalItem]) -> dict[str, torch.Tensor]:
    """Each task field as one value per scored row (in row order): its sequence's value, repeated
    over its rows (long for whole numbers, float64 otherwise: the dtype tasks.Task settled)."""
    out = {}
    for name, first in members[0].fields.items():
        dtype = torch.long if isinstance(first, int) else torch.float64
        out[name] = torch.cat(
            [torch.full((len(it.rows),), it.fields[name], dtype=dtype) for it in members]
        )
    return out


def derangement(group: torch.Tensor) -> torch.Tensor:
    """Each sequence's donor: the next one of the same group (sentences / views), cyclically.

    A causal batch is sorted by length, so the donor is about as long as the recipient; an
    encoder batch holds whole retrieval groups in index order, so its donor may be of any length.
    A group of one donates to itself (the caller falls back to the mean there).
    """
    donor = torch.arange(len(group))
    for value in (False, True):
        members = torch.nonzero(group == value).flatten()
        donor[members] = members.roll(-1)
    return donor

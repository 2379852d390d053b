# Over 400 lines: the evaluation corpus from sequences to batches, in one place.
"""The evaluation corpus of the ablate stage: which sequences, which positions each metric reads.

Causal LMs get three eval sets, each batched on its own (so that a resampled head output always
comes from a sequence of the same eval set):

- ``loss_prose``: every second line of the shipped prose corpus (lines 1, 3, 5, ... counted from
  0), the first ``n_prose`` of them; every next-token prediction inside a line is scored.
- ``loss_repeated``: ``[BOS] r r`` sequences of uniformly random tokens, drawn with a seed offset
  from the collect stage's so they are new sequences; scored on the repeated half from its
  second token on (the first token of the repeat cannot be predicted by copying).
- ``sv_logit_diff``: generated syntax sentences cut just before the main verb; the readout is the
  logit of the first sub-token of " correct" minus that of " wrong" at the last prefix position.
  Sentences whose two forms share their first sub-token, or whose verb merges with the prefix
  when tokenized, are dropped.

Encoders get one eval set: prose lines (the same subset) as sentence A, and for each a view B
with about a fifth of its word tokens deleted (seeded), which ``retrieval_margin`` needs. The
sentences are cut, in index order, into fixed retrieval groups of ``RETRIEVAL_GROUP`` (the last
one takes the remainder): a sentence's distractors are the other views of its group, so a group
and its views always share a batch, a round's slice and an estimator's tier, and the metric is
the same whatever the pass size or the slicing.

A user's own sequences (``--eval-corpus FILE``, :func:`read_eval_corpus`) add a fourth causal
eval set, ``loss_corpus``: every next-token prediction inside a sequence is scored, as for prose;
an encoder takes them instead of the prose lines.

Split 1 is a second corpus of the same make-up with no sequence in common: the even prose
lines, other random sequences, other syntax sentences, the user corpus's other half (its
sequences 1, 3, 5, ...; split 0 has 0, 2, 4, ...). The pruning curve is measured on it,
because its order comes from effects measured on split 0: on the same sequences, heads whose
removal happened to help those few sequences would make pruning look free.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

from interp.ablate.catalogue import CORPUS, ENCODER, LOSS_PROSE, LOSS_REPEATED, SV_LOGIT_DIFF
from interp.ablate.tasks import Task
from interp.errors import ConfigError, CorpusError
from interp.probes.align import Aligner, Unencodable
from interp.probes.base import NATURAL, ProbeSequence, Sentence, Suite

REPEAT_SEED_OFFSET = 7919  # new random sequences, not the ones the collect stage looked at
SPLIT_SEED_OFFSET = 104729  # split 1 (the pruning curve's held-out half) draws other sequences
VIEW_DROP = 0.2
MAX_PADDING = 0.15  # share of a batch that may be padding
# Sentences per retrieval group (encoders): each finds its own view among the group's views. Fixed,
# not "the batch", so that the metric does not change with the pass size (a device's memory) or
# the round's slice; 8 sentences and 8 views of up to about 120 tokens fit one CPU pass.
RETRIEVAL_GROUP = 8


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


# --- building ------------------------------------------------------------------------------


def prose_subset(n: int, split: int = 0) -> Suite:
    """The first ``n`` lines of one half of the prose corpus: odd lines (split 0), even (split 1)."""
    from interp.probes.prose import prose_suite

    suite = prose_suite()
    return Suite(suite.name, suite.kind, suite.sentences[1 - split :: 2][:n], suite.card)


def read_eval_corpus(path: str, limit: int | None = None) -> Suite:
    """The user's evaluation sequences (.txt: one a line; .jsonl / .csv: the ``text`` field),
    CorpusError in one line when the file is missing, empty, malformed or holds one sequence."""
    from interp.probes.readers import read_corpus

    sentences = read_corpus(path, None, limit)
    if len(sentences) < 2:
        raise CorpusError(
            f"{path}: the evaluation corpus holds 1 sequence; give at least 2 (half measure the "
            f"effects, the other half the pruning curve)"
        )
    return Suite(f"eval:{path}", NATURAL, tuple(sentences))


def user_half(suite: Suite, split: int) -> Suite:
    """Sequences 0, 2, 4, ... (split 0) or 1, 3, 5, ... (split 1) of a user corpus."""
    return Suite(suite.name, suite.kind, suite.sentences[split::2], suite.card)


def causal_items(
    model,
    n_prose: int,
    n_repeated: int,
    repeated_lengths: tuple[int, ...],
    n_syntax: int,
    seed: int,
    max_len: int | None = None,
    split: int = 0,
    user: Suite | None = None,
    tasks: tuple = (),
) -> list[EvalItem]:

    aligner = Aligner(model, max_len)
    items: list[EvalItem] = []
    for task in tasks:
        items += task_items(aligner, task, split, model.d_vocab)
    if n_prose:
        for i, seq in enumerate(aligner.encode_suite(prose_subset(n_prose, split))):
            items.append(_loss_item(seq, LOSS_PROSE, i, start=0))
    if user is not None:
        for i, seq in enumerate(aligner.encode_suite(user_half(user, split))):
            items.append(_loss_item(seq, CORPUS, i, start=0))
    if n_repeated:
        repeat_seed = seed + REPEAT_SEED_OFFSET + split * SPLIT_SEED_OFFSET
        for i, seq in enumerate(aligner.repeated(n_repeated, repeated_lengths, repeat_seed)):
            prefix = int(seq.is_special.sum())
            half = (len(seq) - prefix) // 2
            items.append(_loss_item(seq, LOSS_REPEATED, i, start=prefix + half))
    if n_syntax:
        items += _sv_items(aligner, n_syntax, seed + split * SPLIT_SEED_OFFSET)
    return scorable(items, model.d_vocab_out)


def task_items(aligner: Any, task: Task, split: int, d_vocab: int) -> list[Any]:
    """The EvalItems of one half of a task (sequences ``split``, ``split + 2``, ...)."""
    items: list[Any] = []
    for i in range(split, len(task.sequences), 2):
        tokens, shift, special = encode_task_sequence(aligner, task, i, d_vocab)
        rows = _task_rows(task, i, tokens, special, shift)
        items.append(
            EvalItem(
                tokens,
                task.name,
                len(items),
                rows,
                tokens[rows + 1],
                score=task.metric,
                fields=task.fields_of(i),
            )
        )
    return items


def encode_task_sequence(aligner: Any, task: Task, i: int, d_vocab: int) -> tuple[Any, int, Any]:
    """Sequence ``i`` of a task as the model sees it: (tokens ``[pos]``, the shift from a position
    as written to one in ``tokens`` (1 where a BOS is prepended), which tokens are special)."""
    sequence = task.sequences[i]
    if isinstance(sequence, str):
        seq = aligner.encode(Sentence(sequence), Suite(f"task:{task.name}", NATURAL))
        tokens, shift, special = seq.tokens, int(aligner.bos_policy == "prepend"), seq.is_special
    else:
        tokens, shift = torch.tensor(sequence, dtype=torch.long), 0
        special = torch.zeros(len(tokens), dtype=torch.bool)
    if len(tokens) and not 0 <= int(tokens.min()) <= int(tokens.max()) < d_vocab:
        raise ConfigError(
            f"task {task.name!r}, sequence {i}: token ids outside the model's {d_vocab}-id embedding"
        )
    return tokens, shift, special


def _task_rows(task: Task, i: int, tokens: Any, special: Any, shift: int) -> Any:
    """Positions (in the encoded sequence) whose next-token prediction the task scores."""
    if task.positions is None:
        rows = torch.arange(len(tokens) - 1)
        return rows[~special[rows + 1]]
    rows = torch.tensor(task.positions[i], dtype=torch.long) + shift
    bad = [p for p, r in zip(task.positions[i], rows.tolist()) if not 0 <= r < len(tokens) - 1]
    if bad:
        raise ConfigError(
            f"task {task.name!r}, sequence {i}: position {bad[0]} has no next token in the "
            f"{len(tokens) - shift} tokens the model sees; positions count from 0 and score token p + 1"
        )
    return rows


def scorable(items: list[EvalItem], vocab_out: int) -> list[EvalItem]:
    """``items`` without the rows whose token has no logit (ids >= ``vocab_out``, a model whose
    output vocabulary is smaller than its tokenizer's), with one warning saying how many."""
    out: list[EvalItem] = []
    dropped = 0
    for it in items:
        keep = it.targets < vocab_out
        if it.wrong is not None:
            keep &= it.wrong < vocab_out
        dropped += int((~keep).sum())
        if it.eval_set == SV_LOGIT_DIFF and not bool(keep.all()):
            continue  # its one row cannot be read: the sentence leaves the eval set
        out.append(
            EvalItem(
                it.tokens,
                it.eval_set,
                it.index,
                it.rows[keep],
                it.targets[keep],
                None if it.wrong is None else it.wrong[keep],
                it.is_view,
                it.score,
                it.fields,
                it.group,
            )
        )
    if dropped:
        warnings.warn(
            f"{dropped} scored token(s) lie outside the model's {vocab_out} output logits "
            "and are not scored",
            stacklevel=3,
        )
    return _renumbered(out)


def _renumbered(items: list[EvalItem]) -> list[EvalItem]:
    """Indices 0..n-1 within each eval set again, after sequences were dropped."""
    seen: dict[str, int] = {}
    for it in items:
        it.index = seen.setdefault(it.eval_set, 0)
        seen[it.eval_set] += 1
    return items


def _loss_item(seq: ProbeSequence, eval_set: str, index: int, start: int) -> EvalItem:
    """Score predictions made at positions >= start of every ordinary (non-special) next token."""
    pos = torch.arange(start, len(seq) - 1)
    pos = pos[~seq.is_special[pos + 1]]
    return EvalItem(seq.tokens, eval_set, index, pos, seq.tokens[pos + 1])


def _sv_items(aligner: Aligner, n: int, seed: int) -> list[EvalItem]:
    from interp.probes.grammar import syntax_suite

    suite = syntax_suite(n, seed)
    items: list[EvalItem] = []
    for sentence in suite.sentences:
        agree = sentence.agreement
        if agree is None:  # the syntax suite gives every sentence one
            continue
        prefix = sentence.text[: sentence.words[agree.verb][0]].rstrip()
        try:
            seq = _strip_trailing_special(aligner.encode(Sentence(prefix), suite))
            correct = _next_token(aligner, seq, prefix, agree.correct, suite)
            wrong = _next_token(aligner, seq, prefix, agree.wrong, suite)
        except Unencodable:  # outside this model's vocabulary: the sentence is not used
            continue
        if correct is None or wrong is None or correct == wrong:
            continue
        last = torch.tensor([len(seq) - 1])
        items.append(
            EvalItem(
                seq.tokens,
                SV_LOGIT_DIFF,
                len(items),
                last,
                torch.tensor([correct]),
                torch.tensor([wrong]),
            )
        )
    return items


def _strip_trailing_special(seq: ProbeSequence) -> ProbeSequence:
    end = len(seq)
    while end > 1 and seq.is_special[end - 1]:
        end -= 1
    return ProbeSequence(
        seq.tokens[:end], seq.suite, seq.kind, seq.is_delim[:end], seq.is_special[:end]
    )


def _next_token(
    aligner: Aligner, prefix: ProbeSequence, text: str, word: str, suite: Suite
) -> int | None:
    """First sub-token of `` word`` after the prefix, or None if tokenizing merges across the cut."""
    full = _strip_trailing_special(aligner.encode(Sentence(f"{text} {word}"), suite)).tokens
    n = len(prefix.tokens)
    if len(full) <= n or not torch.equal(full[:n], prefix.tokens):
        return None
    return int(full[n])


def encoder_items(
    model,
    n_prose: int,
    seed: int,
    max_len: int | None = None,
    split: int = 0,
    user: Suite | None = None,
) -> list[EvalItem]:
    """Prose lines (or the user's sequences) and, for each, a view with ~20% of its word tokens
    deleted (at least one)."""
    aligner = Aligner(model, max_len)
    gen = torch.Generator().manual_seed(seed + split * SPLIT_SEED_OFFSET)
    items: list[EvalItem] = []
    empty = torch.zeros(0, dtype=torch.long)
    sentences = user_half(user, split) if user is not None else prose_subset(n_prose, split)
    encoded = aligner.encode_suite(sentences)
    last = max(len(encoded) // RETRIEVAL_GROUP, 1) - 1  # the last group takes the remainder
    for i, seq in enumerate(encoded):
        group = min(i // RETRIEVAL_GROUP, last) * RETRIEVAL_GROUP
        items.append(EvalItem(seq.tokens, ENCODER, i, empty, empty, group=group))
        inner = torch.nonzero(~seq.is_special).flatten()
        n_drop = max(1, round(VIEW_DROP * len(inner))) if len(inner) > 1 else 0
        drop = inner[torch.randperm(len(inner), generator=gen)[:n_drop]]
        keep = torch.ones(len(seq), dtype=torch.bool)
        keep[drop] = False
        items.append(
            EvalItem(seq.tokens[keep], ENCODER, i, empty, empty, is_view=True, group=group)
        )
    return items


# --- batching ------------------------------------------------------------------------------


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
    units: dict[tuple[int, int], list[EvalItem]] = {}
    for it in items:
        key = (it.group, -1) if it.group is not None else (it.index, len(units))
        units.setdefault(key, []).append(it)
    return [sorted(unit, key=lambda it: (it.index, it.is_view)) for unit in units.values()]


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

    Batches are sorted by length, so the donor is about as long as the recipient; a group of
    one donates to itself (the caller falls back to the mean there).
    """
    donor = torch.arange(len(group))
    for value in (False, True):
        members = torch.nonzero(group == value).flatten()
        donor[members] = members.roll(-1)
    return donor


def build_corpus(
    model,
    n_prose: int,
    n_repeated: int,
    repeated_lengths: tuple[int, ...],
    n_syntax: int,
    seed: int,
    max_tokens: int,
    split: int = 0,
    user: Suite | None = None,
    tasks: tuple = (),
) -> EvalCorpus:
    """The whole evaluation corpus, encoded and batched for ``model``.

    ``split`` picks one of two disjoint halves of the same size and make-up: 0 measures the
    effects (and so orders the pruning curve), 1 is held out to measure the pruning curve.
    ``user``: the user's sequences (:func:`read_eval_corpus`), the ``loss_corpus`` eval set;
    ``tasks``: user metrics defined in Python (:mod:`interp.ablate.tasks`), causal LMs only.
    """
    if split not in (0, 1):
        raise ValueError(f"split must be 0 or 1, got {split!r}")
    if model.causal:
        items = causal_items(
            model,
            n_prose,
            n_repeated,
            repeated_lengths,
            n_syntax,
            seed,
            split=split,
            user=user,
            tasks=tasks,
        )
    else:
        items = encoder_items(model, n_prose, seed, split=split, user=user)
    pad = model.tokenizer.pad_token_id or 0
    sizes: dict[str, int] = {}
    for it in items:
        sizes[it.eval_set] = max(sizes.get(it.eval_set, 0), it.index + 1)
    return EvalCorpus(items, make_batches(items, max_tokens, pad), sizes)

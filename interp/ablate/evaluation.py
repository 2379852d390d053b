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
from typing import Any

import torch

from interp.ablate.batches import EvalCorpus, EvalItem, make_batches
from interp.ablate.catalogue import CORPUS, ENCODER, LOSS_PROSE, LOSS_REPEATED, SV_LOGIT_DIFF
from interp.ablate.tasks import Task
from interp.errors import ConfigError, CorpusError
from interp.probes.align import Aligner, Unencodable
from interp.probes.base import NATURAL, ProbeSequence, Sentence, Suite

REPEAT_SEED_OFFSET = 7919  # new random sequences, not the ones the collect stage looked at
SPLIT_SEED_OFFSET = 104729  # split 1 (the pruning curve's held-out half) draws other sequences
VIEW_DROP = 0.2
# Sentences per retrieval group (encoders): each finds its own view among the group's views. Fixed,
# not "the batch", so that the metric does not change with the pass size (a device's memory) or
# the round's slice; 8 sentences and 8 views of up to about 120 tokens fit one CPU pass.
RETRIEVAL_GROUP = 8


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

"""Tasks that force attention heads to do one job: data generators for small trained transformers.

A task makes batches of ``[BOS] x_1 .. x_T`` over the toy vocabulary (interp.synthetic.toy: the
numbered words ``t0 .. t127`` behind a word-level tokenizer), with a target token and a loss
mask per position. Nothing tells the model how to solve it; each task is only solvable by
attending somewhere specific, which is what makes its trained heads a test of the head-role
classifier that the toolkit did not build (interp.synthetic.identify finds out, by intervention,
what each trained head really does):

===============  =====================================================  ==========================
task             target at position q                                   what a head must do
===============  =====================================================  ==========================
``copy``         x_{q-1}: copy with an offset of one                    attend to q-1
``induction``    the next token of random text with a repeat (toy.py)   q-1, then after a copy
``duplicates``   "t1" if x_q occurred before, else "t0"                 attend to earlier copies
``position``     x_k for a fixed k (1, 2 or 3 by seed)                  attend to position k
``majority``     "t0" if more of x_1..x_q are even-numbered, else "t1"  average over the text
``successor``    x_{q-1} + 1, over the numbers 0 .. 127                 attend to q-1, write the
                                                                        next number
``unseen``       the next item of a shuffle of its 48 words, which is   average over what came
                 one not yet seen                                       before, write against it
===============  =====================================================  ==========================

Some tasks also force what a needed head *writes* (``ForcedTask.writes``, a role of
interp.roles): the answer of ``copy`` and ``position`` is the token a head attends to, so it must
copy it (an attention-only model has no other path); ``successor``'s is the next number (its
words are the numbers, which the successor score reads as an ordinal sequence); ``unseen``'s is
any word the head has *not* attended to, so it must write against what it attends to (copy
suppression); ``duplicates`` and ``majority`` answer with a label word, so their heads write
neither copies nor successors ("none"). ``induction`` grows heads of two kinds and forces none.

A task is just its generator (:class:`ForcedTask.make`) and the size of model it needs, so it plugs
into any trainer that maps (tokens, targets, mask) batches to a loss; interp.synthetic.trained
is the small one used here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from interp.synthetic.toy import VOCAB, copy_batch

SEQ_LEN = 48  # tokens after BOS: longer than every probe the validation collects on
LABELS = ("t0", "t1")  # answer words of the yes/no tasks, never drawn as input


@dataclass(frozen=True)
class Ids:
    """Token ids of a tokenizer over the toy vocabulary."""

    bos: int
    pool: torch.Tensor  # long [word]: input words (the answer words excluded)
    no: int
    yes: int

    @classmethod
    def of(cls, tokenizer, vocab: tuple[str, ...] = VOCAB) -> "Ids":
        words = [w for w in vocab if w not in LABELS]
        return cls(
            tokenizer.bos_token_id,
            torch.tensor(tokenizer.convert_tokens_to_ids(words)),
            *tokenizer.convert_tokens_to_ids(list(LABELS)),
        )


@dataclass(frozen=True)
class ForcedBatch:
    tokens: torch.Tensor  # long [batch, pos]
    targets: torch.Tensor  # long [batch, pos]: what the model must output at each position
    mask: torch.Tensor  # bool [batch, pos]: positions the loss reads


@dataclass(frozen=True)
class ForcedTask:
    name: str
    make: Callable[
        [int, torch.Generator, Ids, int], ForcedBatch
    ]  # (batch size, generator, ids, seed)
    n_layers: int
    n_heads: int
    steps: int
    words: tuple[str, ...] = VOCAB  # the model's vocabulary
    writes: str | None = None  # what the heads it needs must write (a write role, or "none")


def _random(n: int, gen: torch.Generator, ids: Ids, vocab: int | None = None) -> torch.Tensor:
    """long [n, 1 + SEQ_LEN]: BOS then uniform words (from a random ``vocab``-word subset per row)."""
    if vocab is None:
        body = ids.pool[torch.randint(len(ids.pool), (n, SEQ_LEN), generator=gen)]
    else:
        subsets = torch.rand(n, len(ids.pool), generator=gen).argsort(-1)[:, :vocab]
        body = ids.pool[subsets.gather(1, torch.randint(vocab, (n, SEQ_LEN), generator=gen))]
    return torch.cat([torch.full((n, 1), ids.bos), body], 1)


def copy(n: int, gen: torch.Generator, ids: Ids, seed: int) -> ForcedBatch:
    tokens = _random(n, gen, ids)
    targets = torch.roll(tokens, 1, dims=1)
    mask = torch.zeros_like(tokens, dtype=torch.bool)
    mask[:, 2:] = True  # from the second word on: its predecessor is a word
    return ForcedBatch(tokens, targets, mask)


def induction(n: int, gen: torch.Generator, ids: Ids, seed: int) -> ForcedBatch:
    tokens, _ = copy_batch(n, ids.pool, ids.bos, gen)  # SEQ_LEN of toy.py: the toy's own data
    targets = torch.roll(tokens, -1, dims=1)
    mask = torch.ones_like(tokens, dtype=torch.bool)
    mask[:, -1] = False
    return ForcedBatch(tokens, targets, mask)


def duplicates(n: int, gen: torch.Generator, ids: Ids, seed: int) -> ForcedBatch:
    tokens = _random(n, gen, ids, vocab=24)  # 48 draws from 24 words: about half have been seen
    same = tokens[:, :, None] == tokens[:, None, :]
    seen = (same & torch.ones_like(same[0]).tril(-1)).any(-1)
    targets = torch.where(seen, ids.yes, ids.no)
    mask = torch.ones_like(tokens, dtype=torch.bool)
    mask[:, 0] = False
    return ForcedBatch(tokens, targets, mask)


def position_of(seed: int) -> int:
    """The position the ``position`` task asks for with this seed."""
    return 1 + seed % 3


def position(n: int, gen: torch.Generator, ids: Ids, seed: int) -> ForcedBatch:
    k = position_of(seed)
    tokens = _random(n, gen, ids)
    targets = tokens[:, k : k + 1].expand_as(tokens)
    mask = torch.zeros_like(tokens, dtype=torch.bool)
    mask[:, k + 1 :] = True
    return ForcedBatch(tokens, targets.clone(), mask)


def majority(n: int, gen: torch.Generator, ids: Ids, seed: int) -> ForcedBatch:
    tokens = _random(n, gen, ids)
    even = ids.pool[::2]
    p_even = torch.rand(n, 1, generator=gen) * 0.6 + 0.2  # each row leans its own way
    use_even = torch.rand(n, SEQ_LEN, generator=gen) < p_even
    pick = lambda words: words[torch.randint(len(words), (n, SEQ_LEN), generator=gen)]  # noqa: E731
    tokens[:, 1:] = torch.where(use_even, pick(even), pick(ids.pool[1::2]))
    is_even = torch.isin(tokens, even)
    lead = 2 * is_even.long() - 1
    lead[:, 0] = 0
    lead = lead.cumsum(1)  # (# even) - (# odd) among x_1 .. x_q
    targets = torch.where(lead > 0, ids.no, ids.yes)
    mask = lead != 0
    mask[:, 0] = False
    return ForcedBatch(tokens, targets, mask)


def successor(n: int, gen: torch.Generator, ids: Ids, seed: int) -> ForcedBatch:
    tokens = _random(n, gen, Ids(ids.bos, ids.pool[:-1], ids.no, ids.yes))
    targets = torch.roll(tokens, 1, dims=1) + 1  # the words are the numbers, in id order
    mask = torch.zeros_like(tokens, dtype=torch.bool)
    mask[:, 2:] = True
    return ForcedBatch(tokens, targets, mask)


def unseen(n: int, gen: torch.Generator, ids: Ids, seed: int) -> ForcedBatch:
    words = ids.pool[:UNSEEN_WORDS]  # the task's whole vocabulary: every token it is scored on
    order = torch.rand(n, UNSEEN_WORDS, generator=gen).argsort(-1)
    tokens = torch.cat([torch.full((n, 1), ids.bos), words[order]], 1)
    targets = torch.roll(tokens, -1, dims=1)
    mask = torch.ones_like(tokens, dtype=torch.bool)
    mask[:, 0] = mask[:, -1] = False  # after a word, predict the next (one not yet seen)
    return ForcedBatch(tokens, targets, mask)


UNSEEN_WORDS = 48
NUMBERS = tuple(str(i) for i in range(128))
UNSEEN = VOCAB[2 : 2 + UNSEEN_WORDS]  # no label word among them

TASKS: dict[str, ForcedTask] = {
    t.name: t
    for t in (
        ForcedTask("copy", copy, n_layers=1, n_heads=4, steps=600, writes="copying"),
        ForcedTask("induction", induction, n_layers=2, n_heads=4, steps=1500),
        ForcedTask("duplicates", duplicates, n_layers=1, n_heads=4, steps=800, writes="none"),
        ForcedTask("position", position, n_layers=1, n_heads=4, steps=600, writes="copying"),
        ForcedTask("majority", majority, n_layers=1, n_heads=4, steps=800, writes="none"),
        ForcedTask(
            "successor",
            successor,
            n_layers=1,
            n_heads=4,
            steps=800,
            words=NUMBERS,
            writes="successor",
        ),
        ForcedTask(
            "unseen",
            unseen,
            n_layers=1,
            n_heads=4,
            steps=800,
            words=UNSEEN,
            writes="copy_suppression",
        ),
    )
}
ATTENTION_TASKS = ("copy", "induction", "duplicates", "position", "majority")  # trained_validation

"""Two relationships at one position: a verb whose lemma the previous word gives and whose number
the subject gives, both read from words of the same kind.

Every *content word* ``n{L}{s|p}`` carries a lemma class ``L`` and a number (singular ``s``,
plural ``p``). Each sequence is ``[BOS]``, a content word as the *subject* (at position 1 by
default; anywhere in the first ``max_subject`` positions otherwise), filler words ``f{i}``,
``n_distractors`` further random content words, and ``n_slots`` verb slots ``cue x verb``: the
cue is a random content word, ``x`` any filler, and the verb is ``v{L}{s|p}`` with the *cue's*
lemma and the *subject's* number. Only verbs are scored, so the position that predicts a verb
(``x``) must read two words at once: the one right before it (distractors make position q-1 the
only way to tell the cue) and the subject, 2 to ``seq_len`` tokens back. One slot per sequence by
default: with several, earlier verbs already carry the subject's number and can stand in for it.

Why one kind of word for both: a head's output is a weighted sum of value vectors, linear in
the words it attends to. One head attending to cue and subject gets ``a V(cue) + b V(subject)``,
one pair of weights for both attributes, so it has no direct way to take the lemma from one
word and the number from the other (weights that favour the cue's lemma favour the cue's number
too). Two heads can each attend to one word and write to different subspaces, which the readout
tells apart. Whether trained models find either solution is what the experiment measures.

The foil of a verb is the same lemma with the other number, so ``foil_acc`` is the number
accuracy; :attr:`RelationsTask.verb_grid` lets a caller score lemma and number apart. Parts:
``verb`` (every scored target). :meth:`RelationsTask.positions` gives, per verb, the positions
of its query, cue and subject, for reading attention.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from interp.synthetic.train import TrainingBatch

VERSION = 3
NUMBERS = ("s", "p")


@dataclass(frozen=True)
class RelationsTask:
    seq_len: int = 32
    n_lemmas: int = 6
    n_fillers: int = 24
    n_slots: int = 1
    n_distractors: int = 3
    max_subject: int = 1
    name: str = "relations"

    def __post_init__(self) -> None:
        if (
            min(self.n_lemmas, self.n_fillers, self.n_slots, self.max_subject) < 1
            or self.n_distractors < 0
        ):
            raise ValueError("every count must be >= 1 (n_distractors >= 0)")
        if self.max_subject + 1 + 3 * self.n_slots + self.n_distractors > self.seq_len:
            raise ValueError("seq_len is too short for the subject and the verb slots")

    @property
    def content_grid(self) -> tuple[tuple[str, str], ...]:
        """(singular, plural) content word per lemma."""
        return tuple((f"n{i}s", f"n{i}p") for i in range(self.n_lemmas))

    @property
    def verb_grid(self) -> tuple[tuple[str, str], ...]:
        """(singular, plural) verb per lemma."""
        return tuple((f"v{i}s", f"v{i}p") for i in range(self.n_lemmas))

    @property
    def words(self) -> tuple[str, ...]:
        fillers = tuple(f"f{i}" for i in range(self.n_fillers))
        return (
            tuple(w for grid in (self.content_grid, self.verb_grid) for pair in grid for w in pair)
            + fillers
        )

    def params(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "seq_len": self.seq_len,
            "n_lemmas": self.n_lemmas,
            "n_fillers": self.n_fillers,
            "n_slots": self.n_slots,
            "n_distractors": self.n_distractors,
            "max_subject": self.max_subject,
        }

    def batch(self, n: int, gen: torch.Generator, tok: Any) -> TrainingBatch:
        ids = tok.convert_tokens_to_ids
        fillers = torch.tensor(ids([f"f{i}" for i in range(self.n_fillers)]))
        content = torch.tensor([ids(list(pair)) for pair in self.content_grid])  # [lemma, number]
        verbs = torch.tensor([ids(list(pair)) for pair in self.verb_grid])  # [lemma, number]
        tokens = fillers[torch.randint(self.n_fillers, (n, self.seq_len), generator=gen)]
        tokens[:, 0] = tok.bos_token_id
        subject = torch.randint(1, self.max_subject + 1, (n,), generator=gen)
        number = torch.randint(2, (n,), generator=gen)
        tokens[torch.arange(n), subject] = content[
            torch.randint(self.n_lemmas, (n,), generator=gen), number
        ]
        scored = torch.zeros(n, self.seq_len, dtype=torch.bool)
        foil = torch.zeros(n, self.seq_len, dtype=torch.long)
        for row in range(n):
            slots = self._slots(int(subject[row]), gen)
            taken = {p for cue in slots for p in (cue, cue + 1, cue + 2)}
            free = [p for p in range(int(subject[row]) + 1, self.seq_len) if p not in taken]
            for k in torch.randperm(len(free), generator=gen)[: self.n_distractors].tolist():
                tokens[row, free[k]] = content.flatten()[
                    int(torch.randint(content.numel(), (1,), generator=gen))
                ]
            for cue in slots:
                lemma = int(torch.randint(self.n_lemmas, (1,), generator=gen))
                cue_number = int(torch.randint(2, (1,), generator=gen))
                tokens[row, cue] = content[lemma, cue_number]
                tokens[row, cue + 2] = verbs[lemma, number[row]]
                foil[row, cue + 2] = verbs[lemma, 1 - number[row]]
                scored[row, cue + 2] = True
        return TrainingBatch(
            tokens, scored, {"verb": scored.clone()}, foil=foil, foil_at=scored.clone()
        )

    def _slots(self, subject: int, gen: torch.Generator) -> list[int]:
        """Cue positions of the verb slots: after the subject, three tokens each, never overlapping."""
        free = (
            self.seq_len - subject - 1 - 3 * self.n_slots
        )  # filler tokens to spread between slots
        gaps = torch.sort(torch.randint(free + 1, (self.n_slots,), generator=gen)).values
        return [subject + 1 + int(gap) + 3 * i for i, gap in enumerate(gaps)]

    def positions(self, batch: TrainingBatch, tok: Any) -> dict[str, torch.Tensor]:
        """Per scored verb: ``row``, ``query`` (the position that predicts it), ``cue`` (query - 1)
        and ``subject`` (the first content word of its sequence); all long [verb]."""
        content = torch.tensor(
            tok.convert_tokens_to_ids([w for pair in self.content_grid for w in pair])
        )
        first = torch.isin(batch.tokens, content).float().argmax(1)
        row, verb = batch.scored.nonzero(as_tuple=True)
        return {"row": row, "query": verb - 1, "cue": verb - 2, "subject": first[row]}

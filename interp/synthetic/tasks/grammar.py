"""The grammar language as a training task: sentences of :mod:`interp.probes.grammar`, packed.

Each sequence is ``[BOS]`` followed by pieces back to back, cut at ``seq_len`` tokens. The first
piece is a generated sentence (ending with its period); each next one is, with probability
``p_repeat``, a *repeated span*: 4-16 tokens copied from a random earlier place of the sequence,
so that copying pays off (induction heads); else, with probability ``p_scramble``, 4-16
vocabulary words in random order, which only a later copy can predict; else a new sentence.

Why spans start anywhere and why scrambled pieces: with whole sentences repeated, a repeat can be
found by position within the sentence, and a 2-layer model trained so grew no induction head;
with spans but no scrambled pieces, it learned to copy grammar text yet grew no head that copies
random words, i.e. none that the toolkit's repeated-token probes would call induction.

The sentences reward what the grammar encodes: agreement of the main verb with a subject up to
12+ words back across attractor nouns, determiners and adjectives before their noun,
punctuation that closes a sentence or a fronted phrase.

Every target after BOS is scored. Logged parts: ``agreement`` (the main verb of a fresh sentence,
with the other-number form as foil, so ``foil_acc`` is agreement accuracy), ``repeat`` (tokens of
a repeated span after its first, which copying predicts) and ``punctuation``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import torch

from interp.probes.grammar import PUNCT, stream_syntax, vocabulary
from interp.synthetic.train import TrainingBatch

VERSION = 3  # bump when the data changes, so that cached models of the old data are not reused
SPAN = (4, 16)  # length of a repeated span, uniform


@dataclass(frozen=True)
class GrammarTask:
    seq_len: int = (
        65  # BOS + 64: the collect stage's longest repeated probe ([BOS] r r, 32 tokens in r) fits
    )
    p_repeat: float = 0.6
    p_scramble: float = 0.2
    name: str = "grammar"

    def __post_init__(self) -> None:
        if self.seq_len < 8:
            raise ValueError("seq_len must be >= 8")
        if not 0 <= self.p_repeat <= 1:
            raise ValueError("p_repeat must be in [0, 1]")

    @property
    def words(self) -> tuple[str, ...]:
        return vocabulary()

    @property
    def plain_words(self) -> tuple[str, ...]:
        return tuple(w for w in self.words if w not in PUNCT)

    def params(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "seq_len": self.seq_len,
            "p_repeat": self.p_repeat,
            "p_scramble": self.p_scramble,
            "span": SPAN,
            "n_words": len(self.words),
        }

    def batch(self, n: int, gen: torch.Generator, tok: Any) -> TrainingBatch:
        ids = tok.get_vocab()
        shape = (n, self.seq_len)
        tokens = torch.full(shape, tok.pad_token_id, dtype=torch.long)
        parts = {
            name: torch.zeros(shape, dtype=torch.bool)
            for name in ("agreement", "repeat", "punctuation")
        }
        foil = torch.zeros(shape, dtype=torch.long)
        for row in range(n):
            rng = random.Random(int(torch.randint(2**62, (1,), generator=gen)))
            self._fill(row, rng, ids, tok.bos_token_id, tokens, parts, foil)
        scored = torch.ones(shape, dtype=torch.bool)
        scored[:, 0] = False
        parts["punctuation"] = torch.isin(tokens, torch.tensor([ids[p] for p in PUNCT])) & scored
        return TrainingBatch(tokens, scored, parts, foil=foil, foil_at=parts["agreement"].clone())

    def _fill(
        self,
        row: int,
        rng: random.Random,
        ids: dict[str, int],
        bos: int,
        tokens: torch.Tensor,
        parts: dict[str, torch.Tensor],
        foil: torch.Tensor,
    ) -> None:
        """Write one sequence into ``tokens[row]`` and mark its parts."""
        sentences = stream_syntax(rng)
        seq: list[int] = [bos]
        while len(seq) < self.seq_len:
            start = len(seq)
            if start > 1 and rng.random() < self.p_repeat:  # a span copied from anywhere earlier
                length = rng.randint(*SPAN)
                source = rng.randint(1, max(1, start - length))
                seq += seq[source : source + length]
                parts["repeat"][row, start + 1 : min(len(seq), self.seq_len)] = True
                continue
            if (
                rng.random() < self.p_scramble
            ):  # words in random order: only a copy can predict them
                seq += [ids[w] for w in rng.choices(self.plain_words, k=rng.randint(*SPAN))]
                continue
            sentence = next(sentences)
            agreement = sentence.agreement
            if agreement is None:  # the generator gives every sentence one
                continue
            verb = start + agreement.verb
            if verb < self.seq_len:
                parts["agreement"][row, verb] = True
                foil[row, verb] = ids[agreement.wrong]
            seq += [ids[sentence.text[a:b].lower()] for a, b in sentence.words]
        tokens[row] = torch.tensor(seq[: self.seq_len])

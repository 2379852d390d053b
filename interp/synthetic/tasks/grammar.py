"""The grammar language as a training task: sentences of :mod:`interp.probes.grammar`, packed.

Each sequence is ``[BOS]`` followed by generated sentences back to back (each ends with its
period), cut at ``seq_len`` tokens. With probability ``p_repeat`` one earlier sentence of the
sequence is repeated verbatim after 1-3 fresh ones, so that copying pays off (induction heads);
the rest of the language rewards what the grammar encodes: agreement of the main verb with a
subject up to 12+ words back across attractor nouns, determiners and adjectives before their
noun, punctuation that closes a sentence or a fronted phrase.

Every target after BOS is scored. Logged parts: ``agreement`` (the main verb of a fresh sentence,
with the other-number form as foil, so ``foil_acc`` is agreement accuracy), ``repeat`` (tokens of
a repeated sentence after its first word, which copying predicts) and ``punctuation``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import torch

from interp.probes.grammar import PUNCT, stream_syntax, vocabulary
from interp.synthetic.train import TaskBatch


@dataclass(frozen=True)
class GrammarTask:
    seq_len: int = 65  # BOS + 64: the collect stage's longest repeated probe ([BOS] r r, 32 tokens in r) fits
    p_repeat: float = 0.5
    name: str = "grammar"

    def __post_init__(self) -> None:
        if self.seq_len < 8:
            raise ValueError("seq_len must be >= 8")
        if not 0 <= self.p_repeat <= 1:
            raise ValueError("p_repeat must be in [0, 1]")

    @property
    def words(self) -> tuple[str, ...]:
        return vocabulary()

    def params(self) -> dict[str, Any]:
        return {"seq_len": self.seq_len, "p_repeat": self.p_repeat, "n_words": len(self.words)}

    def batch(self, n: int, gen: torch.Generator, tok: Any) -> TaskBatch:
        ids = tok.get_vocab()
        shape = (n, self.seq_len)
        tokens = torch.full(shape, tok.pad_token_id, dtype=torch.long)
        parts = {name: torch.zeros(shape, dtype=torch.bool) for name in ("agreement", "repeat", "punctuation")}
        foil = torch.zeros(shape, dtype=torch.long)
        for row in range(n):
            rng = random.Random(int(torch.randint(2**62, (1,), generator=gen)))
            self._fill(row, rng, ids, tok.bos_token_id, tokens, parts, foil)
        scored = torch.ones(shape, dtype=torch.bool)
        scored[:, 0] = False
        parts["punctuation"] = torch.isin(tokens, torch.tensor([ids[p] for p in PUNCT])) & scored
        return TaskBatch(tokens, scored, parts, foil=foil, foil_at=parts["agreement"].clone())

    def _fill(self, row: int, rng: random.Random, ids: dict[str, int], bos: int, tokens: torch.Tensor,
              parts: dict[str, torch.Tensor], foil: torch.Tensor) -> None:
        """Write one sequence into ``tokens[row]`` and mark its parts."""
        sentences = stream_syntax(rng)
        repeat_after = rng.randint(1, 3) if rng.random() < self.p_repeat else None
        seq, done = [bos], []
        while len(seq) < self.seq_len:
            start = len(seq)
            if repeat_after is not None and len(done) == repeat_after:
                words = rng.choice(done)
                parts["repeat"][row, start + 1: min(start + len(words), self.seq_len)] = True
                repeat_after = None
            else:
                sentence = next(sentences)
                words = [sentence.text[a:b].lower() for a, b in sentence.words]
                verb = start + sentence.agreement.verb
                if verb < self.seq_len:
                    parts["agreement"][row, verb] = True
                    foil[row, verb] = ids[sentence.agreement.wrong]
                done.append(words)
            seq += [ids[w] for w in words]
        tokens[row] = torch.tensor(seq[: self.seq_len])

"""Sentences -> token-level probe sequences for one tokenizer.

Word alignment uses the fast tokenizer's character offsets, so it works the same for BPE
(SmolLM2, GPT-2), SentencePiece and WordPiece (BERT). A token belongs to the word its
characters overlap most (leading spaces of BPE tokens are ignored). The token that stands for
a word is its *last* sub-token in a causal model (the only one that has seen the whole word)
and its *first* sub-token in an encoder (the usual choice for BERT-style models, which see
the whole word from every sub-token). Attention *to* a word is the sum over its sub-tokens.
"""

from __future__ import annotations

import unicodedata
import warnings
from typing import Any

import torch

from interp.errors import CorpusError
from interp.probes.base import REPEATED, ProbeSequence, Sentence, Suite


def is_punctuation(text: str) -> bool:
    """True for a token made only of punctuation (after dropping BPE / SentencePiece markers)."""
    stripped = text.replace("Ġ", "").replace("▁", "").replace("##", "").strip()
    return bool(stripped) and all(unicodedata.category(c).startswith("P") for c in stripped)


class Aligner:
    """Tokenizes sentences for one model, flags specials and punctuation, maps words to tokens."""

    def __init__(self, model: Any, max_len: int | None = None):
        self.tok = model.tokenizer
        self.causal = model.causal
        self.bos_policy = model.bos_policy
        self.bos_id = model.bos_token_id
        self.max_len = min(max_len or model.n_ctx, model.n_ctx)
        self.relations: dict[str, int] = {}
        self.n_truncated = 0
        vocab = self.tok.convert_ids_to_tokens(list(range(len(self.tok))))
        self._punct = torch.tensor([is_punctuation(t or "") for t in vocab], dtype=torch.bool)

    def relation_id(self, name: str) -> int:
        return self.relations.setdefault(name, len(self.relations))

    def encode(self, sentence: Sentence, suite: Suite) -> ProbeSequence:
        enc = self.tok(sentence.text, return_offsets_mapping=True, return_special_tokens_mask=True,
                       add_special_tokens=self.bos_policy != "prepend")
        ids, offsets, special = list(enc.input_ids), list(enc.offset_mapping), list(enc.special_tokens_mask)
        if self.bos_policy == "prepend":
            ids, offsets, special = [self.bos_id] + ids, [(0, 0)] + offsets, [1] + special
        if len(ids) > self.max_len:
            self.n_truncated += 1
            ids, offsets, special = ids[: self.max_len], offsets[: self.max_len], special[: self.max_len]
        tokens = torch.tensor(ids, dtype=torch.long)
        is_special = torch.tensor(special, dtype=torch.bool)
        is_delim = self._punct[tokens] & ~is_special
        if not self.causal:  # [SEP] is the encoder's delimiter
            is_delim |= is_special & (torch.arange(len(ids)) > 0)
        word_of_token, word_pos = self._align_words(sentence, offsets, special)
        arcs = [
            (a.dep, a.head, self.relation_id(a.relation))
            for a in sentence.arcs
            if word_pos[a.dep] >= 0 and word_pos[a.head] >= 0
        ]
        return ProbeSequence(
            tokens=tokens, suite=suite.name, family=suite.family, is_delim=is_delim, is_special=is_special,
            word_of_token=word_of_token, word_pos=word_pos,
            arcs=torch.tensor(arcs, dtype=torch.long).reshape(-1, 3), source=sentence.source,
        )

    def _align_words(self, sentence: Sentence, offsets: list, special: list) -> tuple[torch.Tensor, torch.Tensor]:
        n = len(offsets)
        word_of_token = torch.full((n,), -1, dtype=torch.long)
        word_pos = torch.full((len(sentence.words),), -1, dtype=torch.long)
        if not sentence.words:
            return word_of_token, word_pos
        text = sentence.text
        w = 0
        for i, ((s, e), sp) in enumerate(zip(offsets, special)):
            if sp or e <= s:
                continue
            s += len(text[s:e]) - len(text[s:e].lstrip())  # BPE tokens carry the space before a word
            while w < len(sentence.words) and sentence.words[w][1] <= s:
                w += 1
            if w < len(sentence.words) and sentence.words[w][0] < e:
                word_of_token[i] = w
                if self.causal or word_pos[w] < 0:
                    word_pos[w] = i
        return word_of_token, word_pos

    def encode_suite(self, suite: Suite) -> list[ProbeSequence]:
        seqs = [self.encode(s, suite) for s in suite.sentences]
        seqs = [s for s in seqs if int((~s.is_special).sum()) >= 1]  # a probe needs some text
        if not seqs:
            raise CorpusError(f"corpus {suite.name!r} has no usable text (every probe is empty)")
        if self.n_truncated:
            warnings.warn(f"{self.n_truncated} probe(s) longer than {self.max_len} tokens were truncated", stacklevel=2)
            self.n_truncated = 0
        return seqs

    def repeated(self, n: int, lengths: tuple[int, ...], seed: int) -> list[ProbeSequence]:
        """Sequences [BOS] r r ([SEP]) of uniformly random ordinary tokens r, for induction heads."""
        gen = torch.Generator().manual_seed(seed)
        special_ids = set(self.tok.all_special_ids)
        pool = torch.tensor([i for i in range(len(self.tok)) if i not in special_ids and not self._punct[i]])
        seqs = []
        for i in range(n):
            length = lengths[i % len(lengths)]
            half = pool[torch.randint(len(pool), (length,), generator=gen)]
            body = torch.cat([half, half])
            prefix = [self.bos_id] if self.bos_policy in ("prepend", "tokenizer", "cls") and self.bos_id is not None else []
            if not self.causal:
                prefix, suffix = [self.tok.cls_token_id], [self.tok.sep_token_id]
            else:
                suffix = []
            tokens = torch.cat([torch.tensor(prefix, dtype=torch.long), body, torch.tensor(suffix, dtype=torch.long)])
            tokens = tokens[: self.max_len]
            is_special = torch.zeros(len(tokens), dtype=torch.bool)
            is_special[: len(prefix)] = True
            if suffix and len(tokens) == len(prefix) + 2 * length + 1:
                is_special[-1] = True
            is_delim = is_special & (torch.arange(len(tokens)) > 0) if not self.causal else torch.zeros(len(tokens), dtype=torch.bool)
            seqs.append(ProbeSequence(tokens=tokens, suite="repeated", family=REPEATED,
                                      is_delim=is_delim, is_special=is_special, source=f"repeated:{i}"))
        return seqs

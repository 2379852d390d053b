"""Sentences -> token-level probe sequences for one tokenizer.

Word alignment uses the fast tokenizer's character offsets, so it works the same for BPE
(SmolLM2, GPT-2), SentencePiece and WordPiece (BERT). A token belongs to the word its
characters overlap most (leading spaces of BPE tokens are ignored). The token that stands for
a word is its *last* sub-token in a causal model (the only one that has seen the whole word)
and its *first* sub-token in an encoder (the usual choice for BERT-style models, which see
the whole word from every sub-token). Attention *to* a word is the sum over its sub-tokens.

Not every text fits every model (the tokenizer contract is in :mod:`interp.model.vocab`). A probe
the tokenizer cannot encode (no UNK token for an unknown word), or that holds an id beyond the
model's embedding, is left out; a suite of which more than half is left out or unknown tokens
cannot be expressed in the model's vocabulary and is skipped; each with a warning (a skipped
suite and why are kept in :attr:`Aligner.skipped`, which the collect stage records). Probes
longer than the context are cut to it (warned); repeated random-token probes are drawn from the
model's own ordinary ids and sized to its context.
"""

from __future__ import annotations

import unicodedata
import warnings
from typing import Any

import torch

from interp.errors import CorpusError, InterpWarning, first_line
from interp.model.vocab import ordinary_ids
from interp.probes.base import REPEATED, ProbeSequence, Sentence, Suite

# A suite is skipped as inexpressible when almost all of its text is unknown tokens (positions,
# delimiters and neighbours still carry structure when only part of it is: planted models with a
# few dozen words score their heads right at two thirds unknown), or when most probes cannot be
# encoded at all (what is left is too little to measure).
SKIP_UNKNOWN = 0.9
SKIP_LOST = 0.5
WARN_UNKNOWN = 0.1  # more unknown tokens than this: warn that the suite is partly unknown


class Unencodable(ValueError):
    """A probe this tokenizer cannot encode for this model (the reason is the message)."""


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
        self.d_vocab = model.d_vocab
        self.max_len = min(max_len or model.n_ctx, model.n_ctx)
        self.offsets = bool(
            getattr(self.tok, "is_fast", False)
        )  # character offsets: fast tokenizers only
        self.relations: dict[str, int] = {}
        self.skipped: dict[str, str] = {}  # suite -> why it was skipped
        self.n_truncated = 0
        vocab = self.tok.convert_ids_to_tokens(list(range(len(self.tok))))
        self._punct = torch.tensor([is_punctuation(t or "") for t in vocab], dtype=torch.bool)

    def relation_id(self, name: str) -> int:
        return self.relations.setdefault(name, len(self.relations))

    def encode(self, sentence: Sentence, suite: Suite) -> ProbeSequence:
        """One probe for this model; :class:`Unencodable` when the tokenizer cannot encode it or
        it holds an id beyond the model's embedding."""
        ids, offsets, special = self._tokenize(sentence.text)
        if self.bos_policy == "prepend":
            ids, offsets, special = [self.bos_id] + ids, [(0, 0)] + offsets, [1] + special
        beyond = [i for i in ids if not 0 <= i < self.d_vocab]
        if beyond:
            raise Unencodable(
                f"token id {beyond[0]} is beyond the model's {self.d_vocab}-id embedding"
            )
        if len(ids) > self.max_len:
            self.n_truncated += 1
            ids, offsets, special = (
                ids[: self.max_len],
                offsets[: self.max_len],
                special[: self.max_len],
            )
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
            tokens=tokens,
            suite=suite.name,
            kind=suite.kind,
            is_delim=is_delim,
            is_special=is_special,
            word_of_token=word_of_token,
            word_pos=word_pos,
            arcs=torch.tensor(arcs, dtype=torch.long).reshape(-1, 3),
            source=sentence.source,
        )

    def _tokenize(self, text: str) -> tuple[list[int], list[tuple[int, int]], list[int]]:
        """(ids, character offsets, special flags); offsets are (0, 0) without a fast tokenizer."""
        try:
            enc = self.tok(
                text,
                return_offsets_mapping=self.offsets,
                return_special_tokens_mask=True,
                add_special_tokens=self.bos_policy != "prepend",
            )
        except Exception as exc:  # noqa: BLE001  (e.g. a word-level vocabulary without an UNK token)
            raise Unencodable(first_line(exc)) from None
        ids = list(enc.input_ids)
        offsets = list(enc.offset_mapping) if self.offsets else [(0, 0)] * len(ids)
        return ids, offsets, list(enc.special_tokens_mask)

    def _align_words(
        self, sentence: Sentence, offsets: list, special: list
    ) -> tuple[torch.Tensor, torch.Tensor]:
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
            s += len(text[s:e]) - len(
                text[s:e].lstrip()
            )  # BPE tokens carry the space before a word
            while w < len(sentence.words) and sentence.words[w][1] <= s:
                w += 1
            if w < len(sentence.words) and sentence.words[w][0] < e:
                word_of_token[i] = w
                if self.causal or word_pos[w] < 0:
                    word_pos[w] = i
        return word_of_token, word_pos

    def encode_suite(self, suite: Suite) -> list[ProbeSequence]:
        """The suite's probes for this model; [] (with a warning) when the suite cannot be
        expressed in its vocabulary or needs word offsets the tokenizer does not give."""
        if any(s.words for s in suite.sentences) and not self.offsets:
            self.skipped[suite.name] = (
                "its features need word positions, and the tokenizer gives no character offsets"
            )
            warnings.warn(
                f"probe suite {suite.name!r} skipped: its features need word positions, and the tokenizer gives no "
                f"character offsets (use a fast tokenizer: transformers.PreTrainedTokenizerFast)",
                InterpWarning,
                stacklevel=2,
            )
            return []
        seqs: list[ProbeSequence] = []
        failed: list[str] = []
        for sentence in suite.sentences:
            try:
                seqs.append(self.encode(sentence, suite))
            except Unencodable as exc:
                failed.append(str(exc))
        seqs = [s for s in seqs if int((~s.is_special).sum()) >= 1]  # a probe needs some text
        if not seqs and not failed:
            raise CorpusError(f"corpus {suite.name!r} has no usable text (every probe is empty)")
        n_truncated, self.n_truncated = self.n_truncated, 0
        if not self._expressible(suite, seqs, failed):
            return []
        if n_truncated:
            warnings.warn(
                f"{n_truncated} of {len(seqs)} probe(s) of suite {suite.name!r} are longer than {self.max_len} tokens "
                f"(the model's context, or --max-seq-len) and were truncated",
                InterpWarning,
                stacklevel=2,
            )
        return seqs

    def _expressible(self, suite: Suite, seqs: list[ProbeSequence], failed: list[str]) -> bool:
        """False (with a warning) when more than ``SKIP_UNKNOWN`` of the suite's tokens are unknown
        or more than ``SKIP_LOST`` of its probes cannot be encoded; a smaller share warns and the
        rest is kept."""
        unk = self.tok.unk_token_id
        text = (
            torch.cat([s.tokens[~s.is_special] for s in seqs])
            if seqs
            else torch.zeros(0, dtype=torch.long)
        )
        unknown = float((text == unk).float().mean()) if unk is not None and len(text) else 0.0
        lost = len(failed) / (len(failed) + len(seqs))
        if unknown > SKIP_UNKNOWN or lost > SKIP_LOST:
            why = (
                f"{unknown:.0%} of its tokens are unknown ({self.tok.unk_token})"
                if unknown > SKIP_UNKNOWN
                else f"{len(failed)} of {len(failed) + len(seqs)} probes cannot be encoded: {failed[0]}"
            )
            self.skipped[suite.name] = f"it cannot be expressed in this model's vocabulary ({why})"
            warnings.warn(
                f"probe suite {suite.name!r} skipped: it cannot be expressed in this model's vocabulary ({why}); "
                f"give probes written in the model's vocabulary (--corpus)",
                InterpWarning,
                stacklevel=2,
            )
            return False
        if failed:
            warnings.warn(
                f"{len(failed)} of {len(failed) + len(seqs)} probes of suite {suite.name!r} cannot be encoded for this "
                f"model and are left out ({failed[0]})",
                InterpWarning,
                stacklevel=2,
            )
        if unknown > WARN_UNKNOWN:
            warnings.warn(
                f"{unknown:.0%} of the tokens of suite {suite.name!r} are unknown to the tokenizer "
                f"({self.tok.unk_token}): attention to them says little about the words they stand for",
                InterpWarning,
                stacklevel=2,
            )
        return True

    def repeated(self, n: int, lengths: tuple[int, ...], seed: int) -> list[ProbeSequence]:
        """Sequences [BOS] r r ([SEP]) of uniformly random ordinary tokens r, for induction heads.

        r is drawn from the model's own ordinary ids (special tokens and punctuation left out)
        and is at most as long as half the context leaves room for: longer halves are shortened,
        with a warning, never cut mid-repeat.
        """
        if not self.causal:
            prefix, suffix = [self.tok.cls_token_id], [self.tok.sep_token_id]
        else:
            prefix = (
                [self.bos_id]
                if self.bos_policy in ("prepend", "tokenizer") and self.bos_id is not None
                else []
            )
            suffix = []
        pool = torch.tensor(
            [i for i in ordinary_ids(self.tok, self.d_vocab) if not self._punct[i]],
            dtype=torch.long,
        )
        lengths = self._fit_lengths(lengths, len(prefix) + len(suffix), len(pool)) if n else ()
        if not lengths:
            return []
        gen = torch.Generator().manual_seed(seed)
        seqs = []
        for i in range(n):
            length = lengths[i % len(lengths)]
            half = pool[torch.randint(len(pool), (length,), generator=gen)]
            tokens = torch.cat(
                [
                    torch.tensor(prefix, dtype=torch.long),
                    half,
                    half,
                    torch.tensor(suffix, dtype=torch.long),
                ]
            )
            is_special = torch.zeros(len(tokens), dtype=torch.bool)
            is_special[: len(prefix)] = True
            is_special[len(tokens) - len(suffix) :] = True
            is_delim = (
                is_special & (torch.arange(len(tokens)) > 0)
                if not self.causal
                else torch.zeros(len(tokens), dtype=torch.bool)
            )
            seqs.append(
                ProbeSequence(
                    tokens=tokens,
                    suite="repeated",
                    kind=REPEATED,
                    is_delim=is_delim,
                    is_special=is_special,
                    source=f"repeated:{i}",
                )
            )
        return seqs

    def _fit_lengths(
        self, lengths: tuple[int, ...], n_special: int, n_pool: int
    ) -> tuple[int, ...]:
        """The halves' lengths, shortened to fit the context; () (warned) when nothing fits."""
        longest = (self.max_len - n_special) // 2
        if longest < 2 or n_pool < 2:
            why = (
                f"the context of {self.max_len} tokens leaves no room for two halves of 2 tokens"
                if longest < 2
                else f"the vocabulary has {n_pool} ordinary token(s) to draw from"
            )
            self.skipped[REPEATED] = why
            warnings.warn(f"no repeated-token probes: {why}", InterpWarning, stacklevel=2)
            return ()
        if max(lengths) > longest:
            warnings.warn(
                f"repeated-token probes shortened to halves of at most {longest} tokens (asked: "
                f"{', '.join(map(str, lengths))}) to fit the model's context of {self.max_len} tokens",
                InterpWarning,
                stacklevel=2,
            )
        return tuple(min(length, longest) for length in lengths)

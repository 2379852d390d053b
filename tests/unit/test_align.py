"""Word/token alignment, special and punctuation flags, truncation, repeated-token probes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from interp.probes.align import Aligner, is_punctuation
from interp.probes.base import NATURAL, REPEATED, SYNTAX, Arc, Sentence, Suite


def fake_model(tokenizer, causal, bos_policy, n_ctx=512):
    return SimpleNamespace(
        tokenizer=tokenizer,
        causal=causal,
        bos_policy=bos_policy,
        n_ctx=n_ctx,
        bos_token_id=tokenizer.cls_token_id,
        d_vocab=len(tokenizer),
    )


def sentence():
    text = "The keys, near unbelievably old cabinets, are here."
    spans, pos = [], 0
    for word in [
        "The",
        "keys",
        ",",
        "near",
        "unbelievably",
        "old",
        "cabinets",
        ",",
        "are",
        "here",
        ".",
    ]:
        start = text.index(word, pos)
        spans.append((start, start + len(word)))
        pos = start + len(word)
    return Sentence(text, tuple(spans), (Arc(1, 8, "nsubj"), Arc(0, 1, "det")), source="t:1")


def test_is_punctuation():
    assert is_punctuation(",") and is_punctuation("Ġ(") and is_punctuation("...")
    assert not is_punctuation("Ġthe") and not is_punctuation("3") and not is_punctuation("")


def test_encoder_alignment_flags_and_word_positions(minilm_tokenizer):
    aligner = Aligner(fake_model(minilm_tokenizer, causal=False, bos_policy="cls"))
    s = aligner.encode(sentence(), Suite("t", SYNTAX))
    toks = minilm_tokenizer.convert_ids_to_tokens(s.tokens.tolist())
    assert toks[0] == "[CLS]" and toks[-1] == "[SEP]"
    assert s.is_special.tolist() == [t in ("[CLS]", "[SEP]") for t in toks]
    # punctuation and the encoder's [SEP] are delimiters; [CLS] is not
    assert s.is_delim.tolist() == [t in (",", ".", "[SEP]") for t in toks]
    # "unbelievably" splits into several WordPieces: all map to word 4, the first stands for it
    pieces = [i for i, w in enumerate(s.word_of_token.tolist()) if w == 4]
    assert len(pieces) > 1 and s.word_pos[4] == pieces[0]
    assert s.arcs.tolist() == [[1, 8, aligner.relations["nsubj"]], [0, 1, aligner.relations["det"]]]
    assert toks[int(s.word_pos[8])] == "are"


def test_causal_prepend_policy_uses_last_subtoken(minilm_tokenizer):
    aligner = Aligner(fake_model(minilm_tokenizer, causal=True, bos_policy="prepend"))
    s = aligner.encode(sentence(), Suite("t", SYNTAX))
    assert s.tokens[0] == minilm_tokenizer.cls_token_id and s.is_special[0]
    pieces = [i for i, w in enumerate(s.word_of_token.tolist()) if w == 4]
    assert s.word_pos[4] == pieces[-1]
    assert (
        not s.is_delim[-1] or minilm_tokenizer.convert_ids_to_tokens([int(s.tokens[-1])])[0] == "."
    )


def test_truncation_warns_and_drops_arcs_beyond(minilm_tokenizer):
    aligner = Aligner(fake_model(minilm_tokenizer, causal=False, bos_policy="cls", n_ctx=6))
    with pytest.warns(UserWarning, match="truncated"):
        seqs = aligner.encode_suite(Suite("t", SYNTAX, (sentence(),)))
    assert len(seqs[0]) == 6
    assert seqs[0].arcs.tolist() == [[0, 1, aligner.relations["det"]]]


def test_empty_suite_is_a_corpus_error(minilm_tokenizer):
    from interp.errors import CorpusError

    aligner = Aligner(fake_model(minilm_tokenizer, causal=True, bos_policy="none"))
    with pytest.raises(CorpusError, match="no usable text"):
        aligner.encode_suite(Suite("empty", NATURAL, (Sentence(""),)))


def test_repeated_sequences_repeat_their_first_half(minilm_tokenizer):
    aligner = Aligner(fake_model(minilm_tokenizer, causal=True, bos_policy="prepend"))
    seqs = aligner.repeated(4, (5, 7), seed=3)
    assert [len(s) for s in seqs] == [11, 15, 11, 15]
    for s in seqs:
        half = (len(s) - 1) // 2
        assert torch.equal(s.tokens[1 : 1 + half], s.tokens[1 + half :])
        assert s.kind == REPEATED and s.is_special.tolist() == [True] + [False] * (len(s) - 1)
    again = aligner.repeated(4, (5, 7), seed=3)
    assert all(torch.equal(a.tokens, b.tokens) for a, b in zip(seqs, again))

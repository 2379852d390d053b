"""The tokenizer contract (interp.model.vocab, interp.probes.align) on models with their own small
vocabulary: checked at load against the embedding, English suites the vocabulary cannot
express skipped with a warning, repeated-token probes drawn from the model's own ids and
sized to its context."""

from __future__ import annotations

import warnings

import pytest
from tiny_models import N_HEADS, tiny_native

from interp import CollectConfig
from interp.collect.stage import collect
from interp.errors import InterpWarning, ModelError
from interp.probes.align import Aligner, Unencodable
from interp.probes.base import NATURAL, Sentence, Suite

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = ("the", "cat", "dog", "sat", "ran", "on", "mat", "a", "and", ".")
COLLECT = CollectConfig(
    n_repeated=4, repeated_lengths=(6,), n_syntax=10, max_sentences=10, n_bootstrap=10
)


def word_tokenizer(words=WORDS, unk: bool = True, bos_last: bool = False):
    """A word-level fast tokenizer: <pad> <bos> (<unk>) then ``words``; without <unk>, an unknown
    word makes the tokenizer raise. ``bos_last``: <bos> gets the last id and the tokenizer adds it."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>"] + (["<unk>"] if unk else []) + ([] if bos_last else ["<bos>"])
    vocab = {w: i for i, w in enumerate(specials + list(words) + (["<bos>"] if bos_last else []))}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>") if unk else models.WordLevel(vocab))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    if bos_last:
        core.post_processor = processors.TemplateProcessing(
            single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])]
        )
    extra = {"unk_token": "<unk>"} if unk else {}
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", bos_token="<bos>", **extra
    )


def model_with(tokenizer, **config):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = tiny_native(n_layers=2, tokenizer=tokenizer, **config)
    return model, [str(w.message) for w in caught if issubclass(w.category, InterpWarning)]


def test_a_tokenizer_without_unk_skips_the_english_suites_and_still_probes_every_head():
    model, _ = model_with(word_tokenizer(unk=False))
    with pytest.warns(InterpWarning) as caught:
        features = collect(model, COLLECT, progress=False)
    said = [str(w.message) for w in caught]
    for suite in ("prose", "syntax"):
        assert any(
            m.startswith(
                f"probe suite {suite!r} skipped: it cannot be expressed in this model's vocabulary"
            )
            and "probes cannot be encoded" in m
            for m in said
        ), said
    heads = {(layer, head) for layer in range(2) for head in range(N_HEADS)}
    assert (
        set(zip(features.features["layer"], features.features["head"])) == heads
    )  # from the repeated probes


def test_repeated_probes_come_from_the_models_own_ordinary_ids():
    model, _ = model_with(word_tokenizer())
    probes = Aligner(model).repeated(8, (5,), seed=0)
    ordinary = set(
        range(3, 3 + len(WORDS) - 1)
    )  # <pad> <unk> <bos> are special, "." is punctuation
    assert len(probes) == 8
    for probe in probes:
        tokens = probe.tokens.tolist()
        assert tokens[0] == model.bos_token_id and len(tokens) == 11
        assert tokens[1:6] == tokens[6:] and set(tokens[1:]) <= ordinary


@pytest.mark.parametrize(
    "n_ctx, halves, warning",
    [
        (
            8,
            3,
            "repeated-token probes shortened to halves of at most 3 tokens (asked: 6) to fit the model's context of 8 tokens",
        ),
        (
            4,
            0,
            "no repeated-token probes: the context of 4 tokens leaves no room for two halves of 2 tokens",
        ),
    ],
)
def test_repeated_probes_are_sized_to_the_context(n_ctx, halves, warning):
    model, _ = model_with(word_tokenizer(), n_ctx=n_ctx)
    with pytest.warns(InterpWarning) as caught:
        probes = Aligner(model).repeated(4, (6,), seed=0)
    assert [str(w.message) for w in caught] == [warning]
    assert [len(p.tokens) for p in probes] == ([1 + 2 * halves] * 4 if halves else [])
    assert all(p.tokens[1 : 1 + halves].tolist() == p.tokens[1 + halves :].tolist() for p in probes)


def test_a_tokenizer_larger_than_the_embedding_warns_and_its_extra_ids_are_left_out():
    tok = word_tokenizer()
    model, said = model_with(tok, d_vocab=len(tok) - 2)  # "and" and "." lie beyond the embedding
    assert said == [
        f"tiny-native: the tokenizer has {len(tok)} ids but the model's embedding takes {len(tok) - 2}: "
        f"probes that contain one of the 2 ordinary ids beyond it are left out (does the tokenizer belong "
        f"to this model?)"
    ]
    aligner = Aligner(model)
    suite = Suite(
        name="mine",
        kind=NATURAL,
        sentences=(Sentence("the cat sat"), Sentence("the cat and the dog")),
    )
    assert aligner.encode(suite.sentences[0], suite).tokens.tolist() == [2, 3, 4, 6]
    with pytest.raises(
        Unencodable,
        match=f"token id {len(tok) - 2} is beyond the model's {len(tok) - 2}-id embedding",
    ):
        aligner.encode(suite.sentences[1], suite)
    with pytest.warns(
        InterpWarning,
        match=r"1 of 2 probes of suite 'mine' cannot be encoded for this model and are left out",
    ):
        assert len(aligner.encode_suite(suite)) == 1


def test_a_tokenizer_that_adds_an_id_outside_the_embedding_is_refused_at_load():
    tok = word_tokenizer(bos_last=True)
    with pytest.raises(
        ModelError,
        match=rf"the tokenizer adds token id {len(tok) - 1} to every text, but the model's "
        rf"embedding takes ids 0..{len(tok) - 2}: the tokenizer does not belong",
    ):
        model_with(tok, d_vocab=len(tok) - 1)


def test_a_suite_partly_unknown_warns_and_is_kept():
    model, _ = model_with(word_tokenizer())
    suite = Suite(
        name="mine",
        kind=NATURAL,
        sentences=(Sentence("the cat sat on the mat"), Sentence("the zebra sat on a giraffe")),
    )
    with pytest.warns(
        InterpWarning,
        match=r"^17% of the tokens of suite 'mine' are unknown to the tokenizer \(<unk>\)",
    ):
        assert len(Aligner(model).encode_suite(suite)) == 2  # 2 unknown of 12 text tokens


def test_a_probe_longer_than_the_context_is_cut_with_a_warning():
    model, _ = model_with(word_tokenizer(), n_ctx=6)
    suite = Suite(
        name="mine",
        kind=NATURAL,
        sentences=(Sentence("the cat sat on the mat and the dog ran"), Sentence("a cat ran")),
    )
    with pytest.warns(
        InterpWarning, match=r"^1 of 2 probe\(s\) of suite 'mine' are longer than 6 tokens"
    ):
        seqs = Aligner(model).encode_suite(suite)
    assert [len(s.tokens) for s in seqs] == [6, 4]


def test_causality_is_measured_unless_given(tmp_path):
    from interp.model.load import from_bridge, load_model
    from interp.model.tiny import build_tiny

    bert = build_tiny("bert", tmp_path / "bert")
    assert load_model(str(bert)).causal is False
    with pytest.raises(
        ModelError, match="--causal was given, but the model attends to later positions"
    ):
        load_model(str(bert), causal=True)
    model, _ = model_with(word_tokenizer())
    assert model.causal is True
    with pytest.raises(
        ModelError, match="--bidirectional was given, but no head attends to a later position"
    ):
        from_bridge(model.bridge, model.tokenizer, causal=False)

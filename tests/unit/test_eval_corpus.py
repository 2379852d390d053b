"""--eval-corpus: a head's effect on the user's own sequences (interp.ablation.corpus)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from interp.ablate import ablate
from interp.ablation.catalogue import CORPUS, ENCODER
from interp.ablation.corpus import build_corpus, read_eval_corpus
from interp.config import AblateConfig
from interp.errors import ConfigError, CorpusError

pytestmark = pytest.mark.usefixtures("one_thread")

LINES = ["The old man walked to the river .", "She said nothing .", "A small boat was on the water .",
         "They went home ."]


@pytest.fixture
def eval_file(tmp_path):
    path = tmp_path / "task.txt"
    path.write_text("\n".join(LINES) + "\n")
    return path


def test_loss_corpus_is_the_token_weighted_next_token_loss_of_the_users_even_lines(llama, eval_file):
    config = AblateConfig(eval_corpus=str(eval_file), metrics=(CORPUS,), attribution=False, prune=False,
                          n_bootstrap=10, threads=1)
    result = ablate(llama, config, progress=False)
    assert result.summary["corpus"] == {CORPUS: {"n_sequences": 2}}  # lines 0 and 2; 1 and 3 are held out
    total, count = 0.0, 0
    for line in LINES[0::2]:
        tokens = torch.tensor([[llama.bos_token_id, *llama.tokenizer(line).input_ids]])
        with torch.inference_mode():
            logits = llama.bridge(tokens)[0]
        total += float(F.cross_entropy(logits[:-1].double(), tokens[0, 1:], reduction="sum"))
        count += tokens.shape[1] - 1
    effects = result.effects
    assert set(effects["metric"]) == {CORPUS}
    assert effects["baseline"].iloc[0] == pytest.approx(total / count, rel=1e-5)


def test_a_causal_model_puts_the_users_metric_first(llama, eval_file):
    from interp.ablate import _metrics

    assert _metrics(llama, AblateConfig(eval_corpus=str(eval_file)))[0] == CORPUS
    assert CORPUS not in _metrics(llama, AblateConfig())


def test_an_encoder_reads_the_users_sequences_instead_of_the_prose(bert, eval_file):
    corpus = build_corpus(bert, n_prose=6, n_repeated=0, repeated_lengths=(6,), n_syntax=0, seed=0, max_tokens=512,
                          split=1, user=read_eval_corpus(str(eval_file)))
    assert corpus.sizes == {ENCODER: 2}
    sentences = [it.tokens.tolist() for it in corpus.items if not it.is_view]
    assert sentences == [bert.tokenizer(line).input_ids for line in LINES[1::2]]


@pytest.mark.parametrize("name, content, message", [
    ("missing.txt", None, "corpus file not found"),
    ("empty.txt", "\n\n", "empty.txt"),
    ("one.txt", "Only one line.\n", "the evaluation corpus holds 1 sequence; give at least 2"),
    ("bad.jsonl", '{"text": "fine"}\n{"text": \n', "bad.jsonl:2:"),
])
def test_a_bad_eval_corpus_fails_in_one_line(tmp_path, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(CorpusError) as caught:
        read_eval_corpus(str(path))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_the_users_metric_needs_a_corpus():
    with pytest.raises(ConfigError, match=r"metrics must be without loss_corpus unless an eval_corpus is given"):
        AblateConfig(metrics=(CORPUS,))

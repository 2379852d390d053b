"""A head's effect on the user's task: --eval-corpus (interp.ablate.evaluation) and metrics defined in
Python (interp.ablate.tasks), against values computed here from the model's own logits."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from tiny_models import D_HEAD

from interp import AblateConfig
from interp.ablate.catalogue import CORPUS, ENCODER
from interp.ablate.evaluation import build_corpus, read_eval_corpus
from interp.ablate.stage import ablate
from interp.ablate.tasks import Task
from interp.errors import ConfigError, CorpusError

pytestmark = pytest.mark.usefixtures("one_thread")

LINES = [
    "The old man walked to the river .",
    "She said nothing .",
    "A small boat was on the water .",
    "They went home .",
]


@pytest.fixture
def eval_file(tmp_path):
    path = tmp_path / "task.txt"
    path.write_text("\n".join(LINES) + "\n")
    return path


def test_loss_corpus_is_the_token_weighted_next_token_loss_of_the_users_even_lines(
    llama, eval_file
):
    config = AblateConfig(
        eval_corpus=str(eval_file),
        metrics=(CORPUS,),
        attribution=False,
        prune=False,
        n_bootstrap=10,
        threads=1,
    )
    result = ablate(llama, config, progress=False)
    # lines 0 and 2 (1 and 3 are held out): 8 words each, every next token scored
    assert result.summary["corpus"] == {CORPUS: {"n_sequences": 2, "n_scored": 16}}
    assert (result.effects["n_tokens"] == 16).all()
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
    from interp.ablate.corpora import stage_metrics

    assert stage_metrics(llama, AblateConfig(eval_corpus=str(eval_file)))[0] == CORPUS
    assert CORPUS not in stage_metrics(llama, AblateConfig())


def test_an_encoder_reads_the_users_sequences_instead_of_the_prose(bert, eval_file):
    corpus = build_corpus(
        bert,
        n_prose=6,
        n_repeated=0,
        repeated_lengths=(6,),
        n_syntax=0,
        seed=0,
        max_tokens=512,
        split=1,
        user=read_eval_corpus(str(eval_file)),
    )
    assert corpus.sizes == {ENCODER: 2}
    sentences = [it.tokens.tolist() for it in corpus.items if not it.is_view]
    assert sentences == [bert.tokenizer(line).input_ids for line in LINES[1::2]]


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("missing.txt", None, "corpus file not found"),
        ("empty.txt", "\n\n", "empty.txt"),
        ("one.txt", "Only one line.\n", "the evaluation corpus holds 1 sequence; give at least 2"),
        ("bad.jsonl", '{"text": "fine"}\n{"text": \n', "bad.jsonl:2:"),
    ],
)
def test_a_bad_eval_corpus_fails_in_one_line(tmp_path, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(CorpusError) as caught:
        read_eval_corpus(str(path))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_the_users_metric_needs_a_corpus():
    with pytest.raises(
        ConfigError, match=r"metrics must be without loss_corpus unless an eval_corpus is given"
    ):
        AblateConfig(metrics=(CORPUS,))


# --- a metric defined in Python: interp.ablate.tasks ------------------------------------------


def _wrong_minus_right(wrong_id):
    def metric(logits, tokens):  # higher = worse: the wrong token gains on the right one
        return logits[:, wrong_id] - logits.gather(1, tokens[:, None])[:, 0]

    return metric


def _logits(model, ids):
    with torch.inference_mode():
        return model.bridge(torch.tensor([ids]))[0].double()


def test_a_task_reads_its_own_positions_with_its_own_metric(llama):
    tok = llama.tokenizer
    texts = (
        "The old man walked to the river .",
        "She said nothing .",
        "A small boat was on the water .",
        "They went home .",
    )
    wrong = tok.convert_tokens_to_ids("the")
    task = Task(
        "my_task", texts, positions=((3,), (1,), (0, 2), (2,)), metric=_wrong_minus_right(wrong)
    )
    config = AblateConfig(
        tasks=(task,),
        metrics=("my_task",),
        attribution=False,
        prune=False,
        n_bootstrap=10,
        threads=1,
    )
    result = ablate(llama, config, progress=False)
    expected = []
    for text, positions in (
        (texts[0], (3,)),
        (texts[2], (0, 2)),
    ):  # sequences 0 and 2; BOS shifts by one
        ids = [llama.bos_token_id, *tok(text).input_ids]
        logits = _logits(llama, ids)
        expected += [float(logits[p + 1, wrong] - logits[p + 1, ids[p + 2]]) for p in positions]
    exact = result.effects[result.effects["estimator"] == "exact"]
    assert set(exact["metric"]) == {"my_task"} and result.summary["corpus"] == {
        "my_task": {"n_sequences": 2, "n_scored": 3}
    }
    assert (
        exact["n_tokens"] == 3
    ).all()  # the positions the task reads, not every token of its sequences
    assert exact["baseline"].iloc[0] == pytest.approx(sum(expected) / len(expected), rel=1e-5)


def test_a_tasks_effect_is_the_metric_with_the_head_zeroed(llama):
    """Token-id sequences, the default metric (next-token loss) at every position; head (1, 2)
    zeroed equals the model with that head's slice of o_proj zeroed."""
    ids = [[5, 9, 14, 9, 5, 30], [7, 7, 8], [40, 41, 42, 43], [3, 4, 5]]
    config = AblateConfig(
        tasks=(Task("ids", ids),),
        metrics=("ids",),
        ablations=("zero",),
        attribution=False,
        prune=False,
        n_bootstrap=10,
        threads=1,
    )
    result = ablate(llama, config, progress=False)
    weight = llama.bridge.original_model.model.layers[1].self_attn.o_proj.weight
    cols = slice(2 * D_HEAD, 3 * D_HEAD)  # head 2's inputs to the output projection
    saved = weight.data[:, cols].clone()
    weight.data[:, cols] = 0
    try:
        losses = [
            F.cross_entropy(_logits(llama, s)[:-1], torch.tensor(s[1:]), reduction="sum")
            for s in (ids[0], ids[2])
        ]
    finally:
        weight.data[:, cols] = saved
    row = result.effects.query("estimator == 'exact' and layer == 1 and head == 2").iloc[0]
    assert row["ablated"] == pytest.approx(float(sum(losses)) / (5 + 3), rel=1e-5)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Task("loss_prose", ("a", "b")), "give a name that is not a built-in metric"),
        (lambda: Task("t", ("only one",)), "has 1 sequence(s); give at least 2"),
        (lambda: Task("t", ("a b", "c d"), positions=((0,),)), "1 position lists for 2 sequences"),
    ],
)
def test_a_bad_task_is_refused_in_one_line(make, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        make()


def test_a_position_without_a_next_token_is_refused(llama):
    task = Task("t", ("She said nothing .", "They went home ."), positions=((3,), (0,)))
    with pytest.raises(
        ConfigError, match=r"task 't', sequence 0: position 3 has no next token in the 4 tokens"
    ):
        ablate(
            llama,
            AblateConfig(tasks=(task,), attribution=False, prune=False, n_bootstrap=10, threads=1),
            progress=False,
        )


def test_a_run_with_tasks_is_made_again_from_python_only(llama, tmp_path):
    from interp import RunOptions
    from interp.errors import RunError
    from interp.pipeline.execute import options_from_manifest, run_pipeline

    task = Task("mine", ("She said nothing .", "They went home ."))
    options = RunOptions(
        out_dir=str(tmp_path),
        run_name="t",
        skip=("collect", "weights", "classify", "report"),
        stages={
            "ablate": AblateConfig(
                tasks=(task,), attribution=False, prune=False, n_bootstrap=10, threads=1
            )
        },
    )
    run_dir = run_pipeline(options, model=llama, progress=False)
    with pytest.raises(
        RunError,
        match=r"was made with metrics defined in Python \(mine\): make the run again from Python",
    ):
        options_from_manifest(run_dir)

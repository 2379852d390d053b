"""Per-sequence fields and named positions of a task (interp.ablate.tasks): the fields reach the
metric aligned with its rows through batching, splits, attribution and pruning, against values
known here; the task_attention table (interp.ablate.task_attention) on a planted model whose
heads' attention is known by construction."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from interp import AblateConfig, Task
from interp.ablate.evaluation import build_corpus
from interp.ablate.sequential import rounds
from interp.ablate.stage import ablate
from interp.ablate.task_attention import attention_table, pairs, task_attention
from interp.errors import ConfigError
from interp.pipeline.tables import TASK_ATTENTION
from interp.synthetic.planted import planted_model

pytestmark = pytest.mark.usefixtures("one_thread")

# Lengths out of index order, so that batching (sorted by length) reorders the sequences.
TEXTS = (
    "The old man walked to the river .",
    "She said nothing .",
    "They went home .",
    "A small boat was on the water .",
    "The man said .",
    "She went to the river .",
)
POSITIONS = ((1,), (1,), (0, 1), (2,), (0, 1, 2), (3,))
WEIGHT = (10.0, 20.0, 3.0, 40.0, 0.5, 6.0)


def _the_field_itself(logits, tokens, weight):
    return (
        weight.to(logits.dtype) + 0 * logits[:, 0]
    )  # 0 * logits: a gradient for attribution to take


def _token_weighted_mean(split: int) -> float:
    rows = [(WEIGHT[i], len(POSITIONS[i])) for i in range(split, len(TEXTS), 2)]
    return sum(w * n for w, n in rows) / sum(n for _, n in rows)


def test_a_metric_receives_each_rows_own_field_value(llama):
    """The metric returns the field: the effect's baseline is the token-weighted mean of the field
    over split 0 (every estimator), and the pruning curve's step 0 the same over split 1."""
    task = Task(
        "weighted", TEXTS, positions=POSITIONS, metric=_the_field_itself, fields={"weight": WEIGHT}
    )
    config = AblateConfig(
        tasks=(task,), metrics=("weighted",), top_k=2, max_rounds=1, n_bootstrap=10, threads=1
    )
    result = ablate(llama, config, progress=False)
    assert (_token_weighted_mean(0), _token_weighted_mean(1)) == pytest.approx(
        ((10 + 2 * 3 + 3 * 0.5) / 6, 22)
    )
    for estimator, rows in result.effects.groupby("estimator"):
        assert rows["baseline"].to_numpy() == pytest.approx(_token_weighted_mean(0), abs=1e-12), (
            estimator
        )
        assert rows["delta"].abs().max() == pytest.approx(
            0, abs=1e-12
        )  # the field does not depend on a head
    assert set(result.effects["estimator"]) == {"attribution", "integrated", "exact"}
    step0 = result.pruning.query("heads_removed == 0 and removed_by == 'effect'")["value"]
    assert step0.to_numpy() == pytest.approx(_token_weighted_mean(1), abs=1e-12)


def test_the_field_rows_follow_the_batch_order_and_the_rounds(llama):
    task = Task(
        "weighted", TEXTS, positions=POSITIONS, metric=_the_field_itself, fields={"weight": WEIGHT}
    )
    corpus = build_corpus(llama, 0, 0, (6,), 0, seed=0, max_tokens=12, tasks=(task,))
    # shortest first: sequence 2 (2 rows), 4 (3 rows), then 0 (1 row)
    assert corpus.batches[0].row_fields["weight"].tolist() == [3.0, 3.0, 0.5, 0.5, 0.5, 10.0]
    parts = rounds(
        corpus, 3, 12, llama.tokenizer.pad_token_id
    )  # the sequential sweep: one sequence a round
    assert [p.batches[0].row_fields["weight"].tolist() for p in parts] == [
        [10.0],
        [3.0, 3.0],
        [0.5, 0.5, 0.5],
    ]
    for batch in corpus.batches + [b for p in parts for b in p.batches]:
        for row, seq in enumerate(batch.row_batch.tolist()):
            i = 2 * int(batch.index[seq])  # split 0 holds sequences 0, 2, 4
            assert batch.row_fields["weight"][row].item() == WEIGHT[i]
    assert {b.row_fields["weight"].dtype for b in corpus.batches} == {torch.float64}


def test_a_token_id_field_reads_the_logit_of_each_prompts_own_token(llama):
    """An IOI-style metric whose wrong answer differs per sequence: logit(s) - logit(next token)."""
    tok = llama.tokenizer
    s_words = ("river", "nothing", "home", "water", "man", "river")
    s_ids = [tok.convert_tokens_to_ids(w) for w in s_words]

    def s_over_truth(logits, tokens, s):
        assert s.dtype == torch.long
        return logits.gather(1, s[:, None])[:, 0] - logits.gather(1, tokens[:, None])[:, 0]

    task = Task("s_task", TEXTS, positions=POSITIONS, metric=s_over_truth, fields={"s": s_ids})
    config = AblateConfig(
        tasks=(task,),
        metrics=("s_task",),
        attribution=False,
        prune=False,
        n_bootstrap=10,
        threads=1,
        heads_per_pass=1,
        max_rounds=1,
    )
    result = ablate(llama, config, progress=False)
    values = []
    for i in (0, 2, 4):
        ids = [llama.bos_token_id, *tok(TEXTS[i]).input_ids]
        with torch.inference_mode():
            logits = llama.bridge(torch.tensor([ids]))[0].double()
        values += [float(logits[p + 1, s_ids[i]] - logits[p + 1, ids[p + 2]]) for p in POSITIONS[i]]
    assert result.effects["baseline"].iloc[0] == pytest.approx(np.mean(values), rel=1e-5)


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: Task(
                "t", ("a b", "c d"), metric=lambda logits, tokens, s: s, fields={"s": [1]}
            ),
            "task 't': field 's' has 1 values for 2 sequences; give one per sequence",
        ),
        (
            lambda: Task(
                "t", ("a b", "c d"), metric=lambda logits, tokens, s: s, fields={"s": [1, "x"]}
            ),
            "task 't': field 's', sequence 1: 'x' is not a number",
        ),
        (
            lambda: Task(
                "t", ("a b", "c d"), metric=lambda logits, tokens, s: s, fields={"s": [1.0, np.nan]}
            ),
            "task 't': field 's', sequence 1: nan is not a finite number",
        ),
        (
            lambda: Task(
                "t",
                ("a b", "c d"),
                metric=lambda logits, tokens, s: s,
                fields={"s": np.array([-np.inf, 2.0], dtype=np.float32)},
            ),
            "task 't': field 's', sequence 0: -inf is not a finite number",
        ),
        (
            lambda: Task(
                "t", ("a b", "c d"), metric=lambda logits, tokens, s: s, fields={"s": [2**63, 1]}
            ),
            f"task 't': field 's', sequence 0: {2**63} does not fit a 64-bit integer",
        ),
        (
            lambda: Task(
                "t",
                ("a b", "c d"),
                metric=lambda logits, tokens, s: s,
                fields={"s": [0, -(2**63) - 1]},
            ),
            f"task 't': field 's', sequence 1: {-(2**63) - 1} does not fit a 64-bit integer",
        ),
        (
            lambda: Task(
                "t", ("a b", "c d"), metric=lambda logits, tokens, s: s, fields={"no good": [1, 2]}
            ),
            "task 't': field name 'no good' must be a Python identifier",
        ),
        (
            lambda: Task(
                "t", ("a b", "c d"), metric=lambda logits, tokens, s: s, fields={"io": [1, 2]}
            ),
            "task 't': its metric takes no argument 'io'; write it as metric(logits, tokens, io)",
        ),
        (
            lambda: Task(
                "t", ("a b", "c d"), metric=lambda logits, tokens, s, io: s, fields={"s": [1, 2]}
            ),
            "task 't': its metric cannot take the fields (missing a required argument: 'io')",
        ),
        (
            lambda: Task("t", ("a b", "c d"), fields={"s": [1, 2]}),
            "task 't': fields go to the metric, and the default metric (the next-token loss) takes none",
        ),
        (
            lambda: Task("t", ("a b", "c d"), named_positions=[{"A": 0}]),
            "task 't' has 1 named-position maps for 2 sequences; give one per sequence",
        ),
        (
            lambda: Task("t", ("a b", "c d"), named_positions=[{"A": 0, "B": 1}, {"A": 0, "C": 1}]),
            "task 't', sequence 1 names positions A, C where sequence 0 names A, B; name the same positions",
        ),
        (
            lambda: Task("t", ("a b", "c d"), named_positions=[{"A": 0}, {"A": -1}]),
            "task 't', sequence 1: named position 'A' = -1 must be a whole number >= 0",
        ),
        (
            lambda: Task("t", ("a b", "c d"), named_positions=[{"A": 0}, {}]),
            "task 't', sequence 1: named positions must be a non-empty mapping",
        ),
    ],
)
def test_a_bad_field_or_name_is_refused_in_one_line(make, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        make()
    assert "\n" not in str(caught.value)


def test_fields_and_names_keep_a_task_backward_compatible():
    task = Task("t", ("a b", "c d"), positions=((0,), (0,)))
    assert task.fields is None and task.named_positions is None and task.position_names == ()
    assert task.fields_of(1) == {}
    typed = Task(
        "u",
        ("a b", "c d"),
        metric=lambda logits, tokens, **kw: logits[:, 0],
        fields={"n": np.array([1, 2]), "w": [1, 2.5]},
        named_positions=({"A": 0, "B": 1},) * 2,
    )
    assert typed.fields_of(1) == {"n": 2, "w": 2.5} and isinstance(typed.fields["w"][0], float)
    assert typed.position_names == ("A", "B")


def test_a_named_position_beyond_the_sequence_is_refused(llama):
    task = Task(
        "t", ("She said nothing .", "They went home ."), named_positions=[{"A": 0}, {"A": 4}]
    )
    with pytest.raises(
        ConfigError, match=r"task 't', sequence 1: named position 'A' = 4 is beyond the 4 tokens"
    ):
        ablate(
            llama,
            AblateConfig(tasks=(task,), attribution=False, prune=False, n_bootstrap=10, threads=1),
            progress=False,
        )


# --- task_attention ------------------------------------------------------------------------------


def test_pairs_are_every_ordered_pair_of_distinct_names():
    assert pairs(("IO", "S", "END")) == [
        ("IO", "S"),
        ("IO", "END"),
        ("S", "IO"),
        ("S", "END"),
        ("END", "IO"),
        ("END", "S"),
    ]


def test_the_table_averages_over_the_prompts_where_the_key_is_not_after_the_query():
    weights = np.zeros((3, 2, 1, 2))  # [prompt, pair, layer, head]
    weights[:, 0, 0, 0] = [0.2, 0.4, 0.9]
    weights[:, 1, 0, 1] = [0.5, 0.5, 0.5]
    valid = np.array([[True, False], [True, True], [False, True]])
    table = attention_table("t", [("B", "A"), ("A", "B")], weights, valid, n_bootstrap=50, seed=0)
    row = table.query("query == 'B' and key == 'A' and head == 0").iloc[0]
    assert row["attention"] == pytest.approx(0.3) and row["n"] == 2  # prompt 2 does not count
    assert 0.2 <= row["ci_low"] <= row["ci_high"] <= 0.4
    steady = table.query("query == 'A' and head == 1").iloc[0]
    assert (steady["attention"], steady["ci_low"], steady["ci_high"], steady["n"]) == pytest.approx(
        (0.5, 0.5, 0.5, 2)
    )
    assert len(table) == 2 * 2  # both pairs, both heads
    TASK_ATTENTION.validate(table)


@pytest.fixture(scope="module")
def planted():
    # L0H0 previous token, L1H0 duplicate token; every other head attends uniformly
    return planted_model(
        {(0, 0): "previous_token", (1, 0): "duplicate_token"}, n_layers=2, n_heads=2
    )


def test_task_attention_reads_the_planted_heads_between_named_positions(planted):
    ids = planted.tokenizer.convert_tokens_to_ids
    bos, she, cat, dog, sees, runs = ids(["<bos>", "she", "cat", "dog", "sees", "runs"])
    # id sequences are used as given: position p is token p. IO before S2 in the first, after it in the second.
    prompts = ([bos, she, cat, dog, she, runs], [bos, she, sees, she, dog, runs, cat])
    names = ({"S1": 1, "IO": 2, "S2": 4, "END": 5}, {"S1": 1, "S2": 3, "IO": 4, "END": 6})
    task = Task("ioi", prompts, named_positions=names)
    table = task_attention(planted, (task,), n_bootstrap=100, seed=0, max_tokens=64)

    def at(layer, head, query, key):
        row = table.query("layer == @layer and head == @head and query == @query and key == @key")
        assert len(row) == 1
        return row.iloc[0]

    assert len(table) == 2 * 2 * (
        5 + 2
    )  # every head; 5 pairs whose key comes first in both prompts, 2 in one
    end_s2 = at(
        0, 0, "END", "S2"
    )  # previous-token head: S2 is right before END in the first prompt only
    assert (end_s2["attention"], end_s2["n"]) == pytest.approx((0.5, 2))
    assert (end_s2["ci_low"], end_s2["ci_high"]) == pytest.approx((0.0, 1.0))
    assert (
        at(0, 0, "IO", "S2")["attention"] == pytest.approx(1.0) and at(0, 0, "IO", "S2")["n"] == 1
    )
    assert (at(0, 0, "S2", "IO")["attention"], at(0, 0, "S2", "IO")["n"]) == pytest.approx(
        (0, 1)
    )  # IO is 2 before
    assert at(1, 0, "S2", "S1")["attention"] == pytest.approx(
        1.0, abs=1e-9
    )  # duplicate token: S2 copies S1
    uniform = at(0, 1, "END", "IO")  # uniform over the visible keys: 1/6 and 1/7 (float32)
    assert (
        uniform["attention"] == pytest.approx((1 / 6 + 1 / 7) / 2, abs=1e-7) and uniform["n"] == 2
    )
    assert at(1, 1, "S2", "IO")["attention"] == pytest.approx(1 / 5, abs=1e-7)


def test_a_run_from_python_writes_the_table_reports_it_and_drops_it_when_no_task_names_positions(
    llama, tmp_path
):
    import interp

    names = [{"S": 0, "V": 1, "END": 3}] * 4
    texts = ("She said nothing .", "They went home .", "She went home .", "They said nothing .")
    task = Task("named", texts, positions=((1,),) * 4, named_positions=names)
    ablate_config = AblateConfig(
        tasks=(task,), attribution=False, prune=False, n_bootstrap=10, threads=1
    )
    options = interp.RunOptions(
        out_dir=str(tmp_path),
        run_name="t",
        skip=("collect", "weights", "classify"),
        stages={"ablate": ablate_config, "report": interp.ReportConfig(pdf=False)},
    )
    run_dir = interp.run(options, model=llama, progress=False)
    table = interp.load_run(run_dir).tables["task_attention"]
    assert len(table) == 3 * 4 * 3  # every head; END -> S, END -> V, V -> S
    assert set(zip(table["query"], table["key"])) == {("END", "S"), ("END", "V"), ("V", "S")}
    assert (table["n"] == 4).all()
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "Attention between named positions" in html and "END → S" in html

    interp.rerun_stage(
        run_dir,
        "ablate",
        config=AblateConfig(
            tasks=(Task("plain", texts),), attribution=False, prune=False, n_bootstrap=10, threads=1
        ),
        model=llama,
    )
    assert interp.load_run(run_dir).tables["task_attention"] is None
    assert not (run_dir / "task_attention.csv").exists()

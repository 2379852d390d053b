"""A run made from Python with an indirect-object task on SmolLM2 (docs/how-to/own-task.md, "A run
with your own task", smaller): per-prompt subject names reach the metric as a field, the named positions
IO, S1, S2 and END give the task_attention table, and the run has roles and a report.

The metric and the attention are checked against the model run here directly, prompt by prompt."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import interp
from interp.model import lens

pytestmark = pytest.mark.slow

PAIRS = (
    ("Mary", "John"),
    ("Anna", "Tom"),
    ("Kate", "Paul"),
    ("Lisa", "Mark"),
    ("Emma", "James"),
    ("Alice", "Bob"),
    ("Laura", "Peter"),
    ("Sarah", "David"),
)  # (IO, S): one token each after a space
TEMPLATES = (
    "When {io} and {s} went to the store, {s} gave a drink to {io}",  # IO before S1
    "When {s} and {io} went to the park, {s} gave a ball to {io}",
)  # S1 before IO


def ioi_task(tok):
    name_id = lambda word: tok(" " + word).input_ids[0]  # noqa: E731
    texts, names, s_ids = [], [], []
    for i, (io, s) in enumerate(PAIRS * 2):
        text = TEMPLATES[i % 2].format(io=io, s=s)
        ids = tok(text).input_ids
        at = [k for k, t in enumerate(ids) if t == name_id(s)]
        texts.append(text)
        names.append({"IO": ids.index(name_id(io)), "S1": at[0], "S2": at[1], "END": len(ids) - 2})
        s_ids.append(name_id(s))

    def s_over_io(logits, tokens, s):
        return logits.gather(1, s[:, None])[:, 0] - logits.gather(1, tokens[:, None])[:, 0]

    return interp.Task(
        "ioi",
        texts,
        positions=[(n["END"],) for n in names],
        metric=s_over_io,
        fields={"s": s_ids},
        named_positions=names,
    )


@pytest.fixture(scope="module")
def ioi_run(smollm2, tmp_path_factory):
    old = torch.get_num_threads()
    torch.set_num_threads(1)  # a shared 2-core box: see interp.executors.threads
    task = ioi_task(smollm2.tokenizer)
    options = interp.RunOptions(
        quick=True,
        out_dir=str(tmp_path_factory.mktemp("runs")),
        run_name="ioi",
        stages={
            "collect": interp.CollectConfig(
                n_repeated=4, n_syntax=16, max_sentences=8, n_bootstrap=20
            ),
            "ablate": interp.AblateConfig(
                tasks=(task,),
                metrics=("ioi",),
                top_k=3,
                ig_steps=1,
                max_rounds=1,
                prune=False,
                n_bootstrap=100,
            ),
            "report": interp.ReportConfig(pdf=False),
        },
    )
    try:
        run_dir = interp.run(options, model=smollm2, progress=False)
    finally:
        torch.set_num_threads(old)
    return task, interp.load_run(run_dir)


def _direct(model, ids, layer=None):
    """Logits [pos, vocab] of one prompt (BOS prepended, as the stage does), or with ``layer`` that
    layer's pattern [head, q, k]."""
    tokens = torch.tensor([[model.bos_token_id, *ids]])
    if layer is None:
        with torch.inference_mode():
            return model.bridge(tokens)[0].double()
    kept = {}

    def keep(at: int, pattern: torch.Tensor) -> None:
        if at == layer:
            kept["pattern"] = pattern[0].double()

    lens.run_patterns(model, tokens, torch.ones_like(tokens), keep)
    return kept["pattern"]


def test_the_task_attention_table_covers_every_head_and_pair(ioi_run, smollm2):
    task, run = ioi_run
    table = run.task_attention
    heads = smollm2.n_layers * smollm2.n_heads
    counts = table.groupby(["query", "key"]).size()
    assert (counts == heads).all()
    for pair in [("END", "S2"), ("END", "IO"), ("END", "S1"), ("S2", "S1"), ("S2", "IO")]:
        assert pair in counts.index
    n = table.groupby(["query", "key"])["n"].first()
    assert (
        n[("END", "S2")] == 16 and n[("IO", "S1")] == 8 and n[("S1", "IO")] == 8
    )  # half the prompts each way
    assert (
        (table["ci_low"] <= table["attention"] + 1e-12)
        & (table["attention"] <= table["ci_high"] + 1e-12)
    ).all()

    best = table.query("query == 'END' and key == 'S2'").nlargest(1, "attention").iloc[0]
    tok = smollm2.tokenizer
    weights = []
    for text, names in zip(task.sequences, task.named_positions):
        pattern = _direct(smollm2, tok(text).input_ids, layer=int(best["layer"]))
        weights.append(float(pattern[int(best["head"]), names["END"] + 1, names["S2"] + 1]))
    assert best["attention"] == pytest.approx(np.mean(weights), rel=1e-4)
    to_io = table.query("query == 'END' and key == 'IO'").nlargest(1, "attention").iloc[0]
    print(
        f"largest END -> S2: L{best['layer']}H{best['head']} {best['attention']:.2f}; "
        f"END -> IO: L{to_io['layer']}H{to_io['head']} {to_io['attention']:.2f}"
    )


def test_the_metric_reads_each_prompts_own_subject_name(ioi_run, smollm2):
    task, run = ioi_run
    tok = smollm2.tokenizer
    values = []
    for i in range(0, len(task.sequences), 2):  # sequences 0, 2, 4, ... measure the effects
        ids = tok(task.sequences[i]).input_ids
        end = task.named_positions[i]["END"] + 1  # BOS prepended
        logits = _direct(smollm2, ids)
        values.append(float(logits[end, task.fields["s"][i]] - logits[end, ids[end]]))
    effects = run.effects.query("metric == 'ioi'")
    assert set(effects["estimator"]) >= {"exact", "attribution"}
    assert effects["baseline"].to_numpy() == pytest.approx(np.mean(values), rel=1e-4)


def test_the_run_has_roles_and_a_report_with_the_attention_section(ioi_run, smollm2):
    _, run = ioi_run
    assert len(run.roles) == smollm2.n_layers * smollm2.n_heads
    html = (run.path / "report.html").read_text(encoding="utf-8")
    assert "Attention between named positions" in html and "END → S2" in html and "END → IO" in html

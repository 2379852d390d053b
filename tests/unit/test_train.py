"""The general trainer (interp.synthetic.train) and the grammar task, on tiny models and few steps."""

from __future__ import annotations

import math

import pytest
import torch

from interp.model.load import load_model
from interp.probes.grammar import COPULA, INTRANS, TRANS_ANIMATE, TRANS_THING
from interp.synthetic.cache import Job, train_cached, train_many
from interp.synthetic.planted import build_tokenizer
from interp.synthetic.tasks.grammar import SPAN, GrammarTask
from interp.synthetic.train import (
    Architecture,
    Training,
    TrainingBatch,
    evaluate,
    token_losses,
    train,
)

TINY = Architecture(n_layers=2, n_heads=2, d_model=16, n_ctx=72)


class CountTask:
    """Tokens w0 w1 w2 ... in order from a random start: every target is predictable from the last token."""

    name = "count"
    words = tuple(f"w{i}" for i in range(10))
    seq_len = 6

    def params(self):
        return {}

    def batch(self, n, gen, tok):
        first = tok.convert_tokens_to_ids("w0")
        start = torch.randint(0, 5, (n, 1), generator=gen)
        tokens = torch.cat(
            [torch.full((n, 1), tok.bos_token_id), first + start + torch.arange(5)], 1
        )
        scored = torch.ones_like(tokens, dtype=torch.bool)
        scored[:, 0] = False
        last = torch.zeros_like(scored)
        last[:, -1] = True
        return TrainingBatch(tokens, scored, {"last": last}, foil=tokens - 1, foil_at=last)


def test_token_losses_uniform_logits():
    tokens = torch.tensor([[0, 3, 4, 5]])
    loss = token_losses(torch.zeros(1, 4, 7), tokens)
    assert loss[0, 0] == 0.0
    torch.testing.assert_close(loss[0, 1:], torch.full((3,), math.log(7)))


class PerfectModel(torch.nn.Module):
    """Logits that put 50 on the true next token of CountTask (it is always the current one + 1)."""

    def __init__(self, vocab: int):
        super().__init__()
        self.vocab = vocab

    def forward(self, tokens):
        logits = torch.zeros(*tokens.shape, self.vocab)
        logits.scatter_(2, (tokens + 1).clamp(max=self.vocab - 1).unsqueeze(-1), 50.0)
        return type("Out", (), {"logits": logits})()


def test_evaluate_metrics_on_a_perfect_model():
    task = CountTask()
    tok = build_tokenizer(task.words)
    metrics = evaluate(PerfectModel(len(tok)), task, tok, seed=0, n=10, batch_size=4)
    assert metrics["acc_last"] == 1.0 and metrics["foil_acc"] == 1.0
    assert metrics["foil_diff"] == pytest.approx(50.0)
    # targets after BOS: the first word is not predictable from BOS and scores log(vocab) - ish
    assert metrics["loss_last"] == pytest.approx(0.0, abs=1e-12)
    assert metrics["loss"] > 0


def test_training_is_deterministic_and_keeps_checkpoints():
    training = Training(steps=4, batch_size=4, checkpoints=(0, 2), eval_sequences=8)
    a = train(CountTask(), TINY, training, progress=False)
    b = train(CountTask(), TINY, training, progress=False)
    assert sorted(a.states) == [0, 2, 4] and sorted(a.evals) == [0, 2, 4]
    for step in a.states:
        for name, value in a.states[step].items():
            assert torch.equal(value, b.states[step][name]), (step, name)
    other = train(CountTask(), TINY, Training(steps=4, batch_size=4, seed=1), progress=False)
    assert not torch.equal(
        other.states[4]["transformer.wte.weight"], a.states[4]["transformer.wte.weight"]
    )
    assert not torch.equal(
        a.states[0]["transformer.wte.weight"], a.states[4]["transformer.wte.weight"]
    )
    assert a.curve[0]["step"] == 0 and "loss_last" in a.curve[0]


def test_frozen_parts_stay_fixed():
    arch = Architecture(n_layers=2, n_heads=4, d_model=16, attn_only=True, fixed_concat=True)
    result = train(CountTask(), arch, Training(steps=3, batch_size=4, lr=0.1), progress=False)
    for layer in range(2):
        state = result.states[3]
        assert torch.equal(state[f"transformer.h.{layer}.attn.c_proj.weight"], torch.eye(16))
        assert not state[f"transformer.h.{layer}.attn.c_proj.bias"].any()
        assert not state[f"transformer.h.{layer}.mlp.c_fc.weight"].any()
    learned = train(
        CountTask(),
        Architecture(n_layers=1, n_heads=4, d_model=16, attn_only=False),
        Training(steps=3, batch_size=4, lr=0.1, checkpoints=(0,)),
        progress=False,
    )
    assert learned.states[3]["transformer.h.0.mlp.c_fc.weight"].abs().sum() > 0
    assert not torch.equal(
        learned.states[3]["transformer.h.0.attn.c_proj.weight"],
        learned.states[0]["transformer.h.0.attn.c_proj.weight"],
    )


def test_cache_round_trip(tmp_path):
    training = Training(steps=3, batch_size=4, checkpoints=(1,), eval_sequences=4)
    made = train_cached(CountTask(), TINY, training, cache_root=tmp_path, progress=False)
    (folder,) = [p for p in tmp_path.iterdir() if not p.name.startswith(".")]
    assert {p.name for p in folder.iterdir()} == {"train.json", "step-1", "step-3"}
    files = [p.name for p in folder.rglob("*")]
    assert "model.safetensors" in files and not [
        f for f in files if f.endswith((".bin", ".pt", ".pkl", ".pth"))
    ]
    again = train_cached(CountTask(), TINY, training, cache_root=tmp_path, progress=False)
    assert again.curve == made.curve and again.evals == made.evals
    tokens = torch.tensor([[0, 4, 5, 6, 7]])
    with torch.inference_mode():
        direct = made.model(1).bridge(tokens)
        torch.testing.assert_close(again.model(1).bridge(tokens), direct)
        torch.testing.assert_close(load_model(str(again.checkpoint_dir(1))).bridge(tokens), direct)
    # another setting trains anew, in its own folder
    train_cached(
        CountTask(),
        TINY,
        Training(steps=3, batch_size=4, seed=5, eval_sequences=4),
        cache_root=tmp_path,
        progress=False,
    )
    assert len([p for p in tmp_path.iterdir() if not p.name.startswith(".")]) == 2


@pytest.mark.parametrize(
    "kwargs", [{"d_model": 10, "n_heads": 4}, {"n_layers": 0}, {"positions": "rope"}]
)
def test_architecture_rejects_bad_settings(kwargs):
    with pytest.raises(ValueError):
        Architecture(**kwargs)


def test_training_rejects_checkpoints_past_the_end():
    with pytest.raises(ValueError, match="checkpoints"):
        Training(steps=10, checkpoints=(11,))


def test_grammar_task_batches():
    task = GrammarTask()
    tok = build_tokenizer(task.words)
    a = task.batch(16, torch.Generator().manual_seed(0), tok)
    b = task.batch(16, torch.Generator().manual_seed(0), tok)
    assert torch.equal(a.tokens, b.tokens) and a.tokens.shape == (16, task.seq_len)
    assert (a.tokens[:, 0] == tok.bos_token_id).all() and not a.scored[:, 0].any()
    assert (a.tokens != tok.unk_token_id).all() and (a.tokens != tok.pad_token_id).all()
    words = [tok.convert_ids_to_tokens(row.tolist()) for row in a.tokens]
    pairs = set(
        COPULA
        + TRANS_THING
        + TRANS_ANIMATE
        + INTRANS
        + [("has", "have"), ("stays", "stay"), ("belongs", "belong")]
    )
    pairs |= {(pl, sg) for sg, pl in pairs}
    for row, col in a.parts["agreement"].nonzero().tolist():
        assert (words[row][col], tok.convert_ids_to_tokens(int(a.foil[row, col]))) in pairs
    assert torch.equal(a.foil_at, a.parts["agreement"])
    repeats = a.parts["repeat"].any(1).nonzero().flatten().tolist()
    assert 4 <= len(repeats) <= 16  # most sequences repeat something at p_repeat 0.4
    for row in repeats:
        cols = a.parts["repeat"][row].nonzero().flatten().tolist()
        runs = [[cols[0]]]
        for col in cols[1:]:
            runs[-1].append(col) if col == runs[-1][-1] + 1 else runs.append([col])
        for run in runs:  # each run copies an earlier stretch, its first token included
            span = a.tokens[row, run[0] - 1 : run[-1] + 1]
            assert len(span) <= SPAN[1]
            assert any(
                torch.equal(span, a.tokens[row, s : s + len(span)])
                for s in range(1, run[0] - len(span) + 1)
            )
    punct = {tok.convert_tokens_to_ids(p) for p in (".", ",")}
    assert all(int(t) in punct for t in a.tokens[a.parts["punctuation"]])


def test_train_many_in_two_processes_matches_one(tmp_path):
    jobs = [
        Job(GrammarTask(), TINY, Training(steps=2, batch_size=2, seed=s, eval_sequences=2))
        for s in (0, 1)
    ]
    parallel = train_many(jobs, tmp_path / "a", processes=2, progress=False)
    serial = [train(job.task, job.arch, job.training, progress=False) for job in jobs]
    for p, s in zip(parallel, serial):
        assert p.path.parent == tmp_path / "a"
        for name, value in s.states[2].items():
            assert torch.equal(p.states[2][name], value), name
    assert (
        train_many(jobs[:1], tmp_path / "a", processes=2, progress=False)[0].curve
        == parallel[0].curve
    )


def test_relations_task_verbs_take_the_cue_lemma_and_the_subject_number():
    from interp.synthetic.tasks.relations import RelationsTask

    task = RelationsTask()
    tok = build_tokenizer(task.words)
    b = task.batch(64, torch.Generator().manual_seed(0), tok)
    words = [tok.convert_ids_to_tokens(row.tolist()) for row in b.tokens]
    where = task.positions(b, tok)
    assert (where["subject"] == 1).all() and torch.equal(where["cue"], where["query"] - 1)
    assert torch.equal(b.scored, b.parts["verb"]) and torch.equal(b.scored, b.foil_at)
    for row, query in zip(where["row"].tolist(), where["query"].tolist()):
        verb, cue, subject = words[row][query + 1], words[row][query - 1], words[row][1]
        assert verb == f"v{cue[1:-1]}{subject[-1]}", (verb, cue, subject)
        foil = tok.convert_ids_to_tokens(int(b.foil[row, query + 1]))
        assert foil[:-1] == verb[:-1] and foil[-1] != verb[-1]
        assert words[row][query].startswith("f")
    content = [sum(w.startswith("n") for w in row) for row in words]
    assert content == [1 + task.n_slots + task.n_distractors] * 64

"""Exemplar capture: the collect pass keeps every head's pattern on a few short probes, exactly."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from interp import CollectConfig
from interp.collect.exemplars import (
    ExemplarRecorder,
    choose_probes,
    read_exemplars,
    write_exemplars,
)
from interp.collect.stage import collect
from interp.model.lens import run_patterns
from interp.probes.base import ProbeSequence


def seq(suite: str, n: int, delims: int = 0, kind: str = "natural") -> ProbeSequence:
    is_delim = torch.zeros(n, dtype=torch.bool)
    is_delim[:delims] = True
    return ProbeSequence(torch.arange(n), suite, kind, is_delim, torch.zeros(n, dtype=torch.bool))


def test_choose_probes_prefers_punctuated_probes_that_fit_then_the_longest():
    seqs = [
        seq("prose", 5),
        seq("prose", 20),
        seq("prose", 12, delims=2),
        seq("prose", 40),
        seq("prose", 16),
        seq("rep", 33, kind="repeated"),
        seq("rep", 49, kind="repeated"),
        seq("rep", 41, kind="repeated"),
    ]
    # prose: 5 is too short, 40 too long; 12 has two delimiters; then 20 is the longest that fits.
    # rep: nothing fits in 32 tokens, so the two shortest (cut later).
    assert choose_probes(seqs, 32) == [2, 1, 5, 7]
    assert choose_probes(seqs, 32, per_suite=1) == [2, 5]


class Labels:
    def decode(self, ids: list[int]) -> str:
        return f"t{ids[0]}"


def test_recorder_keeps_the_chosen_rows_cut_and_leaves_the_pattern_alone():
    seqs = [seq("a", 10), seq("a", 9), seq("a", 3), seq("b", 12, kind="syntax")]
    recorder = ExemplarRecorder(seqs, max_tokens=8, n_layers=2, n_heads=3, tokenizer=Labels())
    assert recorder.index == [1, 0, 3]  # none of suite a fits in 8: the shortest of at least 8, cut
    pattern = torch.rand(4, 3, 12, 12)  # [batch, head, q, k]: rows are corpus probes 3, 2, 0, 1
    before = pattern.clone()
    recorder.start_batch([3, 2, 0, 1])
    for layer in range(2):
        recorder.add_layer(layer, pattern + layer)
    assert torch.equal(pattern, before)
    probes = recorder.result().probes
    assert [(p.suite, p.kind, len(p.tokens), p.full_length, p.cut) for p in probes] == [
        ("a", "natural", 8, 9, True),
        ("a", "natural", 8, 10, True),
        ("b", "syntax", 8, 12, True),
    ]
    assert probes[0].tokens == tuple(f"t{i}" for i in range(8))
    np.testing.assert_allclose(
        probes[0].pattern(1, 2), (pattern[3, 2, :8, :8] + 1).numpy(), rtol=1e-3
    )
    np.testing.assert_allclose(
        probes[1].pattern(1, 0), (pattern[2, 0, :8, :8] + 1).numpy(), rtol=1e-3
    )
    np.testing.assert_allclose(probes[2].pattern(0, 0), pattern[0, 0, :8, :8].numpy(), rtol=1e-3)
    assert probes[0].patterns.dtype == np.float16


def test_store_and_read_back_keeps_every_label(tmp_path):
    seqs = [seq("x", 9)]
    recorder = ExemplarRecorder(
        seqs, 32, 1, 1, tokenizer=type("T", (), {"decode": lambda self, ids: "\x00<b>\n"})()
    )
    recorder.start_batch([0])
    recorder.add_layer(0, torch.eye(9)[None, None])
    write_exemplars(tmp_path, recorder.result())
    probe = read_exemplars(tmp_path).probes[0]
    assert probe.tokens == ("\x00<b>\n",) * 9 and np.array_equal(probe.pattern(0, 0), np.eye(9))


@pytest.mark.parametrize("name", ["llama", "bert"])
def test_collect_stores_each_chosen_probe_as_a_pass_on_it_alone_sees_it(name, request, one_thread):
    model = request.getfixturevalue(name)
    config = CollectConfig(
        n_repeated=4,
        repeated_lengths=(8,),
        n_syntax=12,
        max_sentences=12,
        n_bootstrap=10,
        exemplar_tokens=24,
    )
    result = collect(model, config, progress=False)
    stored = result.exemplars.probes
    suites = [p.suite for p in stored]
    assert sorted(set(suites)) == ["prose", "repeated", "syntax"] and len(stored) == 6
    by_suite = {s: [q for q in result.sequences if q.suite == s] for s in set(suites)}
    for probe in stored:
        match = [
            q
            for q in by_suite[probe.suite]
            if [model.tokenizer.decode([t]) for t in q.tokens[: len(probe.tokens)].tolist()]
            == list(probe.tokens)
            and len(q) == probe.full_length
        ]
        assert match, f"no {probe.suite} probe has the stored tokens"
        tokens = match[0].tokens[None]
        seen: dict[int, torch.Tensor] = {}
        run_patterns(
            model,
            tokens,
            torch.ones_like(tokens),
            lambda layer, p: seen.setdefault(layer, p.clone()),
        )
        n = len(probe.tokens)
        for layer in range(model.n_layers):
            alone = seen[layer][0, :, :n, :n].float().numpy()
            np.testing.assert_allclose(probe.patterns[layer].astype(np.float32), alone, atol=1e-3)

"""Trained task models (interp.synthetic.tasks.forced / trained / identify): the task is learned, the
intervention finds the head the task forces, and the classifier agrees (slow: trains if uncached)."""

from __future__ import annotations

import pytest

from interp import CollectConfig
from interp.classify.stage import classify
from interp.collect.stage import collect
from interp.probes.base import NATURAL, Sentence, Suite
from interp.synthetic.identify import identify
from interp.synthetic.tasks.forced import position_of
from interp.synthetic.trained import trained

PROBES = CollectConfig(
    suites=("repeated",), n_repeated=24, repeated_lengths=(8, 12, 16), n_bootstrap=20
)


def _words(n: int = 60) -> Suite:
    import random

    rng = random.Random(0)
    texts = [
        " ".join(f"t{rng.randrange(2, 128)}" for _ in range(rng.randint(8, 30))) for _ in range(n)
    ]
    return Suite("words", NATURAL, tuple(Sentence(t) for t in texts))


@pytest.mark.slow
@pytest.mark.parametrize(
    "task, role, hypothesis",
    [
        ("copy", "previous_token", "previous_token"),
        ("position", "positional", f"position:{position_of(0)}"),
    ],
)
def test_the_forced_head_is_found_by_intervention_and_named_by_the_classifier(
    task, role, hypothesis
):
    run = trained(task, 0)
    assert run.accuracy > 0.95
    found = identify(run)
    needed = found[found["truth"].notna()]
    assert len(needed) >= 1
    assert (needed["truth"] == role).all() and (needed["best"] == hypothesis).all()
    assert (needed["restored"] > 0.9).all()
    result = collect(run.model, PROBES, suites=[_words()], progress=False)
    roles = classify(result.features, result.replicates, result.names).roles.set_index(
        ["layer", "head"]
    )
    for row in needed.itertuples():
        assert roles.loc[(row.layer, row.head), "role"] == role

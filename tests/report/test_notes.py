"""The notes of the report's summary: exact sentences from hand-built summary data."""

from __future__ import annotations

from interp.report.notes import precision_advice, precision_note


def test_precision_advice_follows_what_stopped_the_effects():
    budget = {"metric": "m", "ablation": "mean", "met": 3, "budget": 2}
    assert precision_advice([budget]) == (
        "Raise --time-budget, or ask for --precise (rounds until every effect is met); the "
        "rounds went first to the effects contending for the 20 largest of their metric, those "
        "nearest the rule first, so those stopped by the budget include the heads that waited "
        "for them."
    )
    # a --precise run has no time budget: no advice to ask for what it already is
    ended = [{"rounds": 1}, {"corpus": 4}]
    assert precision_advice(ended) == (
        "Raise --max-rounds; an effect stopped by the end of its sequences needs a larger "
        "evaluation set, not more rounds (your own text: --eval-corpus FILE)."
    )
    short = [{"metric": "loss_repeated", "rounds": 3, "more_positions": 2.94}]
    assert precision_advice(short) == (
        "Raise --max-rounds. At the rate an interval narrows (as one over the square root of the "
        "positions), the open effect furthest from the rule, per metric, needs about 2.9x "
        "(loss_repeated) the positions it rests on; where that is more than its eval set holds "
        "(the built-in prose has so many lines), only a larger evaluation set gives it."
    )


def test_the_precision_note_states_the_precision_the_run_asked_for():
    rows = [{"metric": "loss_prose", "ablation": "mean", "met": 4, "budget": 1}]
    default = precision_note({"precision": rows})
    assert default is not None and default.startswith(
        "Exact effects that did not reach the precision asked for (the interval decides the head "
        "against the 1% tolerance and, for a head that matters, is within 10% of its effect; the "
        "effects table's precision column): loss_prose (mean): 4 met, 1 stopped by the time "
        "budget, 0 by the last round. Raise --time-budget"
    )
    finer = precision_note({"precision": rows, "precision_asked": 0.025})
    assert finer is not None and "is within 2.5% of its effect" in finer
    assert precision_note({"precision": [{"metric": "m", "ablation": "mean", "met": 3}]}) is None
    assert precision_note({}) is None

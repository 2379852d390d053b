"""The weights stage on real and trained models (slow): composition finds the previous-token head
an induction head's keys read, whether the truth comes from intervention (a model trained on the
induction task, interp.synthetic.identify) or from the literature's known heads of SmolLM2."""

from __future__ import annotations

import numpy as np
import pytest

from interp.weights.config import WeightsConfig
from interp.weights.stage import SCORES, partners, weights

SMALL = WeightsConfig(n_tokens=512, n_null=20, n_bootstrap=10, n_prose=8, n_repeated=4)


@pytest.mark.slow
def test_induction_heads_keys_read_the_previous_token_heads_of_a_trained_model():
    from interp.synthetic.identify import identify
    from interp.synthetic.trained import trained

    run = trained("induction", 0)  # trains if uncached
    truth = identify(run, n=32).set_index(["layer", "head"])["truth"]
    previous = {lh for lh, role in truth.items() if role == "previous_token" and lh[0] == 0}
    induction = [lh for lh, role in truth.items() if role == "induction"]
    assert previous and induction
    others = {(0, h) for h in range(run.model.n_heads)} - previous
    result = weights(run.model, SMALL, progress=False)
    for layer, head in induction:
        ranked = partners(result.composition, layer, head, "k", top=run.model.n_heads)
        order = list(zip(ranked["writer_layer"], ranked["writer_head"]))
        assert order[0] in previous, order
        # every previous-token head before every other head of layer 0
        assert max(order.index(p) for p in previous) < min(
            (order.index(o) for o in others), default=len(order)
        ), order
        assert ranked.loc[0, "value"] > ranked.loc[0, "null_high"]


@pytest.mark.slow
def test_smollm2_weights(smollm2):
    result = weights(smollm2, SMALL, progress=False)
    assert result.unscored == {}
    assert result.reading["tied_unembedding"] is True
    assert {"numbers (lower)", "days (space capitalised)", "months (space capitalised)"} <= set(
        result.reading["ordinals"]
    )
    table = result.weights
    assert len(table) == 30 * 9 * len(SCORES)
    assert np.isfinite(table["value"]).all() and (table["n"] > 0).all()
    assert (table.loc[table["score"] == "output_size", "value"] > 0).all()
    comp = result.composition
    assert len(comp) == 3 * 9 * 9 * (
        30 * 29 // 2
    )  # every kind, every pair of heads in different layers
    # the known induction heads (L17H3, L17H4) read the known previous-token head L16H0 most by K
    for layer, head in ((17, 3), (17, 4)):
        top = partners(comp, layer, head, "k", top=1).iloc[0]
        assert (top["writer_layer"], top["writer_head"]) == (16, 0)
        assert top["value"] > 3 * top["null_high"]

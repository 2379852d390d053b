"""Models of every size through collect -> classify -> ablate: the shapes that used to crash.

- one layer (GPT-2 planted by hand, BERT): nothing to restart from, so no layer reuse;
- a TransformerLens-native bridge (``boot_native``) with 3 layers, whose blocks return 1-tuples;
- a model with fewer logits than its tokenizer has ids (the metrics' token ids lie outside);
- a tokenizer of a dozen tokens, and a context of 8 positions.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tiny_models import N_HEADS, tiny_bert, tiny_native

from interp import AblateConfig, CollectConfig
from interp.ablate.evaluation import build_corpus
from interp.ablate.forward import Ablator
from interp.ablate.metrics import metric_sizes
from interp.ablate.stage import ablate
from interp.ablate.stats import SumStore
from interp.ablate.sweep import exact_sweep, reuse_error
from interp.classify.stage import classify
from interp.collect.stage import collect

pytestmark = pytest.mark.usefixtures("one_thread")

COLLECT = CollectConfig(
    n_repeated=4, repeated_lengths=(6,), n_syntax=10, max_sentences=10, n_bootstrap=10
)
ABLATE = AblateConfig(
    n_prose=3, n_repeated=3, repeated_lengths=(6,), n_syntax=8, n_bootstrap=10, threads=1
)


def planted_1_layer():
    from interp.synthetic.planted import planted_model

    return planted_model({(0, 0): "previous_token", (0, 1): "first_token"}, n_layers=1)


def tiny_vocabulary():
    from interp.synthetic.planted import build_tokenizer

    return tiny_native(
        n_layers=2, tokenizer=build_tokenizer((".", ",", "the", "a", "cat", "dog", "is", "are"))
    )


SHAPES = {
    "planted-1-layer": planted_1_layer,
    "bert-1-layer": lambda: tiny_bert(n_layers=1),
    "native-3-layers": lambda: tiny_native(n_layers=3),
    "fewer-logits-than-ids": lambda: tiny_native(n_layers=2, d_vocab_out=300),
    "tiny-vocabulary": tiny_vocabulary,
    "context-of-8": lambda: tiny_native(n_layers=2, n_ctx=8),
}


@pytest.fixture(scope="module", params=list(SHAPES))
def shape(request):
    return request.param, SHAPES[request.param]()


@pytest.mark.filterwarnings(
    "ignore:.*truncated:UserWarning",
    "ignore:.*output logits:UserWarning",
    "ignore:.*not measured:UserWarning",
)
def test_every_stage_runs_and_covers_every_head(shape):
    name, model = shape
    heads = model.n_layers * model.n_heads
    features = collect(model, COLLECT, progress=False)
    assert set(zip(features.features["layer"], features.features["head"])) == {
        (layer, head) for layer in range(model.n_layers) for head in range(model.n_heads)
    }
    roles = classify(features.features, features.replicates, features.names).roles
    assert len(roles) == heads and roles["role"].notna().all()
    result = ablate(model, ABLATE, progress=False)
    exact = result.effects[result.effects["estimator"] == "exact"]
    assert len(exact) == heads * len(result.summary["metrics"])
    assert np.isfinite(exact["baseline"]).all() and np.isfinite(exact["ablated"]).all()
    assert len(result.pruning) and result.summary["layer_reuse"] == (model.n_layers > 1)


def test_a_model_with_fewer_logits_than_ids_scores_only_tokens_it_can_predict():
    model = tiny_native(n_layers=2, d_vocab_out=300)
    with pytest.warns(
        UserWarning, match=r"scored token\(s\) lie outside the model's 300 output logits"
    ):
        corpus = build_corpus(
            model,
            n_prose=3,
            n_repeated=3,
            repeated_lengths=(6,),
            n_syntax=8,
            seed=0,
            max_tokens=512,
        )
    for batch in corpus.batches:
        assert (batch.row_target < 300).all()
        if batch.row_wrong is not None:
            assert (batch.row_wrong < 300).all()
        assert sorted(set(batch.index.tolist())) == batch.index.sort().values.unique().tolist()
    for eval_set, n in corpus.sizes.items():  # sequences renumbered 0..n-1 after the dropped ones
        indices = sorted(
            i for b in corpus.batches if b.eval_set == eval_set for i in b.index.tolist()
        )
        assert indices == list(range(n))


@pytest.mark.parametrize("n_layers", [1, 3])
def test_layer_reuse_on_a_native_bridge_is_exact(n_layers):
    model = tiny_native(n_layers=n_layers)
    corpus = build_corpus(
        model, n_prose=3, n_repeated=3, repeated_lengths=(6,), n_syntax=0, seed=0, max_tokens=512
    )
    ablator = Ablator(model)
    batch = corpus.batches[0]
    assert reuse_error(ablator, batch, ablator.clean(batch, keep_resid=True)) == 0.0
    heads = [(layer, head) for layer in range(n_layers) for head in range(N_HEADS)]
    stores = []
    for reuse in (True, False):
        store = SumStore(metric_sizes(corpus.sizes))
        used = exact_sweep(
            Ablator(model), corpus, store, heads, ("zero",), None, reuse=reuse, progress=False
        )
        assert used == (reuse and n_layers > 1)
        stores.append(store)
    for metric, sums in stores[0].items():
        for condition, value in sums.ablated.items():
            torch.testing.assert_close(
                value, stores[1][metric].ablated[condition], rtol=1e-5, atol=1e-6
            )
    assert math.isfinite(stores[0].baseline("loss_prose"))

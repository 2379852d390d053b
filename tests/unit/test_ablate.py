"""Ablate stage on tiny models (tiny_models.py): hooks, layer reuse, ablation values, attribution."""

from __future__ import annotations

import pytest
import torch
from tiny_models import D_HEAD, D_MODEL, N_HEADS, N_LAYERS, tiny_llama

from interp.ablate.attribution import attribute
from interp.ablate.batches import bucket_tight, derangement
from interp.ablate.catalogue import LOSS_REPEATED, SV_LOGIT_DIFF
from interp.ablate.evaluation import build_corpus
from interp.ablate.forward import Ablator, Edit
from interp.ablate.metrics import batch_metrics, kl_metric, metric_sizes
from interp.ablate.sweep import reuse_error
from interp.ablate.values import replacement
from interp.model import lens

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module", params=["llama", "gpt2", "bert"])
def any_model(request, llama, gpt2, bert):
    return {"llama": llama, "gpt2": gpt2, "bert": bert}[request.param]


def small_corpus(model):
    return build_corpus(
        model, n_prose=6, n_repeated=4, repeated_lengths=(6,), n_syntax=10, seed=0, max_tokens=512
    )


# --- hook_z ablation is the head's slice of the output projection ------------------------------


def _o_proj_slice(model, layer: int, head: int):
    """The output-projection weight entries that read head ``head``'s d_head inputs."""
    hf = model.bridge.original_model
    cols = slice(head * D_HEAD, (head + 1) * D_HEAD)
    if hasattr(hf, "transformer"):  # GPT-2 Conv1D: weight [in, out]
        return hf.transformer.h[layer].attn.c_proj.weight, (cols, slice(None))
    return hf.model.layers[layer].self_attn.o_proj.weight, (slice(None), cols)


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_zero_ablation_equals_zeroing_the_heads_output_weights(name, llama, gpt2):
    model = {"llama": llama, "gpt2": gpt2}[name]
    ablator = Ablator(model)
    layer, head = 1, 2
    for batch in small_corpus(model).batches[:3]:
        hooked = ablator.run(batch, [Edit(layer, head, torch.zeros(()))])
        weight, index = _o_proj_slice(model, layer, head)
        saved = weight.data[index].clone()
        try:
            weight.data[index] = 0
            with torch.inference_mode():
                logits = model.bridge(batch.tokens, attention_mask=batch.attention_mask)
        finally:
            weight.data[index] = saved
        assert torch.equal(hooked, logits[batch.row_batch, batch.row_pos])
        assert not torch.equal(hooked, ablator.clean(batch).readout)  # the ablation did something


# --- layer reuse -------------------------------------------------------------------------------


def test_restarting_at_a_cached_layer_equals_the_full_forward(any_model):
    ablator = Ablator(any_model)
    for batch in small_corpus(any_model).batches:
        clean = ablator.clean(batch, keep_resid=True)
        assert reuse_error(ablator, batch, clean) == 0.0
        for layer in range(1, N_LAYERS):
            edit = [Edit(layer, 1, torch.zeros(()))]
            full = ablator.run(batch, edit)
            reused = ablator.run(batch, edit, start_layer=layer, resid=clean.resid_pre[layer])
            assert torch.equal(full, reused)


def test_restarting_skips_the_blocks_below(llama):
    ablator = Ablator(llama)
    batch = small_corpus(llama).batches[0]
    clean = ablator.clean(batch, keep_resid=True)
    assert ablator.check_reuse(
        batch, clean
    )  # else the first restart also runs in full, to check itself
    calls: list[int] = []
    handles = [
        block.original_component.register_forward_pre_hook(lambda m, a, i=i: calls.append(i))
        for i, block in enumerate(llama.bridge.blocks)
    ]
    try:
        ablator.run(batch, [], start_layer=2, resid=clean.resid_pre[2])
    finally:
        for h in handles:
            h.remove()
    assert calls == [2]
    assert "forward" not in llama.bridge.blocks[0].__dict__  # restored


def test_replicas_ablate_their_own_head(llama):
    ablator = Ablator(llama)
    batch = small_corpus(llama).batches[0]
    clean = ablator.clean(batch, keep_resid=True)
    stacked = ablator.run(
        batch,
        [Edit(1, h, torch.zeros(()), replica=h) for h in range(3)],
        replicas=3,
        start_layer=1,
        resid=clean.resid_pre[1],
    )
    for h in range(3):
        alone = ablator.run(batch, [Edit(1, h, torch.zeros(()))])
        torch.testing.assert_close(stacked[h], alone, atol=1e-5, rtol=1e-5)


def test_an_edit_below_the_start_layer_is_refused(llama):
    ablator = Ablator(llama)
    batch = small_corpus(llama).batches[0]
    with pytest.raises(ValueError):
        ablator.run(batch, [Edit(0, 0, torch.zeros(()))], start_layer=1, resid=torch.zeros(1))


# --- ablation values ---------------------------------------------------------------------------


def test_replacement_shapes(llama):
    ablator = Ablator(llama)
    batch = small_corpus(llama).batches[0]
    clean = ablator.clean(batch, keep_z=True)
    assert clean.z[0].shape == (*batch.tokens.shape, N_HEADS, D_HEAD)  # query heads, not KV heads
    means = torch.randn(N_LAYERS, N_HEADS, D_HEAD)
    assert replacement("zero", 1, 2, batch, clean.z, means).shape == ()
    assert replacement("mean", 1, 2, batch, clean.z, means).shape == (D_HEAD,)
    resampled = replacement("resample", 1, 2, batch, clean.z, means)
    assert resampled.shape == (*batch.tokens.shape, D_HEAD)
    donor = batch.donor[0]
    width = int(batch.valid[donor].sum())
    assert torch.equal(resampled[0, :width], clean.z[1][donor, :width, 2])
    with pytest.raises(ValueError):
        replacement("shuffle", 1, 2, batch, clean.z, means)


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_sink_ablation_equals_attention_moved_onto_the_first_position(name, llama, gpt2):
    """The sink kind: the head's output as if all its attention sat on position 0 (GQA included)."""
    model = {"llama": llama, "gpt2": gpt2}[name]
    ablator = Ablator(model)
    layer, head = 1, 2

    def onto_first(pattern, _layer):
        pattern = pattern.clone()
        pattern[:, head] = 0.0
        pattern[:, head, :, 0] = 1.0
        return pattern

    for batch in small_corpus(model).batches[:3]:
        clean = ablator.clean(batch, keep_sink=True)
        assert clean.sink_v[layer].shape == (batch.tokens.shape[0], N_HEADS, D_HEAD)
        value = replacement("sink", layer, head, batch, None, None, clean.sink_v)
        ablated = ablator.run(batch, [Edit(layer, head, value)])
        forced = ablator._forward(batch, [lens.Tap("pattern", onto_first, layer)], replicas=1)
        torch.testing.assert_close(ablated, forced, atol=1e-5, rtol=1e-5)
        assert not torch.allclose(ablated, clean.readout, atol=1e-4)
    with pytest.raises(ValueError, match="value vectors"):
        replacement("sink", layer, head, batch, None, None)


def test_sink_values_of_an_encoder_are_each_sequences_cls_value(bert):
    """BERT's bridged attention ignores pattern edits, so check the value itself: [CLS]'s input
    through W_V (every sequence has its own [CLS] value)."""
    ablator = Ablator(bert)
    layer, head = 1, 2
    batch = small_corpus(bert).batches[0]
    clean = ablator.clean(batch, keep_resid=True, keep_sink=True)
    cls = clean.resid_pre[layer][:, 0]  # BERT's attention reads the residual before its LayerNorm
    with torch.inference_mode():
        expected = cls @ bert.bridge.W_V[layer, head] + bert.bridge.b_V[layer, head]
    torch.testing.assert_close(clean.sink_v[layer][:, head], expected, atol=1e-5, rtol=1e-5)


def test_derangement_stays_within_group_and_never_self():
    group = torch.tensor([False, False, False, True, True])
    donor = derangement(group)
    assert (donor != torch.arange(5)).all()
    assert torch.equal(group[donor], group)


def test_mean_and_resample_are_noops_for_a_constant_head(gpt2):
    """A head whose value vectors are a constant bias outputs that constant at every position."""
    from interp.ablate.values import MeanAccumulator

    layer, head = 1, 3
    attn = gpt2.bridge.original_model.transformer.h[layer].attn.c_attn
    v = slice(2 * D_MODEL + head * D_HEAD, 2 * D_MODEL + (head + 1) * D_HEAD)
    saved_w, saved_b = attn.weight.data[:, v].clone(), attn.bias.data[v].clone()
    try:
        attn.weight.data[:, v] = 0
        attn.bias.data[v] = torch.linspace(-1, 1, D_HEAD)
        ablator = Ablator(gpt2)
        corpus = small_corpus(gpt2)
        acc = MeanAccumulator()
        cleans = [ablator.clean(b, keep_z=True) for b in corpus.batches]
        for b, c in zip(corpus.batches, cleans):
            acc.add(c.z, b.valid)
        means = acc.means()
        for batch, clean in zip(corpus.batches, cleans):
            for kind in ("mean", "resample"):
                value = replacement(kind, layer, head, batch, clean.z, means)
                out = ablator.run(batch, [Edit(layer, head, value)])
                torch.testing.assert_close(out, clean.readout, atol=1e-5, rtol=1e-5)
            zeroed = ablator.run(batch, [Edit(layer, head, torch.zeros(()))])
            assert not torch.allclose(zeroed, clean.readout, atol=1e-4)
    finally:
        attn.weight.data[:, v], attn.bias.data[v] = saved_w, saved_b


# --- corpus ------------------------------------------------------------------------------------


def test_causal_corpus_scores_the_right_positions(llama):
    corpus = small_corpus(llama)
    assert set(corpus.sizes) == {"loss_prose", LOSS_REPEATED, SV_LOGIT_DIFF}
    tok = llama.tokenizer
    for batch in corpus.batches:
        if (
            batch.eval_set == LOSS_REPEATED
        ):  # [BOS] r r with |r| = 6: predictions from position 7 on
            assert sorted(set(batch.row_pos.tolist())) == list(range(7, 12))
            assert torch.equal(batch.row_target, batch.tokens[batch.row_batch, batch.row_pos + 1])
        if batch.eval_set == SV_LOGIT_DIFF:
            assert torch.equal(
                batch.row_pos, batch.valid.sum(1)[batch.row_batch] - 1
            )  # last prefix token
            assert (batch.row_target != batch.row_wrong).all()
            words = tok.convert_ids_to_tokens(batch.row_target.tolist() + batch.row_wrong.tolist())
            assert {"is", "are", "was", "were", "has", "have"} & set(words)


def test_tight_buckets_bound_padding():
    lengths = [3, 3, 4, 8, 9, 20, 21, 21]
    groups = bucket_tight(lengths, max_tokens=1000, max_padding=0.15)
    assert sorted(i for g in groups for i in g) == list(range(8))
    for g in groups:
        width = max(lengths[i] for i in g)
        assert 1 - sum(lengths[i] for i in g) / (width * len(g)) <= 0.15


def test_encoder_corpus_pairs_sentences_with_shorter_views(bert):
    corpus = small_corpus(bert)
    assert set(corpus.sizes) == {"encoder"}
    for batch in corpus.batches:
        sent, view = batch.index[~batch.is_view], batch.index[batch.is_view]
        assert torch.equal(sent, view)
        assert (batch.valid[batch.is_view].sum(1) < batch.valid[~batch.is_view].sum(1)).all()


def test_behaviour_metrics_read_the_intact_distribution(llama):
    """kl_prose is 0 for the intact pass and sum p (log p - log q) per row otherwise; sv_prob is
    the sigmoid of each sentence's logit difference."""
    ablator = Ablator(llama)
    corpus = small_corpus(llama)
    prose = next(b for b in corpus.batches if b.eval_set == "loss_prose")
    clean = ablator.clean(prose).readout
    intact = batch_metrics(clean, prose)
    assert (intact["kl_prose"].num == 0).all()
    assert torch.equal(intact["kl_prose"].den, intact["loss_prose"].den)
    other = ablator.run(
        prose, [Edit(0, 1, torch.zeros_like(ablator.clean(prose, keep_z=True).z[0][:, :, 1]))]
    )
    per_row = torch.nn.functional.kl_div(
        other.log_softmax(-1), clean.log_softmax(-1), log_target=True, reduction="none"
    ).sum(-1)
    expected = torch.zeros(len(prose)).index_add(0, prose.row_batch, per_row)
    got = batch_metrics(other, prose, clean)["kl_prose"].num
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-6)
    assert (got > 0).all()
    sv = next(b for b in corpus.batches if b.eval_set == SV_LOGIT_DIFF)
    per = batch_metrics(ablator.clean(sv).readout, sv)
    assert torch.equal(per["sv_prob"].den, per[SV_LOGIT_DIFF].den)
    torch.testing.assert_close(per["sv_prob"].num, torch.sigmoid(per[SV_LOGIT_DIFF].num))


def test_kl_of_an_unchanged_distribution_is_never_below_zero(llama):
    """Logits shifted by a constant are the same distribution: float32 rounds each row's KL to
    about +-3e-7, and no row may count below zero."""
    prose = next(b for b in small_corpus(llama).batches if b.eval_set == "loss_prose")
    rows = torch.randn(len(prose.row_batch), 5000, generator=torch.Generator().manual_seed(0)) * 3
    got = kl_metric(rows + 5.0, prose, rows).num
    assert (got >= 0).all() and got.max() < 1e-5


def test_encoder_metrics_at_the_intact_model(bert):
    ablator = Ablator(bert)
    batch = small_corpus(bert).batches[0]
    per = batch_metrics(ablator.clean(batch).readout, batch)
    assert set(per) == {"embedding_cosine", "retrieval_margin"}
    assert (per["embedding_cosine"].num == 0).all()


# --- attribution -------------------------------------------------------------------------------


def test_attribution_is_the_first_order_term_of_the_exact_effect():
    """Shrinking the ablation to z + eps (z' - z), the exact change over eps tends to the estimate.

    In float64 (a float32 finite difference drowns in rounding; eager attention still takes its
    softmax in float32, hence eps = 1e-3, not smaller)."""
    model = tiny_llama(seed=1)
    model.bridge.to(torch.float64)
    ablator = Ablator(model)
    corpus = small_corpus(model)
    result = attribute(ablator, corpus, ("zero", "mean", "resample", "sink"), progress=False)
    eps = 1e-3
    for kind in ("zero", "mean", "resample", "sink"):
        for layer, head in ((0, 1), (2, 3)):
            estimate, exact = 0.0, 0.0
            for batch in corpus.batches:
                clean = ablator.clean(batch, keep_z=True, keep_sink=True)
                z = clean.z[layer][:, :, head]
                target = replacement(kind, layer, head, batch, clean.z, result.means, clean.sink_v)
                nudged = ablator.run(batch, [Edit(layer, head, z + eps * (target - z))])
                before = batch_metrics(clean.readout, batch)
                after = batch_metrics(nudged, batch, clean.readout)
                exact += (
                    sum(
                        float(after[m].num.sum() - before[m].num.sum())
                        for m in after
                        if m in result.store  # the metrics with a gradient
                    )
                    / eps
                )
            for _metric, sums in result.store.items():
                estimate += float((sums.ablated[(kind, layer, head)] - sums.base).sum())
            assert estimate == pytest.approx(exact, rel=1e-2, abs=1e-5)


def test_attribution_ranks_heads_like_exact_ablation(llama):
    from scipy.stats import spearmanr

    from interp.ablate.stats import SumStore
    from interp.ablate.sweep import exact_sweep

    ablator = Ablator(llama)
    corpus = small_corpus(llama)
    result = attribute(ablator, corpus, ("zero",), progress=False)
    store = SumStore(metric_sizes(corpus.sizes))
    heads = [(layer, head) for layer in range(N_LAYERS) for head in range(N_HEADS)]
    exact_sweep(ablator, corpus, store, heads, ("zero",), None, progress=False)
    for metric in result.store:  # the metrics with a gradient
        est = [
            float((result.store[metric].ablated[("zero", *h)] - result.store[metric].base).sum())
            for h in heads
        ]
        ex = [
            float((store[metric].ablated[("zero", *h)] - store[metric].base).sum()) for h in heads
        ]
        assert spearmanr(est, ex).statistic > 0.7

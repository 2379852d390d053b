"""AtP*'s QK fix and GradDrop against the model itself, on tiny models built in the test."""

from __future__ import annotations

import pytest
import torch

from interp.ablate import atp_star, graddrop, qk_check, qk_fix
from interp.ablate.estimate import head_means
from interp.ablate.evaluation import build_corpus
from interp.ablate.forward import Ablator
from interp.ablate.metrics import batch_metrics
from interp.ablate.values import replacement
from interp.model import lens

pytestmark = pytest.mark.usefixtures("one_thread")


def corpus_of(model):
    return build_corpus(
        model, n_prose=3, n_repeated=2, repeated_lengths=(6,), n_syntax=4, seed=0, max_tokens=512
    )


def changes(model, batch, passed, means, kind="mean"):
    mask = batch.valid[:, :, None, None].float()
    out = []
    clean = [z.detach().float() for z in passed.z]
    for layer, z in enumerate(clean):
        heads = [
            replacement(kind, layer, h, batch, clean, means)
            .float()
            .expand(*z.shape[:2], z.shape[3])
            for h in range(z.shape[2])
        ]
        out.append((torch.stack(heads, dim=2) - z) * mask)
    return out


def qk_model_of(model, batch, passed):
    layers = [atp_star._layer_inputs(passed, layer) for layer in range(model.n_layers)]
    found = qk_check.check(layers, True, lens.qk_weights(model.bridge), batch.valid, model.causal)
    assert not isinstance(found, str), found
    return found, layers


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_the_recomputed_attention_is_the_models_own_on_the_changed_residual(name, request):
    """Each earlier head's ablation written into the residual entering a later layer: the
    layer's attention recomputed by the QK fix (norm, projections, rotary, grouped keys,
    softmax) equals what the model computes from that residual."""
    model = request.getfixturevalue(name)
    ablator = Ablator(model)
    corpus = corpus_of(model)
    means = head_means(ablator, corpus)
    batch = max(corpus.batches, key=lambda b: b.tokens.numel())
    passed = ablator.run_for_estimates(batch, attention=True)
    qk, layers = qk_model_of(model, batch, passed)
    dz = changes(model, batch, passed, means)
    up = qk_fix.upstream(dz, qk, layers)
    live = qk_check.live_keys(batch.valid, model.causal)
    W_O = lens.output_weights(model.bridge)
    for layer in range(1, model.n_layers):
        n_up = layer * model.n_heads
        ups = torch.arange(n_up).repeat_interleave(model.n_heads)
        heads = torch.arange(model.n_heads).repeat(n_up)
        changed = qk_fix.changed_attention(qk, layer, layers[layer], up, ups, heads, live)
        found = changed.pattern.unflatten(1, (n_up, model.n_heads))
        for u in (0, n_up - 1):
            source, head = divmod(u, model.n_heads)
            written = torch.einsum("btd,dD->btD", dz[source][:, :, head], W_O[source, head])
            seen = []
            lens.run(
                model,
                layers[layer].resid + written,
                batch.attention_mask,
                [lens.Tap("pattern", lambda p, _: seen.append(p.detach()), layer)],
                lens.FinalHidden() if not model.causal else ablator._readout(batch, 1),
                start_layer=layer,
            )
            ours = found[:, u] * batch.valid[:, None, :, None]
            theirs = seen[0] * batch.valid[:, None, :, None]
            assert torch.allclose(ours, theirs, atol=2e-5), (layer, u)


def test_an_encoder_that_does_not_compute_with_its_pattern_gets_no_qk_fix(bert):
    ablator = Ablator(bert)
    batch = corpus_of(bert).batches[0]
    passed = ablator.run_for_estimates(batch, attention=True)
    metric = batch_metrics(passed.readout, batch)["retrieval_margin"].num.sum()
    grads = torch.autograd.grad(metric, passed.pattern, allow_unused=True)
    assert all(g is None for g in grads)
    layers = [atp_star._layer_inputs(passed, layer) for layer in range(bert.n_layers)]
    found = qk_check.check(layers, False, lens.qk_weights(bert.bridge), batch.valid, False)
    assert found == "the model does not compute with the attention pattern it exposes"


@pytest.mark.parametrize("kind", ["half", "interleaved"])
def test_a_rotation_and_its_transpose_give_the_vector_back(kind):
    x = torch.randn(2, 5, 3, 8)
    angle = (
        torch.rand(1, 5, 4).repeat_interleave(2, -1)
        if kind == "interleaved"
        else torch.rand(1, 5, 4).repeat(1, 1, 2)
    )
    cos, sin = angle.cos(), angle.sin()
    turned = qk_check.rotate(x, cos, sin, kind)
    assert torch.allclose(turned.norm(dim=-1), x.norm(dim=-1), atol=1e-5)
    assert torch.allclose(qk_check.rotate(turned, cos, -sin, kind), x, atol=1e-5)


def test_graddrop_is_the_gradient_with_one_blocks_writes_frozen(llama):
    """Dropping block l: the estimate of a head below l equals the one taken with block l's
    output detached from its input (so no gradient passes through the block, only around it)."""
    ablator = Ablator(llama)
    corpus = corpus_of(llama)
    means = head_means(ablator, corpus)
    batch = corpus.batches[0]
    passed = ablator.run_for_estimates(batch, residual=True)
    metric = batch_metrics(passed.readout, batch)[batch.eval_set].num.sum()
    grads = torch.autograd.grad(metric, passed.z + passed.resid, retain_graph=True)
    n = llama.n_layers
    dz = {"mean": changes(llama, batch, passed, means)}
    linear = {"mean": torch.stack([(g * d).sum((1, 3)) for g, d in zip(grads[:n], dz["mean"])])}
    dropped = graddrop.dropped_estimates(passed, list(grads[n:]), list(grads[:n]), dz, linear)
    for block in range(1, n):
        entering = {}

        def keep(x, layer):
            entering[layer] = x

        def freeze(x, layer):
            return entering[layer] + (x - entering[layer]).detach()

        taps = [lens.Tap("resid_pre", keep, block), lens.Tap("out", freeze, block)]
        frozen_z = []

        def grab(z, layer):
            z = z.clone()
            frozen_z.append(z)
            return z

        with torch.enable_grad():
            readout = ablator._forward(
                batch,
                taps
                + [
                    lens.Tap("resid_pre", lambda x, l: x.detach().requires_grad_(True), 0),
                    lens.Tap("z", grab),
                ],
                1,
            )
        m = batch_metrics(readout, batch)[batch.eval_set].num.sum()
        g = torch.autograd.grad(m, frozen_z[:block])
        for layer in range(block):
            want = (g[layer] * dz["mean"][layer]).sum((1, 3))
            assert torch.allclose(dropped["mean"][block, layer], want, atol=1e-5, rtol=1e-4)


def test_graddrop_scores_average_the_other_blocks():
    sums = torch.tensor([[[2.0], [1.0]], [[-4.0], [3.0]]])  # [drop, layer, head]
    score = graddrop.scores(sums, den=2.0)
    # layer 0: only block 1 counts (its own block 0 does not): |-4| / 2
    # layer 1: block 0 counts (it leaves layer 1 unchanged): |1| / 2
    assert score.tolist() == [[2.0], [0.5]]


def test_the_hutchinson_functional_estimates_the_second_order_kl():
    """``E[(dF)^2] / 2`` over the draws equals ``sum Var_p(dlogits) / 2``, the KL to second order."""
    torch.manual_seed(0)
    logits = torch.randn(3, 5, requires_grad=True)
    direction = torch.randn(3, 5)
    p = torch.softmax(logits.detach(), -1)
    centred = direction - (p * direction).sum(-1, keepdim=True)
    want = float((p * centred**2).sum() / 2)
    gen = torch.Generator().manual_seed(1)
    draws = []
    for _ in range(4000):
        logp = torch.log_softmax(logits, -1)
        y = torch.multinomial(p, 1, generator=gen)[:, 0]
        sign = torch.randint(0, 2, (3,), generator=gen) * 2 - 1
        F = (sign * logp.gather(1, y[:, None])[:, 0]).sum()
        (g,) = torch.autograd.grad(F, logits)
        draws.append(float((g * direction).sum()) ** 2 / 2)
    assert sum(draws) / len(draws) == pytest.approx(want, rel=0.08)


def test_atp_star_sees_the_previous_token_head_of_a_planted_circuit():
    """The previous-token head acts only through the induction heads' attention (their keys):
    AtP* ranks it in its top 5 and finds both of the exact top 2 on repeated tokens."""
    from interp.ablate import atp_star
    from interp.ablate.attribution import attribute
    from interp.ablate.config import AblateConfig
    from interp.ablate.evaluation import build_corpus
    from interp.ablate.forward import Ablator
    from interp.ablate.metrics import metric_sizes
    from interp.ablate.stats import SumStore, effects_from_sums
    from interp.ablate.sweep import exact_sweep
    from interp.synthetic.planted import Planted, planted_model

    copy = Planted("induction", "copy")
    model = planted_model({(1, 0): copy, (1, 1): copy, (0, 1): "previous_token"})
    cfg = AblateConfig()
    corpus = build_corpus(model, 0, cfg.n_repeated, cfg.repeated_lengths, 0, cfg.seed, 512)
    ablator = Ablator(model)
    means = attribute(ablator, corpus, ("mean",), progress=False).means
    every = dict(corpus.sizes)
    star = atp_star.estimate(
        ablator, corpus, ("mean",), means, atp_star.Tiers(every, every), 0, False
    )
    exact = SumStore(metric_sizes(corpus.sizes))
    heads = [(layer, head) for layer in range(model.n_layers) for head in range(model.n_heads)]
    exact_sweep(ablator, corpus, exact, heads, ("mean",), means, None, progress=False)

    def ranked(store):
        frame = effects_from_sums(store, "x", 10, 0)
        frame = frame[frame["metric"] == "loss_repeated"]
        order = frame.assign(size=frame["delta"].abs()).sort_values("size", ascending=False)
        return {(l, h): d for l, h, d in zip(order["layer"], order["head"], order["delta"])}

    estimated, measured = ranked(star.store), ranked(exact)
    assert (0, 1) in list(estimated)[:5]
    top = list(measured)[:2]  # the induction heads
    assert set(top) <= set(list(estimated)[:4])

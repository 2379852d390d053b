"""The TransformerLens behaviours interp relies on (interp.model.lens), one test each, on tiny models:
a grouped-query Llama, GPT-2, BERT and a TransformerLens-native model (blocks return 1-tuples)."""

from __future__ import annotations

import warnings
import weakref

import pytest
import torch
from tiny_models import D_HEAD, N_HEADS, N_LAYERS, tiny_native

from interp.errors import ModelError
from interp.model import lens

pytestmark = pytest.mark.usefixtures("one_thread")
BATCH, POS = 2, 7


@pytest.fixture(scope="module")
def native():
    return tiny_native()


@pytest.fixture(params=["llama", "gpt2", "bert", "native"])
def model(request):
    return request.getfixturevalue(request.param)


def inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ordinary tokens ``[batch, pos]``; the second sequence is right-padded by two."""
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(5, 200, (BATCH, POS), generator=gen)
    mask = torch.ones_like(tokens)
    mask[1, -2:] = 0
    return tokens, mask


def readout_for(model) -> lens.Readout:
    if not model.causal:
        return lens.FinalHidden()
    return lens.Rows(torch.tensor([0, 0, 1, 1]), torch.tensor([0, 6, 1, 4]))


def calls_per_block(model) -> tuple[list[int], list]:
    """Which blocks' wrapped layers run (forward pre-hooks), and the handles to remove."""
    calls: list[int] = []
    handles = [
        block.original_component.register_forward_pre_hook(lambda m, a, i=i: calls.append(i))
        for i, block in enumerate(model.bridge.blocks)
    ]
    return calls, handles


# --- facts and version ---------------------------------------------------------------------------


def test_facts_of_each_kind_of_bridge(llama, gpt2, bert):
    f = lens.facts(llama.bridge)
    assert (f.n_layers, f.n_heads, f.n_kv_heads, f.d_head, f.causal, f.model_type) == (
        N_LAYERS,
        N_HEADS,
        2,
        D_HEAD,
        True,
        "llama",
    )
    assert f.d_vocab == f.d_vocab_out == len(llama.tokenizer) and f.n_ctx == 128
    assert (lens.facts(gpt2.bridge).n_kv_heads, lens.facts(gpt2.bridge).causal) == (N_HEADS, True)
    assert (lens.facts(bert.bridge).causal, lens.facts(bert.bridge).model_type) == (False, "bert")
    native = lens.facts(tiny_native(n_layers=1, d_vocab_out=50).bridge)
    assert (native.model_type, native.causal, native.n_kv_heads, native.d_vocab_out) == (
        "",
        True,
        2,
        50,
    )
    assert not lens.facts(tiny_native(n_layers=1, attention_dir="bidirectional").bridge).causal


def test_output_weights_are_each_query_heads_slice_of_the_output_projection(llama, gpt2, bert):
    hf = {
        "llama": lambda m, l: (
            m.model.layers[l].self_attn.o_proj.weight.T
        ),  # [head * d_head, d_model]
        "gpt2": lambda m, l: m.transformer.h[l].attn.c_proj.weight,  # Conv1D: already [in, out]
        "bert": lambda m, l: m.bert.encoder.layer[l].attention.output.dense.weight.T,
    }
    for name, model in (("llama", llama), ("gpt2", gpt2), ("bert", bert)):
        w_o = lens.output_weights(model.bridge)
        assert w_o.shape == (N_LAYERS, N_HEADS, D_HEAD, N_HEADS * D_HEAD) and not w_o.requires_grad
        for layer in range(N_LAYERS):
            expected = (
                hf[name](model.bridge.original_model, layer)
                .detach()
                .unflatten(0, (N_HEADS, D_HEAD))
            )
            torch.testing.assert_close(w_o[layer], expected.float(), msg=f"{name} layer {layer}")


def test_version_check():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lens.check_version("4.3.0")
        lens.check_version("4.3.7")
    with pytest.warns(UserWarning, match="TransformerLens 4.5.1 has not been verified"):
        lens.check_version("4.5.1")
    for other in ("5.0.0", "3.1.0"):
        with pytest.raises(
            ModelError, match=f"TransformerLens {other} is installed; interp needs 4.x"
        ):
            lens.check_version(other)


# --- streaming patterns --------------------------------------------------------------------------


def test_patterns_arrive_once_per_layer_in_order_as_batch_head_q_k(model):
    tokens, mask = inputs()
    seen: list[tuple[int, tuple[int, ...]]] = []
    patterns: dict[int, torch.Tensor] = {}

    def keep(layer: int, pattern: torch.Tensor) -> None:
        seen.append((layer, tuple(pattern.shape)))
        patterns[layer] = pattern.clone()

    lens.run_patterns(model, tokens, mask, keep)
    assert seen == [(layer, (BATCH, N_HEADS, POS, POS)) for layer in range(N_LAYERS)]
    with torch.inference_mode():
        _, cache = model.bridge.run_with_cache(tokens, attention_mask=mask)
    for layer, pattern in patterns.items():
        torch.testing.assert_close(pattern, cache[lens.hook_name("pattern", layer)])
        torch.testing.assert_close(pattern.sum(-1), torch.ones(BATCH, N_HEADS, POS))
        assert (pattern[1, :, :, -2:] == 0).all()  # padded keys get nothing
        if model.causal:
            assert (pattern.triu(1) == 0).all()


def unembed_widths(model) -> tuple[list[tuple[int, ...]], object]:
    """The shapes the wrapped unembedding (lm head) is called on, and the handle to remove."""
    widths: list[tuple[int, ...]] = []
    handle = model.bridge.unembed.original_component.register_forward_pre_hook(
        lambda m, a: widths.append(tuple(a[0].shape))
    )
    return widths, handle


def test_the_pattern_pass_computes_no_logits(model):
    tokens, mask = inputs()
    widths, handle = unembed_widths(model)
    try:
        lens.run_patterns(model, tokens, mask, lambda layer, pattern: None)
    finally:
        handle.remove()
    assert widths == [(BATCH, 0, N_HEADS * D_HEAD)]  # the unembedding gets zero rows
    with torch.inference_mode():  # the hook points are clean again: a plain pass has all its logits
        assert model.bridge(tokens, attention_mask=mask).shape[:2] == (BATCH, POS)


# --- sites ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["llama", "native"])
def test_z_has_a_slice_per_query_head_v_per_key_value_head(name, request):
    model = request.getfixturevalue(name)
    tokens, mask = inputs()
    shapes: dict[str, set[tuple[int, ...]]] = {}

    def record(site: str):
        def fn(x: torch.Tensor, layer: int) -> None:
            shapes.setdefault(site, set()).add(tuple(x.shape))

        return fn

    taps = [lens.Tap(site, record(site)) for site in ("z", "v", "resid_pre")]
    with torch.inference_mode():
        lens.run(model, tokens, mask, taps, readout_for(model))
    assert shapes == {
        "z": {(BATCH, POS, N_HEADS, D_HEAD)},
        "v": {(BATCH, POS, 2, D_HEAD)},
        "resid_pre": {(BATCH, POS, N_HEADS * D_HEAD)},
    }


def test_a_tensor_returned_at_z_is_what_the_model_computes_with(model):
    tokens, mask = inputs()
    readout = readout_for(model)

    def silence(head: int):
        def fn(z: torch.Tensor, layer: int) -> torch.Tensor:
            z = z.clone()
            z[:, :, head] = 0
            return z

        return fn

    with torch.inference_mode():
        clean = lens.run(model, tokens, mask, [], readout)
        same = lens.run(
            model, tokens, mask, [lens.Tap("z", lambda z, layer: z.clone(), layer=1)], readout
        )
        edited = lens.run(model, tokens, mask, [lens.Tap("z", silence(2), layer=1)], readout)
        stacked = lens.run(
            model,
            tokens,
            mask,
            [lens.Tap("z", silence(2), layer=1), lens.Tap("z", silence(3), layer=2)],
            readout,
        )
    assert torch.equal(same, clean)
    assert not torch.allclose(edited, clean) and not torch.allclose(stacked, edited)
    with pytest.raises(ValueError, match="unknown site"):
        lens.Tap("hook_z", silence(0))


# --- readouts -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["llama", "gpt2", "native"])
def test_rows_readout_unembeds_the_chosen_rows_only(name, request):
    model = request.getfixturevalue(name)
    tokens, mask = inputs()
    rows = lens.Rows(torch.tensor([0, 1, 1]), torch.tensor([2, 0, 4]))
    widths, handle = unembed_widths(model)
    try:
        with torch.inference_mode():
            out = lens.run(model, tokens, mask, [], rows)
    finally:
        handle.remove()
    with torch.inference_mode():
        full = model.bridge(tokens, attention_mask=mask)
    assert widths == [(1, 3, N_HEADS * D_HEAD)]
    torch.testing.assert_close(out, full[rows.batch, rows.pos])


def test_final_hidden_readout_is_the_last_blocks_output_and_no_logits(bert, llama):
    tokens, mask = inputs()
    for model in (bert, llama):
        widths, handle = unembed_widths(model)
        try:
            with torch.inference_mode():
                out = lens.run(model, tokens, mask, [], lens.FinalHidden())
        finally:
            handle.remove()
        name = f"blocks.{N_LAYERS - 1}.hook_out"
        with torch.inference_mode():
            _, cache = model.bridge.run_with_cache(
                tokens, attention_mask=mask, names_filter=lambda n: n == name
            )
        assert widths == [(BATCH, 0, N_HEADS * D_HEAD)] and torch.equal(out, cache[name])


# --- restarting at a layer ------------------------------------------------------------------------


def test_a_restart_takes_the_cached_residual_and_skips_the_blocks_below(model):
    tokens, mask = inputs()
    readout = readout_for(model)
    resid: dict[int, torch.Tensor] = {}
    with torch.inference_mode():
        full = lens.run(
            model,
            tokens,
            mask,
            [lens.Tap("resid_pre", lambda x, layer: resid.setdefault(layer, x.clone()))],
            readout,
        )
        lens.run(
            model, resid[1], mask, [], readout, start_layer=1
        )  # learns what a block returns, if not yet
    for layer in range(1, N_LAYERS):
        calls, handles = calls_per_block(model)
        try:
            with torch.inference_mode():
                out = lens.run(model, resid[layer], mask, [], readout, start_layer=layer)
        finally:
            for h in handles:
                h.remove()
        assert calls == list(range(layer, N_LAYERS))
        assert torch.equal(out, full)
    assert all("forward" not in block.__dict__ for block in model.bridge.blocks)  # restored


def test_what_a_block_returns_is_learnt_once_from_block_0():
    model = tiny_native(n_layers=2)  # a fresh bridge: nothing learnt yet
    tokens, mask = inputs()
    resid: dict[int, torch.Tensor] = {}
    with torch.inference_mode():
        full = lens.run(
            model,
            tokens,
            mask,
            [lens.Tap("resid_pre", lambda x, layer: resid.setdefault(layer, x.clone()))],
            lens.FinalHidden(),
        )
    for expected in ([0, 1], [1]):
        calls, handles = calls_per_block(model)
        try:
            with torch.inference_mode():
                out = lens.run(model, resid[1], mask, [], lens.FinalHidden(), start_layer=1)
        finally:
            for h in handles:
                h.remove()
        assert calls == expected and torch.equal(out, full)


def test_only_a_tensor_or_a_1_tuple_can_be_handed_on():
    h = torch.ones(2)
    assert lens._container(torch.zeros(2))(h) is h
    assert lens._container((torch.zeros(2),))(h) == (h,)
    for other in ((torch.zeros(2), torch.zeros(2)), {"hidden_states": h}):
        with pytest.raises(NotImplementedError, match="skipping blocks only knows"):
            lens._container(other)


def test_the_restart_check_reports_a_difference_or_a_failure():
    reference = torch.tensor([[1.0, -4.0]])
    assert lens.check_restart(lambda layer: reference.clone(), reference, [1, 2]).exact
    off = lens.check_restart(lambda layer: reference + 0.5 * layer, reference, [1, 2])
    assert (off.error, off.scale, off.exact) == (1.0, 4.0, False)
    assert off.problem() == "changes the output by 1"

    def crash(layer: int) -> torch.Tensor:
        raise ValueError("too many values to unpack (expected 1)\nmore")

    failed = lens.check_restart(crash, reference, [1])
    assert (
        not failed.exact and failed.failure == "ValueError: too many values to unpack (expected 1)"
    )
    assert failed.problem() == "fails here (ValueError: too many values to unpack (expected 1))"
    assert lens.check_restart(
        crash, reference, lens.probe_layers(1)
    ).exact  # one layer: nothing to restart
    assert [lens.probe_layers(n) for n in (1, 2, 3, 30)] == [[], [1], [1, 2], [1, 15, 29]]


@pytest.mark.parametrize(
    "name, container, warning",
    [
        (
            "bert",
            lambda output: lambda h: h + 1.0,
            "changes the output by",
        ),  # hands on the wrong residual
        (
            "llama",
            lambda output: lens._container(()),
            "fails here",
        ),  # as for a block returning another container
    ],
)
def test_a_wrong_or_failing_shortcut_is_caught_and_every_pass_runs_in_full(
    name, container, warning, request, monkeypatch
):
    from interp.ablate.evaluation import build_corpus
    from interp.ablate.forward import Ablator, Edit

    model = request.getfixturevalue(name)
    monkeypatch.setattr(lens, "_BLOCK_OUTPUT", weakref.WeakKeyDictionary())
    monkeypatch.setattr(lens, "_container", container)
    batch = build_corpus(
        model, n_prose=4, n_repeated=0, repeated_lengths=(6,), n_syntax=0, seed=0, max_tokens=512
    ).batches[0]
    edit = [Edit(2, 1, torch.zeros(()))]
    ablator = Ablator(model)
    clean = ablator.clean(batch, keep_resid=True)
    with pytest.warns(UserWarning, match=warning):
        out = ablator.run(
            batch, edit, start_layer=2, resid=clean.resid_pre[2]
        )  # the first restart checks itself
    assert ablator.reuse is False
    assert torch.equal(out, ablator.run(batch, edit))
    assert torch.equal(ablator.run(batch, edit, start_layer=2, resid=clean.resid_pre[2]), out)

"""The weights stage on models: norms folded as the model computes, grouped-query heads read with
their key-value head, planted heads scored exactly, and bad input NaN with a reason."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_models import tiny_bert, tiny_llama, tiny_native

from interp.pipeline import rundir
from interp.synthetic.planted import Planted, build_tokenizer, planted_model
from interp.weights.config import WeightsConfig
from interp.weights.read import normalise, read_heads, read_vocabulary
from interp.weights.stage import NO_ORDINALS, SCORES, partners, weights

SMALL = WeightsConfig(n_tokens=256, n_null=10, n_bootstrap=10, n_prose=4, n_repeated=4)
OV_SCORES = ("copying", "copy_rate", "suppression_rate", "successor")


@pytest.fixture(autouse=True)
def one_thread(one_thread):
    yield


def values(result, score):
    table = result.weights[result.weights["score"] == score]
    return table.set_index(["layer", "head"])["value"]


@pytest.mark.parametrize("build", [tiny_llama, tiny_native], ids=["rms", "layer_norm"])
def test_folded_weights_read_the_residual_as_the_norm_does(build):
    model = build()
    heads, vocab = read_heads(model), read_vocabulary(model)
    raw_v, raw_q = model.bridge.W_V.detach(), model.bridge.W_Q.detach()
    x = torch.randn(2, 5, raw_v.shape[2]) * 3 + 1  # off-centre, not of unit norm
    with torch.no_grad():
        for layer, block in enumerate(model.bridge.blocks):
            normed = block.ln1(x)
            seen = normalise(x, heads.centres)
            # differences cancel the norm's bias, which adds the same vector to every input
            diff, seen_diff = normed[0] - normed[1], seen[0] - seen[1]
            torch.testing.assert_close(
                seen_diff @ heads.w_v[layer, 1], diff @ raw_v[layer, 1], atol=1e-4, rtol=1e-4
            )
            torch.testing.assert_close(
                seen_diff @ heads.w_q[layer, 3], diff @ raw_q[layer, 3], atol=1e-4, rtol=1e-4
            )
        final = model.bridge.ln_final(x)
        torch.testing.assert_close(
            (normalise(x, heads.centres)[0] - normalise(x, heads.centres)[1]) @ vocab.unembed,
            (final[0] - final[1]) @ model.bridge.W_U.detach(),
            atol=1e-4,
            rtol=1e-4,
        )
    assert "W_Q, W_K, W_V" in heads.folded and vocab.tied is False


def test_grouped_query_heads_read_their_own_key_value_head():
    model = tiny_llama()  # 4 query heads share 2 key-value heads
    heads = read_heads(model)
    attn = model.bridge.original_model.model.layers[1].self_attn
    scale = model.bridge.original_model.model.layers[1].input_layernorm.weight.detach()
    for head in range(4):
        kv = head // 2
        expected = scale[:, None] * attn.v_proj.weight.detach()[kv * 8 : (kv + 1) * 8].T
        torch.testing.assert_close(heads.per_query(heads.w_v)[1, head], expected)
        torch.testing.assert_close(
            heads.w_o[1, head], attn.o_proj.weight.detach()[:, head * 8 : (head + 1) * 8].T
        )


def test_a_head_whose_values_or_output_are_zero_writes_exactly_nothing():
    model = tiny_llama()
    layers = model.bridge.original_model.model.layers
    with torch.no_grad():
        layers[0].self_attn.o_proj.weight[:, 8:16] = 0.0  # query head 1's slice of o_proj
        layers[1].self_attn.v_proj.weight[8:16] = 0.0  # key-value head 1: query heads 2 and 3
    result = weights(model, SMALL, progress=False)
    size = values(result, "output_size")
    assert size[(0, 1)] == 0.0 and size[(1, 2)] == 0.0 and size[(1, 3)] == 0.0
    others = size.drop([(0, 1), (1, 2), (1, 3)])
    assert (others > 0).all()
    table = result.weights.set_index(["layer", "head", "score"])
    assert table.loc[(1, 2, "output_size"), "ci_high"] == 0.0  # every resample: nothing
    assert table.loc[(0, 1, "copying"), "value"] == 0.0  # and its OV circuit is zero
    # nor does it compose with anyone
    comp = result.composition
    assert (comp[(comp.writer_layer == 0) & (comp.writer_head == 1)]["value"] == 0).all()


WRITERS = {
    (0, 0): Planted("previous_token", "zero"),
    (1, 0): Planted("previous_token", "copy"),
    (1, 1): Planted("broad", "suppress", 2.0),
    (1, 2): Planted("previous_token", "successor"),
}  # (0, 1..3) and (1, 3) unplanned: they write nothing


@pytest.fixture(scope="module")
def planted():
    return weights(planted_model(WRITERS), SMALL, progress=False)


def test_planted_writers_score_exactly(planted):
    table = planted.weights.set_index(["layer", "head", "score"])["value"]

    def at(head, score):
        return table[(1, head, score)]

    assert at(0, "copying") == pytest.approx(1.0) and at(0, "copy_rate") == 1.0
    assert at(1, "copying") == pytest.approx(-1.0) and at(1, "suppression_rate") == 1.0
    assert at(2, "successor") == 1.0 and abs(at(2, "copying")) < 1e-6
    assert at(0, "successor") == 0.0 and at(1, "copy_rate") == 0.0
    silent = [(0, 0), (0, 1), (0, 2), (0, 3), (1, 3)]
    for layer, head in silent:
        for score in SCORES:
            assert table[(layer, head, score)] == 0.0, (layer, head, score)
    assert planted.unscored == {}
    assert set(planted.reading["ordinals"]) == {
        "numbers (lower)",
        "number_words (lower)",
        "days (lower)",
        "months (lower)",
    }


def test_each_score_stands_beside_its_null_and_interval(planted):
    table = planted.weights
    scored = table[table["score"] != "output_size"]
    assert (scored["null_low"] <= scored["baseline"]).all()
    assert (scored["baseline"] <= scored["null_high"]).all()
    copy = table[
        (table["layer"] == 1) & (table["head"] == 0) & (table["score"] == "copy_rate")
    ].iloc[0]
    assert copy.value > copy.null_high and copy.ci_low > copy.null_high  # above chance
    size = table[table["score"] == "output_size"]
    assert size["null_low"].isna().all()
    assert (size["baseline"] == size["value"].median()).all()
    bad = table[
        (table["ci_low"] > table["value"] + 1e-6) | (table["value"] > table["ci_high"] + 1e-6)
    ]
    assert bad.empty, bad


def test_the_planted_previous_token_head_comes_first_for_the_induction_heads_keys():
    result = weights(
        planted_model({(1, 2): "induction", (1, 0): "induction"}), SMALL, progress=False
    )
    for head in (0, 2):
        top = partners(result.composition, 1, head, "k", top=2)
        assert (top.loc[0, "writer_layer"], top.loc[0, "writer_head"]) == (
            0,
            0,
        )  # added by the plan
        assert top.loc[0, "value"] > top.loc[0, "null_high"] > top.loc[1, "value"]


def test_an_encoder_has_output_sizes_and_composition_but_no_ov_scores():
    result = weights(tiny_bert(), SMALL, progress=False)
    for score in OV_SCORES:
        assert values(result, score).isna().all()
        assert "encoder" in result.unscored[score]
    assert (values(result, "output_size") > 0).all()
    assert np.isfinite(result.composition["value"]).all()
    assert result.reading["folded"].startswith("nothing")


def test_a_bridge_without_an_unembedding_gets_what_it_can(monkeypatch):
    model = tiny_llama()

    def refuse(self):
        raise NotImplementedError("no W_U here")

    monkeypatch.setattr(type(model.bridge.unembed), "W_U", property(refuse))
    result = weights(model, SMALL, progress=False)
    assert set(result.unscored) == set(OV_SCORES)
    assert "unembedding" in result.unscored["copying"]
    assert values(result, "copying").isna().all()
    assert (result.weights[result.weights.score == "copying"]["n"] == 0).all()
    assert (values(result, "output_size") > 0).all()


def test_a_tiny_vocabulary_has_no_successor_and_no_top_k_rates():
    model = tiny_native(tokenizer=build_tokenizer(("the", "cat", "sees", "a", "dog", ".")))
    result = weights(model, SMALL, progress=False)
    assert set(result.unscored) == {"successor", "copy_rate", "suppression_rate"}
    assert result.unscored["successor"] == NO_ORDINALS
    assert "6 ordinary tokens, not more than top_k = 10" in result.unscored["copy_rate"]
    for score in result.unscored:
        assert values(result, score).isna().all()
    assert values(result, "copying").notna().all()


def test_tables_follow_their_schema_and_read_back(planted, tmp_path):
    rundir.write_table(tmp_path, "weights", planted.weights)
    rundir.write_table(tmp_path, "composition", planted.composition)
    back = rundir.read_table(tmp_path, "weights")
    assert len(back) == 8 * len(SCORES)
    comp = rundir.read_table(tmp_path, "composition")
    assert len(comp) == 3 * 4 * 4  # q, k, v x 4 readers in layer 1 x 4 writers in layer 0
    assert sorted(comp.groupby(["kind", "layer", "head"])["rank"].apply(list).iloc[0]) == [
        1,
        2,
        3,
        4,
    ]
    assert (comp.groupby("kind")["baseline"].nunique() == 1).all()  # one null per kind


def test_the_same_seed_gives_the_same_tables():
    model = tiny_native()
    a, b = weights(model, SMALL, progress=False), weights(model, SMALL, progress=False)
    assert a.weights.equals(b.weights) and a.composition.equals(b.composition)


def test_quick_shrinks_the_samples_but_keeps_what_the_user_set():
    quick = WeightsConfig(n_tokens=4096, top_k=5).for_quick(keep=("n_tokens", "top_k"))
    assert (quick.n_tokens, quick.top_k) == (4096, 5)
    assert (quick.n_null, quick.n_bootstrap, quick.n_prose) == (50, 20, 16)
    assert WeightsConfig().for_quick().n_tokens == 512


def test_a_head_with_nan_weights_has_nan_scores_and_the_others_keep_theirs(capfd):
    model = tiny_llama()
    with torch.no_grad():  # key-value head 0 of layer 1: query heads 0 and 1 read it
        model.bridge.original_model.model.layers[1].self_attn.v_proj.weight[0, 0] = float("nan")
    result = weights(model, SMALL, progress=False)
    table = result.weights.set_index(["layer", "head", "score"])["value"]
    for score in ("copying", "copy_rate", "suppression_rate", "successor", "output_size"):
        assert np.isnan(table[(1, 0, score)]) and np.isnan(table[(1, 1, score)])
        assert np.isfinite(table[(1, 2, score)]) and np.isfinite(table[(0, 0, score)])
    comp = result.composition
    broken_writer = (comp["writer_layer"] == 1) & comp["writer_head"].isin([0, 1])
    broken_values = (comp["layer"] == 1) & comp["head"].isin([0, 1]) & (comp["kind"] == "v")
    assert comp["value"].isna().equals(broken_writer | broken_values)
    ranks = comp[(comp["kind"] == "v") & (comp["layer"] == 2) & (comp["head"] == 0)]
    assert (
        ranks.loc[ranks["value"].isna(), "rank"].min()
        > ranks.loc[~ranks["value"].isna(), "rank"].max()
    )
    assert "MKL" not in capfd.readouterr().err

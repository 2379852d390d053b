"""Hand-built attention patterns through the real feature code and the shipped classifier: the
sink rule and the length-invariant broad feature, with exact sink masses."""

from __future__ import annotations

import pytest
import torch
from feature_inputs import NATURAL, seq

from interp.classify.primary import NONSINK_MIN
from interp.classify.reference.probes import PAD, synthetic_sequences
from interp.classify.stage import classify
from interp.collect.accumulator import FeatureAccumulator
from interp.collect.features import context
from interp.probes.batch import bucket, make_batch


def _roles(seqs, causal, build, relations=()):
    """Roles of the heads ``build(ctx)`` returns (float [batch, head, q, k]) over ``seqs``."""
    acc = None
    for group in bucket(seqs, 4096):
        ctx = context(make_batch([seqs[i] for i in group], group, causal, PAD), relations)
        pattern = build(ctx)
        acc = acc or FeatureAccumulator(1, pattern.shape[1], relations, n_bootstrap=10)
        acc.start_batch(ctx)
        acc.add_layer(0, pattern, ctx)
    return classify(acc.table(), acc.replicates(), acc.names).roles


def _sink_plus(ctx, rest: torch.Tensor, sink: float) -> torch.Tensor:
    """``sink`` of every query's mass on the first position, the rest as ``rest`` [batch, q, k] says."""
    out = rest * (1 - sink)
    out[..., 0] += sink
    return out * ctx.batch.valid[:, :, None]


def _previous_or_self(ctx) -> torch.Tensor:
    """One-hot on q-1, or on q itself where q-1 is the first position."""
    n, width = ctx.allowed.shape[:2]
    q = torch.arange(width)
    key = torch.where(q >= 2, q - 1, q)
    return torch.zeros(n, width, width).scatter_(-1, key[None, :, None].expand(n, width, 1), 1.0)


@pytest.mark.parametrize("sink", [0.6, 0.85])
def test_a_head_with_sixty_percent_sink_and_forty_previous_token_is_previous_token(sink):
    seqs, relations = synthetic_sequences(True, seed=0, n_repeated=8, n_syntax=40, n_prose=20)
    roles = _roles(
        seqs, True, lambda ctx: _sink_plus(ctx, _previous_or_self(ctx), sink)[:, None], relations
    )
    row = roles.iloc[0]
    assert row["role"] == "previous_token"
    assert row["sink_mass"] == pytest.approx(sink)
    assert row["second_role"] == "first_token"
    assert row["stability"] == 1.0


def test_a_head_with_too_little_attention_off_the_sink_is_first_token():
    seqs, relations = synthetic_sequences(True, seed=0, n_repeated=8, n_syntax=40, n_prose=20)
    sink = 1 - NONSINK_MIN / 2
    roles = _roles(
        seqs, True, lambda ctx: _sink_plus(ctx, _previous_or_self(ctx), sink)[:, None], relations
    )
    row = roles.iloc[0]
    assert row["role"] == "first_token" and row["confidence"] == 1.0
    assert row["sink_mass"] == pytest.approx(sink)
    assert row["second_role"] == "previous_token"  # what its crumbs do


@pytest.mark.parametrize("causal", [True, False])
def test_a_head_uniform_over_content_keys_is_broad_at_every_length(causal):
    """4 to 256 content keys (plus BOS, or [CLS] and [SEP]). With fewer, an encoder probe is two
    words that are each other's only neighbour: uniform and local attention are the same thing."""
    for length in (4, 6, 8, 16, 32, 64, 128, 256):
        n_body = length
        seqs = []
        for i in range(12):  # sentences of one length, different words
            body = list(range(10 + i, 10 + i + n_body))
            seqs.append(
                seq(
                    [1, *body] + ([] if causal else [2]),
                    kind=NATURAL,
                    special=(0,) if causal else (0, n_body + 1),
                )
            )

        def build(ctx):
            keys = (ctx.allowed & ctx.content[:, None, :]).float()
            uniform = keys / keys.sum(-1, keepdim=True).clamp(min=1)
            return torch.stack([_sink_plus(ctx, uniform, 0.0), _sink_plus(ctx, uniform, 0.5)], 1)

        roles = _roles(seqs, causal, build)
        assert roles["role"].tolist() == ["broad", "broad"], (length, roles)
        assert roles["sink_mass"].tolist() == pytest.approx([0.0, 0.5])

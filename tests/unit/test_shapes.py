"""The jaxtyping shape annotations hold: checked at run time (beartype) on hand-built inputs,
and a tensor of the wrong shape is refused by them."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from beartype import beartype
from feature_inputs import SYNTAX, seq
from jaxtyping import TypeCheckError, jaxtyped

from interp.collect import features as F
from interp.collect import syntax as S
from interp.probes.batch import ProbeBatch, make_batch


def checked(fn):
    return jaxtyped(typechecker=beartype)(fn)


@pytest.fixture
def inputs():
    seqs = [
        seq([1, 2, 3, 2, 3, 7], kind=SYNTAX, words=[-1, 0, 1, 2, 3, 4], arcs=[(0, 4, 0)]),
        seq([1, 4, 5]),
    ]
    batch = make_batch(seqs, [0, 1], True, 0)
    ctx = F.context(batch, relations=("nsubj",))
    logits = torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(0))
    pattern = torch.softmax(logits.masked_fill(~ctx.allowed[:, None], float("-inf")), -1)
    return batch, ctx, pattern


def _fields(obj):
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def test_every_feature_meets_its_annotations(inputs):
    _, ctx, pattern = inputs
    for fn in F.MASS_FEATURES.values():
        sums = checked(fn)(pattern, ctx)
        checked(F.FeatureSums)(**_fields(sums))  # the sums' shapes agree with each other
    checked(S.arc_sink)(pattern, ctx)
    checked(S.syntactic)(pattern, ctx)


def test_batch_and_context_meet_their_annotations(inputs):
    batch, ctx, _ = inputs
    checked(ProbeBatch)(**_fields(batch))
    checked(F.FeatureContext)(**_fields(ctx))


def test_a_pattern_without_its_head_axis_is_refused(inputs):
    _, ctx, pattern = inputs
    with pytest.raises(TypeCheckError):
        checked(F.previous_token)(pattern[:, 0], ctx)


def test_masses_over_other_queries_are_refused(inputs):
    _, ctx, pattern = inputs
    with pytest.raises(TypeCheckError):
        checked(F._sums)(
            pattern, ctx, pattern[..., 0][..., :4], ctx.content, ctx.n_open, "previous_token"
        )


def test_a_context_whose_masks_disagree_is_refused(inputs):
    _, ctx, _ = inputs
    fields = _fields(ctx)
    fields["n_allowed"] = fields["n_allowed"][:, :4]
    with pytest.raises(TypeCheckError):
        checked(F.FeatureContext)(**fields)

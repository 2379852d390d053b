"""The collect pass's forward: every layer's pattern, exactly, and nothing after the last one."""

from __future__ import annotations

import pytest
import torch

from interp.lens import run_patterns


@pytest.mark.parametrize("name", ["llama", "gpt2", "bert"])
def test_run_patterns_hands_over_every_layer_and_stops_after_the_last(name, request):
    model = request.getfixturevalue(name)
    torch.manual_seed(0)
    tokens = torch.randint(5, 200, (2, 7))
    mask = torch.ones_like(tokens)
    with torch.inference_mode():
        before = model.bridge(tokens, attention_mask=mask)
        _, cache = model.bridge.run_with_cache(tokens, attention_mask=mask)
    unembedded: list[int] = []
    handle = model.bridge.unembed.register_forward_hook(lambda *args: unembedded.append(1))
    try:
        seen: dict[int, torch.Tensor] = {}
        run_patterns(model, tokens, mask, lambda layer, pattern: seen.setdefault(layer, pattern.clone()))
    finally:
        handle.remove()
    assert sorted(seen) == list(range(model.n_layers))
    for layer, pattern in seen.items():
        torch.testing.assert_close(pattern, cache[f"blocks.{layer}.attn.hook_pattern"])
    assert unembedded == []  # the pass ended at the last pattern
    with torch.inference_mode():  # and left no hook behind
        torch.testing.assert_close(model.bridge(tokens, attention_mask=mask), before)

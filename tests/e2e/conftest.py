"""Fixtures shared by the end-to-end tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny grouped-query Llama and its tokenizer, saved the way a user's model would be."""
    from tiny_models import save_tiny_llama

    return save_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="module")
def llama_dir(model_dir):
    """The tiny Llama's directory, under the name the bad-input tests use."""
    return model_dir

"""Fixtures shared by the end-to-end tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny grouped-query Llama and its tokenizer, saved the way a user's model would be."""
    from tiny_models import save_tiny_llama

    return save_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))

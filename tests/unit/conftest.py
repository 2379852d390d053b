"""Fixtures shared by the ablation unit tests: tiny models, built once per module."""

from __future__ import annotations

import pytest
import torch
from tiny_models import tiny_bert, tiny_gpt2, tiny_llama


@pytest.fixture
def one_thread():
    """Tiny ops on a shared 2-core box: one thread is 30x faster than two (OpenMP stalls)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def llama():
    return tiny_llama()


@pytest.fixture(scope="module")
def gpt2():
    return tiny_gpt2()


@pytest.fixture(scope="module")
def bert():
    return tiny_bert()

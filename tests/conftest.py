"""Shared fixtures: seeded RNGs for every test, real packaged models loaded once per session."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch


@pytest.fixture(autouse=True)
def seed_everything():
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    yield


@pytest.fixture(scope="session")
def smollm2():
    from interp.models import load_model

    return load_model("smollm2-135m")


@pytest.fixture(scope="session")
def minilm():
    from interp.models import load_model

    return load_model("minilm-l6")


@pytest.fixture(scope="session")
def minilm_tokenizer():
    from transformers import AutoTokenizer

    from interp.models import PACKAGED, packaged_path

    return AutoTokenizer.from_pretrained(packaged_path(PACKAGED["minilm-l6"]))

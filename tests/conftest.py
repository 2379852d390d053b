"""Shared fixtures: seeded RNGs for every test, real packaged models loaded once per session."""

from __future__ import annotations

import contextlib
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
    from interp.model.load import load_model

    return load_model("smollm2-135m")


@pytest.fixture(scope="session")
def minilm():
    from interp.model.load import load_model

    return load_model("minilm-l6")


@pytest.fixture(scope="session")
def minilm_tokenizer():
    from transformers import AutoTokenizer

    from interp.model.load import PACKAGED, packaged_path

    return AutoTokenizer.from_pretrained(packaged_path(PACKAGED["minilm-l6"]))


@pytest.fixture(scope="session")
def smollm2_roles(smollm2):
    """The classifier's roles for SmolLM2's heads, from a small probe set (about a minute)."""
    from interp import CollectConfig
    from interp.classify.stage import classify
    from interp.collect.stage import collect

    config = CollectConfig(n_repeated=48, n_syntax=200, max_sentences=80, n_bootstrap=50)
    result = collect(smollm2, config, progress=False)
    return classify(result.features, result.replicates, result.names).roles


@contextlib.contextmanager
def _ray_lock(tmp_path_factory):
    """An exclusive lock, held while a local Ray cluster runs: ``make test`` runs two
    pytest-xdist workers, and two clusters started at once would contend for the same cores and
    ports. The lock file lies in the session's temporary root, which the workers share."""
    import fcntl

    with open(tmp_path_factory.getbasetemp().parent / "ray.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="module")
def ray_to_itself(tmp_path_factory):
    """The Ray lock for a file whose module fixture keeps one cluster for all its tests."""
    with _ray_lock(tmp_path_factory):
        yield


@pytest.fixture
def ray_to_this_test(tmp_path_factory):
    """The Ray lock for one test that starts and stops its own cluster: the rest of its file
    runs without holding it."""
    with _ray_lock(tmp_path_factory):
        yield

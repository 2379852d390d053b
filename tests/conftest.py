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


# The test files that start a local Ray cluster: in a parallel session they share one worker, so
# that two clusters never start at once.
RAY_FILES = {"test_ray_executor.py", "test_study.py"}


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``make test`` runs two workers, ``--dist loadgroup``) a file's tests
    go to one worker, so that its module fixtures (a quick analyses run, a trained model) are
    built once, and the Ray files share one worker."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        group = "ray" if item.path.name in RAY_FILES else str(item.path)
        item.add_marker(pytest.mark.xdist_group(group))

"""--quick makes every stage smaller, except for the options the user gave: those stay as given,
in every stage (a flag wins over --quick)."""

from __future__ import annotations

import pytest

from interp.ablate.config import AblateConfig
from interp.collect.config import CollectConfig
from interp.pipeline.options import RunOptions

# Each stage's fields a user sets, to values --quick would change; and what --quick makes of each.
GIVEN = {
    "collect": {"n_repeated": 48, "n_syntax": 500, "max_sentences": 200, "n_bootstrap": 150},
    "ablate": {
        "n_prose": 20,
        "n_repeated": 5,
        "n_syntax": 12,
        "n_bootstrap": 500,
        "ig_steps": 3,
        "time_budget": 90.0,
        "prune_step": 0.25,
    },
}
QUICK = {
    "collect": {"n_repeated": 32, "n_syntax": 300, "max_sentences": 120, "n_bootstrap": 100},
    "ablate": {
        "n_prose": 3,
        "n_repeated": 3,
        "n_syntax": 8,
        "n_bootstrap": 200,
        "ig_steps": 2,
        "time_budget": 35.0,
        "prune_step": 0.1,
    },
}
CONFIGS = {"collect": CollectConfig, "ablate": AblateConfig}


def used(options: RunOptions, name: str) -> object:
    """The settings the stage works with (the ablate stage resolves its config per model)."""
    config = options.stage_config(name)
    return config.resolved(270) if isinstance(config, AblateConfig) else config


@pytest.mark.parametrize("name", list(GIVEN))
def test_quick_keeps_every_option_the_user_gave(name):
    options = RunOptions(
        quick=True,
        stages={name: CONFIGS[name](**GIVEN[name])},
        explicit=tuple(f"{name}.{field}" for field in GIVEN[name]),
    )
    config = used(options, name)
    assert {field: getattr(config, field) for field in GIVEN[name]} == GIVEN[name]


@pytest.mark.parametrize("name", list(GIVEN))
def test_quick_makes_the_options_nobody_gave_smaller(name):
    config = used(RunOptions(quick=True), name)
    assert {field: getattr(config, field) for field in QUICK[name]} == QUICK[name]


def test_quick_keeps_one_option_given_and_shrinks_the_others():
    options = RunOptions(
        quick=True, stages={"ablate": AblateConfig(n_prose=20)}, explicit=("ablate.n_prose",)
    )
    config = used(options, "ablate")
    assert (config.n_prose, config.n_repeated, config.quick) == (20, 3, True)
    assert config.top_k == 6  # the top 2% of 270 heads: chosen per model, not a user's option

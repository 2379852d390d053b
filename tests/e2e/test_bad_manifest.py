"""A manifest whose fields have the wrong JSON types (edited by hand, written by another tool) ends
a stage command or a replay in one line naming the field, never in exit 70 (it used to, with an
AttributeError in execute.recorded_config), and before any model loads."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from cli_cases import check
from click.testing import CliRunner

from interp.cli import main

MANIFEST = {
    "format": 2,
    "model": {
        "name": "no-such-model",
        "source": "hf-dir",
        "spec": {"name": "no-such-model"},
    },
    "options": {"model": {"name": "no-such-model"}, "stages": {"ablate": {"n_prose": 2}}},
    "stages": {},
}


def at(path: str, value):
    """A manifest with ``value`` set at the dotted ``path``."""

    def edit(manifest: dict) -> dict:
        manifest = copy.deepcopy(manifest)
        *parents, last = path.split(".")
        here = manifest
        for key in parents:
            here = here.setdefault(key, {})
        here[last] = value
        return manifest

    return edit


def without_stages_key(manifest: dict) -> dict:
    """A manifest from before stages were a mapping: one key per stage in the options."""
    manifest = copy.deepcopy(manifest)
    manifest["options"] = {"model": {"name": "no-such-model"}, "ablate": "x"}
    return manifest


CASES = {
    "options.stages is a list": (at("options.stages", ["ablate"]), "options.stages is a JSON list"),
    "options.stages.ablate is a string": (
        at("options.stages.ablate", "quick"),
        "options.stages.ablate is a JSON string",
    ),
    "options.ablate (older layout) is a string": (
        without_stages_key,
        "options.ablate is a JSON str",
    ),
    "options.stages.ablate.tasks is a number": (
        at("options.stages.ablate.tasks", 5),
        "AblateConfig.tasks",
    ),
    "options.stages.ablate.n_prose is a string": (
        at("options.stages.ablate.n_prose", "many"),
        "AblateConfig.n_prose",
    ),
    "options has a key no version wrote": (at("options.bogus", 1), "no field 'bogus'"),
    "stages.ablate.config is a list": (
        at("stages.ablate", {"config": [1]}),
        "stages.ablate.config is a JSON list",
    ),
    "stages.ablate.config.tasks is a number": (  # what `interp ablate` reruns; a replay reads options
        at("stages.ablate", {"config": {"tasks": 5}}),
        "AblateConfig.tasks",
    ),
    "model.spec is a string": (at("model.spec", "no-such-model"), "model.spec is a JSON string"),
}


def run_dir(tmp: Path, manifest: dict) -> Path:
    path = tmp / "runs" / "m" / "r"
    path.mkdir(parents=True)
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


@pytest.mark.parametrize("command", ["ablate", "from-manifest"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_field_of_the_wrong_type_is_one_line_naming_it(tmp_path, case, command):
    edit, field = CASES[case]
    if case.startswith("stages.ablate.config.") and command == "from-manifest":
        field = "unknown model 'no-such-model'"  # a replay reads the options, which are fine
    path = run_dir(tmp_path, edit(MANIFEST))
    args = (
        ["ablate", str(path), "-q"]
        if command == "ablate"
        else ["run", "--from-manifest", str(path), "--out", str(tmp_path / "again")]
    )
    line = check(tmp_path, args)
    assert field in line, line


def test_the_intact_manifest_gets_as_far_as_the_model(tmp_path):
    """The cases above fail on their field, not on something else in the manifest."""
    result = CliRunner().invoke(main, ["ablate", str(run_dir(tmp_path, MANIFEST)), "-q"])
    assert result.exit_code == 1 and "no-such-model" in result.stderr, result.output

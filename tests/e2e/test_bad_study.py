"""A study that would lose runs silently is refused in one line before anything runs, or names its
runs uniquely and says so: two corpora with one file stem, variant names cut to one name, a
misspelled stage, no runs at all, a refused variant name (and no empty study folder behind)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from interp.cli import main
from interp.troubleshooting import find

COLLECT_ONLY = """
[settings]
skip = ["classify", "ablate", "report"]
[settings.stages.collect]
n_syntax = 5
n_repeated = 4
max_sentences = 4
n_bootstrap = 10
threads = 1
"""


def study(tmp_path: Path, model: str, body: str, corpora: str = "[[]]") -> Path:
    path = tmp_path / "study.toml"
    path.write_text(
        f'name = "s"\nout = "{tmp_path / "out"}"\nmodels = ["{model}"]\ncorpora = {corpora}\n'
        + body
    )
    return path


def refused(path: Path) -> str:
    result = CliRunner().invoke(main, ["study", str(path), "-q"])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert "Traceback" not in result.output and find(lines[0]) is not None, lines[0]
    assert not (path.parent / "out").exists()  # nothing ran, not even an empty study folder
    return lines[0]


@pytest.mark.parametrize(
    "body, corpora, message",
    [
        (
            COLLECT_ONLY + "[settings.stages.colect]\nn_syntax = 3\n",
            "[[]]",
            "error: settings.stages has no stage 'colect'; stages are collect, ",
        ),
        (
            COLLECT_ONLY + "[variants.few.colect]\nn_syntax = 3\n",
            "[[]]",
            "error: variants.few has no stage 'colect'; stages are collect, ",
        ),
        (COLLECT_ONLY, "[]", "error: corpora is empty, so the study has no run"),
        ("seeds = []\n" + COLLECT_ONLY, "[[]]", "error: seeds is empty, so the study has no run"),
        (
            COLLECT_ONLY + '[variants."a/b".collect]\nn_syntax = 3\n',
            "[[]]",
            "error: variant name 'a/b' is not allowed (it names runs)",
        ),
        (
            COLLECT_ONLY
            + "".join(f"[variants.{'v' * 100}{i}.collect]\nn_syntax = {3 + i}\n" for i in (1, 2)),
            "[[]]",
            "error: two runs of the study would share the run directory ",
        ),
        (
            COLLECT_ONLY + "[variants.few]\ncollect = 3\n",
            "[[]]",
            "error: variants.few.collect must be a table of fields, got 3",
        ),
        (
            COLLECT_ONLY + "[variants.few.collect]\nn_sintax = 3\n",
            "[[]]",
            "error: CollectConfig has no field 'n_sintax'",
        ),
    ],
    ids=[
        "settings stage misspelled",
        "variant stage misspelled",
        "no corpora",
        "no seeds",
        "variant name with a slash",
        "variant names cut to one name",
        "variant stage not a table",
        "variant field misspelled",
    ],
)
def test_a_study_that_would_lose_runs_is_refused_before_anything_runs(
    tmp_path, model_dir, body, corpora, message
):
    assert refused(study(tmp_path, str(model_dir), body, corpora)).startswith(message)


def test_two_models_with_one_folder_name_are_refused(tmp_path, model_dir):
    other = tmp_path / "elsewhere" / model_dir.name
    other.parent.mkdir()
    other.symlink_to(model_dir)
    toml = study(tmp_path, str(model_dir), COLLECT_ONLY)
    toml.write_text(
        toml.read_text().replace(
            f'models = ["{model_dir}"]', f'models = ["{model_dir}", "{other}"]'
        )
    )
    assert f"share the run directory {model_dir.name}/builtin-seed0" in refused(toml)


def test_two_corpora_with_one_file_stem_make_two_runs_and_say_so(tmp_path, model_dir):
    a, b = tmp_path / "a" / "same.txt", tmp_path / "b" / "same.txt"
    for path, text in ((a, "the dog runs home .\n"), (b, "a bird sings in the tree today .\n")):
        path.parent.mkdir()
        path.write_text(text * 3)
    toml = study(tmp_path, str(model_dir), COLLECT_ONLY, f'[["{a}"], ["{b}"]]')
    result = CliRunner().invoke(main, ["study", str(toml), "-q"])
    assert result.exit_code == 0, result.output
    assert "warning: study s: the runs on corpora [" in result.stderr
    assert "are named same-2-seed..." in result.stderr
    state = json.loads((tmp_path / "out" / "s" / "study.json").read_text())
    runs = {r["run"]: r for r in state["runs"]}
    assert set(runs) == {"same-seed0", "same-2-seed0"}
    hashes = set()
    for name, run in runs.items():
        manifest = json.loads((Path(run["run_dir"]) / "manifest.json").read_text())
        hashes.add(manifest["corpora"]["user:same"]["hash"])
        assert run["status"] == "complete" and "collect" in manifest["stages"], name
    assert len(hashes) == 2  # each run collected its own file
    shares = pd.read_csv(tmp_path / "out" / "s" / "comparison" / "role_shares.csv")
    assert shares.empty or shares["run"].nunique() == 2

"""`interp study`: two tiny models x two corpora as one study, stopped and started again, and the
cross-run comparison it ends with."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from interp.cli import main
from interp.errors import ConfigError
from interp.pipeline.study import read_study


@pytest.fixture(scope="module")
def study_file(tmp_path_factory):
    from tiny_models import save_tiny_llama

    root = tmp_path_factory.mktemp("study")
    models = [
        save_tiny_llama(root / name, seed=seed) for name, seed in (("tiny-a", 0), ("tiny-b", 1))
    ]
    corpus = root / "lines.txt"
    corpus.write_text(
        "the dog runs to the house .\nthe cats sleep on the mat .\na bird sings in the tree .\n"
    )
    path = root / "study.toml"
    path.write_text(f"""
name = "pair"
out = "{root / "runs"}"
models = ["{models[0]}", "{models[1]}"]
corpora = [[], ["{corpus}"]]
seeds = [0]
[settings]
quick = true
skip = ["report"]
[settings.stages.collect]
n_syntax = 20
n_repeated = 8
[settings.stages.ablate]
n_prose = 2
n_repeated = 2
n_syntax = 4
""")
    return path


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_a_study_runs_every_combination_then_compares_them(study_file, monkeypatch):
    result = invoke("study", study_file, "-q")
    assert result.exit_code == 0, result.output
    root = Path(read_study(study_file).out) / "pair"
    state = json.loads((root / "study.json").read_text())
    assert [r["status"] for r in state["runs"]] == ["complete"] * 4
    assert {Path(r["run_dir"]).relative_to(root).as_posix() for r in state["runs"]} == {
        "tiny-a/builtin-seed0",
        "tiny-a/lines-seed0",
        "tiny-b/builtin-seed0",
        "tiny-b/lines-seed0",
    }

    shares = pd.read_csv(root / "comparison" / "role_shares.csv")
    assert set(shares["depth"]) <= {"early", "middle", "late"}
    sums = shares.groupby(["run", "depth"])["share"].sum()
    assert sums.round(9).eq(1).all() and shares["run"].nunique() == 4
    matched = pd.read_csv(root / "comparison" / "matched_heads.csv")
    assert (
        len(matched) == 4 * 12
        and set(matched["run"]) == {"builtin-seed0", "lines-seed0"}
        and {"role", "confidence", "effect"} <= set(matched.columns)
    )
    changes = pd.read_csv(root / "comparison" / "role_changes.csv")
    assert set(changes.columns) >= {"model", "run_a", "run_b", "role_a", "role_b"}
    assert (
        changes["run_a"].str.split("/").str[0] == changes["run_b"].str.split("/").str[0]
    ).all()  # one model
    spread = pd.read_csv(root / "comparison" / "effect_spread.csv")
    assert spread["run"].nunique() == 4 and (spread["q25"] <= spread["q75"]).all()
    page = (root / "study.html").read_text()
    assert "Role shares by relative depth" in page and "Matching heads side by side" in page

    # Started again: every run is complete, so nothing loads a model.
    def refuse(*args, **kwargs):
        raise AssertionError("a complete study loaded a model")

    monkeypatch.setattr("interp.model.load.load_model", refuse)
    assert invoke("study", study_file, "-q").exit_code == 0


def test_a_stopped_study_continues_where_it_stopped(study_file):
    invoke("study", study_file, "-q")
    root = Path(read_study(study_file).out) / "pair"
    run_dir = root / "tiny-b" / "lines-seed0"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    collected = manifest["stages"]["collect"]["id"]
    del manifest["stages"]["ablate"]  # as if stopped during its last stage
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    assert invoke("study", study_file, "-q").exit_code == 0
    again = json.loads((run_dir / "manifest.json").read_text())["stages"]
    assert "ablate" in again and again["collect"]["id"] == collected  # finished stages kept


def test_a_bad_study_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("models = [")
    result = CliRunner().invoke(main, ["study", str(bad)])
    assert result.exit_code == 1 and "is not a valid TOML study file" in result.output
    bad.write_text('name = "x"\nmodels = []\n')
    with pytest.raises(ConfigError, match="at least one model"):
        read_study(bad)
    bad.write_text('models = ["m"]\nseeds = ["zero"]\n')
    with pytest.raises(
        ConfigError, match=r"StudyConfig\.seeds\.0: input should be a valid integer"
    ):
        read_study(bad)


def test_a_study_on_ray_makes_the_same_runs_as_tasks(study_file, tmp_path, ray_to_this_test):
    pytest.importorskip("ray")
    import ray

    invoke("study", study_file, "-q")  # the local study, for comparison
    local_root = Path(read_study(study_file).out) / "pair"
    on_ray = tmp_path / "ray.toml"
    on_ray.write_text(
        study_file.read_text().replace(
            f'out = "{Path(read_study(study_file).out)}"', f'out = "{tmp_path / "runs"}"'
        )
    )
    ray.init(
        num_cpus=2, include_dashboard=False, object_store_memory=100 * 2**20, log_to_driver=False
    )
    try:
        result = invoke("study", on_ray, "--executor", "ray", "--workers", "2", "-q")
    finally:
        ray.shutdown()
    assert result.exit_code == 0, result.output
    root = tmp_path / "runs" / "pair"
    state = json.loads((root / "study.json").read_text())
    assert [r["status"] for r in state["runs"]] == ["complete"] * 4
    assert {r["executor"]["executor"] for r in state["runs"]} == {"ray"} and state["runs"][0][
        "executor"
    ]["workers"] == 2
    for run in ("tiny-a/builtin-seed0", "tiny-b/lines-seed0"):
        for table in ("features", "roles"):
            a, b = (pd.read_csv(r / run / f"{table}.csv") for r in (local_root, root))
            pd.testing.assert_frame_equal(a, b, rtol=1e-6)
    assert (root / "study.html").is_file() and (root / "comparison" / "matched_heads.csv").is_file()


def test_study_placement_flags_without_ray_are_refused(study_file):
    result = CliRunner().invoke(main, ["study", str(study_file), "--workers", "2"])
    assert result.exit_code == 1 and "go with --executor ray" in result.output

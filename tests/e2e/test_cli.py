"""The command line as a user meets it: listings, every user error, resume and interruption."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from interp.cli import main

FAST = [
    "--model",
    "minilm-l6",
    "--quick",
    "--skip",
    "weights",
    "--skip",
    "classify",
    "--skip",
    "ablate",
    "--skip",
    "report",
    "-q",
]


def invoke(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def assert_user_error(result, text):
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and text in lines[0], result.output
    assert "Traceback" not in result.output


def test_models_lists_the_packaged_models():
    result = invoke("models")
    assert result.exit_code == 0
    assert "smollm2-135m" in result.output and "minilm-l6" in result.output


def test_tables_and_roles_print_their_reference():
    assert all(
        name in invoke("tables").output for name in ("features:", "roles:", "effects:", "pruning:")
    )
    out = invoke("roles").output
    assert "induction" in out and "unexplained" in out and "syntactic:<relation>" in out


def test_unknown_model(tmp_path):
    assert_user_error(
        invoke("run", "--model", "no-such-model", "--out", str(tmp_path)), "unknown model"
    )
    assert not any(tmp_path.iterdir())


def test_output_dir_is_a_file(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    assert_user_error(invoke("run", *FAST, "--out", str(target)), "is a file")


def test_output_dir_not_writable(tmp_path):
    import os

    if os.geteuid() == 0:  # root ignores permission bits; /proc refuses new folders even to root
        target = Path("/proc/interp-runs")
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        target = locked / "runs"
    assert_user_error(invoke("run", *FAST, "--out", str(target)), "writable")


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("missing.txt", None, "corpus file not found"),
        ("empty.txt", "\n\n", "empty"),
        ("bad.jsonl", '{"text": "fine"}\nnot json\n', "bad.jsonl:2"),
        ("latin1.txt", "caf\xe9\n".encode("latin-1"), "UTF-8"),
        (
            "broken.conllu",
            "1\tA\ta\tDET\t_\t_\t2\tdet\t_\t_\n2\tdog\tdog\tNOUN\t_\t_\t1\tnsubj\t_\t_\n\n",
            "broken.conllu",
        ),
    ],
)
def test_bad_corpora(tmp_path, name, content, message):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    out = tmp_path / "runs"
    result = invoke("run", *FAST, "--no-builtin", "--corpus", str(path), "--out", str(out))
    assert_user_error(result, message)
    assert not out.exists() or not any(out.rglob("manifest.json"))


def test_run_resume_and_refuse_to_overwrite(tmp_path):
    out = tmp_path / "runs"
    first = invoke("run", *FAST, "--out", str(out), "--name", "r1")
    assert first.exit_code == 0, first.output
    run_dir = out / "minilm-l6" / "r1"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert set(manifest["stages"]) == {"collect"}
    assert manifest["model"]["n_heads"] == 12 and manifest["provenance"]["versions"]["torch"]
    assert (run_dir / "features.parquet").exists() and (run_dir / "features.csv").exists()

    again = invoke("run", *FAST, "--out", str(out), "--name", "r1")
    assert_user_error(again, "--resume")
    resumed = invoke("run", *FAST, "--out", str(out), "--name", "r1", "--resume")
    assert resumed.exit_code == 0
    after = json.loads((run_dir / "manifest.json").read_text())
    assert (
        after["stages"]["collect"]["finished"] == manifest["stages"]["collect"]["finished"]
    )  # skipped
    assert not list(run_dir.glob(".*.tmp"))


def test_interrupted_run_keeps_finished_stages(tmp_path, monkeypatch):
    import interp.collect.stage

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(interp.collect.stage, "run_stage", interrupt)
    out = tmp_path / "runs"
    result = CliRunner().invoke(main, ["run", *FAST, "--out", str(out), "--name", "x"])
    assert result.exit_code == 130 and "no run was kept" in result.output
    assert "--resume" not in result.output  # there is no run to resume
    assert not (out / "minilm-l6" / "x").exists()  # nothing had finished: nothing is left


def test_stage_commands_need_a_run_directory(tmp_path):
    for command in ("classify", "ablate", "report"):
        assert_user_error(invoke(command, str(tmp_path)), "not a run directory")


def test_python_m_interp_runs():
    out = subprocess.run([sys.executable, "-m", "interp", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert all(
        command in out.stdout
        for command in ("run", "collect", "classify", "ablate", "report", "compare")
    )


def test_ablate_rejects_an_unknown_metric_before_loading_the_model(tmp_path, monkeypatch):
    from interp.model import load as models
    from interp.pipeline import rundir

    rundir.write_manifest(tmp_path, {"model": {"name": "minilm-l6"}, "stages": {}})
    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("the model was loaded"))
    assert_user_error(invoke("ablate", str(tmp_path), "--metric", "accuracy"), "metrics must be")
    result = invoke("ablate", str(tmp_path), "--ablation", "noise")
    assert result.exit_code == 2 and "noise" in result.output  # click's own usage error


def test_quiet_reaches_every_stage(tmp_path, monkeypatch):
    import interp.ablate.stage
    import interp.collect.stage
    from interp.pipeline.contract import StageRecord

    seen = {}

    def fake_collect(run_dir, model, config, progress=True):
        seen["collect"] = progress
        return StageRecord()

    def fake_ablate(run_dir, model, config, progress=True):
        seen["ablate"] = progress
        return StageRecord()

    monkeypatch.setattr(interp.collect.stage, "run_stage", fake_collect)
    monkeypatch.setattr(interp.ablate.stage, "run_stage", fake_ablate)
    args = [
        "--model",
        "minilm-l6",
        "--skip",
        "weights",
        "--skip",
        "classify",
        "--skip",
        "report",
        "--out",
        str(tmp_path),
        "--name",
        "q",
    ]
    assert invoke("run", *args, "-q").exit_code == 0
    assert seen == {"collect": False, "ablate": False}

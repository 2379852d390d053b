"""Provenance that reloads: a run records the model spec that loads its model again, so that
stage commands and --resume work from any working directory; a run made with a model built in
Python says, in one line, the Python that reruns a stage, and that line works."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

import interp
from interp import RunOptions
from interp.cli import main
from interp.model.load import load_model
from interp.model.tiny import build_tiny
from interp.pipeline.execute import run_pipeline


@pytest.fixture
def model_dir(tmp_path):
    return build_tiny("qwen2", tmp_path / "models" / "tiny-qwen2", n_kv_heads=1)


def invoke(*args, ok=True):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert (result.exit_code == 0) is ok, result.output
    return result


def manifest(run_dir):
    return json.loads((run_dir / "manifest.json").read_text())


def test_stage_commands_and_resume_reload_a_model_given_by_a_relative_path(
    model_dir, tmp_path, monkeypatch
):
    monkeypatch.chdir(model_dir.parent)
    runs = tmp_path / "runs"
    invoke(
        "run",
        "--model",
        "./tiny-qwen2",
        "--causal",
        "--out",
        runs,
        "--name",
        "a",
        "--quick",
        "--skip",
        "ablate",
        "--skip",
        "report",
        "-q",
    )
    run_dir = runs / "tiny-qwen2" / "a"
    recorded = manifest(run_dir)
    spec = {"name": str(model_dir.resolve()), "device": "cpu", "dtype": "float32", "causal": True}
    assert recorded["model"]["spec"] == spec and recorded["options"]["model"] == spec

    monkeypatch.chdir(tmp_path)  # elsewhere: the relative path no longer names the model
    invoke("ablate", run_dir, "--quick", "-q")
    invoke("classify", run_dir, "-q")
    assert {"collect", "classify", "ablate"} <= set(manifest(run_dir)["stages"])
    invoke(
        "run",
        "--model",
        model_dir,
        "--out",
        runs,
        "--name",
        "a",
        "--resume",
        "--quick",
        "--skip",
        "report",
        "-q",
    )
    assert manifest(run_dir)["model"]["spec"] == spec


def test_a_run_of_a_model_built_in_python_says_how_to_rerun_its_stages(model_dir, tmp_path):
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    bridge = TransformerBridge.boot_transformers(str(model_dir), tokenizer=tokenizer)
    model = load_model(bridge, tokenizer=tokenizer, name="my-qwen")
    options = RunOptions(
        out_dir=str(tmp_path / "runs"), run_name="api", quick=True, skip=("ablate",)
    )
    run_dir = run_pipeline(options, model=model, progress=False)
    recorded = manifest(run_dir)
    assert run_dir == tmp_path / "runs" / "my-qwen" / "api"
    assert recorded["model"]["source"] == "bridge" and recorded["model"]["spec"] is None
    assert recorded["options"]["model"]["name"] == "my-qwen"
    assert "<title>my-qwen · attention heads · api</title>" in (run_dir / "report.html").read_text()

    result = invoke("ablate", run_dir, "-q", ok=False)
    [line] = result.output.strip().splitlines()
    assert line.startswith(
        f"error: {run_dir} was made with a model built in Python (my-qwen), which the command "
        f"line cannot load: rerun the ablate stage from Python: "
    )
    snippet = re.search(r"interp\.rerun_stage\(.*\)$", line).group(0)
    exec(
        snippet, {"interp": interp, "bridge": bridge, "tokenizer": tokenizer}
    )  # the line, as a user would paste it
    assert "ablate" in manifest(run_dir)["stages"]
    assert (
        "make the run again from Python"
        in invoke("run", "--from-manifest", run_dir, ok=False).output
    )

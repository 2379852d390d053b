"""All four stages through the CLI on a tiny model saved as a Hugging Face directory: one run
directory, then every stage command again on it, and a comparison of two runs."""

from __future__ import annotations

import json

import pandas as pd
from click.testing import CliRunner

from interp.cli import main
from interp.pipeline.stages import stage_names


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_every_stage_into_one_run_then_each_stage_again(model_dir, tmp_path):
    out = tmp_path / "runs"
    invoke("run", "--model", model_dir, "--out", out, "--name", "a", "--n-syntax", 60, "-q")
    run_dir = out / model_dir.name / "a"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert list(manifest["stages"]) == list(stage_names())
    for table in ("features", "roles", "effects", "pruning"):
        assert len(pd.read_parquet(run_dir / f"{table}.parquet")) > 0, table
    assert (run_dir / "report.html").exists() and (run_dir / "report.pdf").exists()
    before = {name: manifest["stages"][name]["id"] for name in stage_names()}

    invoke("classify", run_dir, "-q")
    invoke(
        "ablate",
        run_dir,
        "--ablation",
        "zero",
        "--ablation",
        "mean",
        "--metric",
        "loss_repeated",
        "-q",
    )
    effects = pd.read_parquet(run_dir / "effects.parquet")
    assert set(effects["ablation"]) == {"zero", "mean"} and set(effects["metric"]) == {
        "loss_repeated"
    }
    result = invoke("report", run_dir, "-q")
    assert str(run_dir / "report.html") in result.output
    stages = json.loads((run_dir / "manifest.json").read_text())["stages"]
    assert stages["ablate"]["config"]["ablations"] == ["zero", "mean"]
    # each stage command ran its stage again (a new record id), and left collect's record alone
    assert {name for name in stage_names() if stages[name]["id"] != before[name]} == {
        "classify",
        "ablate",
        "report",
    }

    collected = invoke("collect", run_dir, "--n-syntax", 30, "-q")
    assert "now out of date: classify, report" in collected.output
    recorded = json.loads((run_dir / "manifest.json").read_text())["stages"]["collect"]["config"]
    # the recorded config, changed only by the flag given (the run's --n-syntax 60 became 30)
    assert recorded == {**manifest["stages"]["collect"]["config"], "n_syntax": 30}

    invoke(
        "run",
        "--model",
        model_dir,
        "--out",
        out,
        "--name",
        "b",
        "--n-syntax",
        60,
        "--skip",
        "ablate",
        "-q",
    )
    page = tmp_path / "compare.html"
    invoke("compare", run_dir, out / model_dir.name / "b", "--out", page)
    text = page.read_text()
    assert "differs" in text and "of 12" in text  # the heads matched one to one: 3 layers x 4 heads

"""--eval-corpus through the command line: recorded in the manifest with its content hash, so
that --resume measures again when the file changed and --from-manifest refuses a changed file."""

from __future__ import annotations

import json

import pandas as pd
from click.testing import CliRunner

from interp.cli import main
from interp.model.tiny import build_tiny
from interp.pipeline.provenance import file_hash


def invoke(*args, ok=True):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert (result.exit_code == 0) is ok, result.output
    return result


def test_an_eval_corpus_is_measured_recorded_and_replayed(tmp_path):
    model = build_tiny("llama", tmp_path / "tiny-llama", n_kv_heads=2)
    task = tmp_path / "task.jsonl"
    task.write_text(
        "".join(
            json.dumps({"text": t}) + "\n"
            for t in ("The man said .", "A boat .", "They went home .")
        )
    )
    runs = tmp_path / "runs"
    run = (
        "run",
        "--model",
        model,
        "--out",
        runs,
        "--name",
        "t",
        "--quick",
        "--skip",
        "report",
        "-q",
        "--eval-corpus",
        task,
    )
    invoke(*run)
    run_dir = runs / "tiny-llama" / "t"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["options"]["stages"]["ablate"]["eval_corpus"] == str(task)
    assert (
        manifest["stages"]["ablate"]["inputs"]["files"][str(task)]
        == manifest["provenance"]["corpus_hashes"][str(task)]
    )
    effects = pd.read_parquet(run_dir / "effects.parquet")
    assert "loss_corpus" in set(effects["metric"])
    finished = manifest["stages"]["ablate"]["finished"]

    invoke(*run[:-2], "--eval-corpus", task, "--resume")  # same file: nothing to do
    assert (
        json.loads((run_dir / "manifest.json").read_text())["stages"]["ablate"]["finished"]
        == finished
    )
    task.write_text(task.read_text() + json.dumps({"text": "She said nothing ."}) + "\n")
    assert (
        "is missing or changed"
        in invoke("run", "--from-manifest", run_dir, "--out", runs, ok=False).output
    )
    invoke(*run, "--resume")  # the file changed: measured again, on the new content
    again = json.loads((run_dir / "manifest.json").read_text())["stages"]["ablate"]
    assert (
        again["inputs"]["files"][str(task)]
        == file_hash(task)
        != manifest["stages"]["ablate"]["inputs"]["files"][str(task)]
    )

    result = invoke("ablate", run_dir, "--eval-corpus", tmp_path / "nope.txt", "-q", ok=False)
    assert result.output.strip().splitlines() == [
        f"error: {tmp_path / 'nope.txt'}: corpus file not found (no such file); check the path"
    ]

"""What --resume redoes when files change under a run, what --quick leaves alone, and where user
corpora go: collect-only runs of the packaged encoder, in process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from interp.cli import main

COLLECT_ONLY = [
    "--model",
    "minilm-l6",
    "--no-builtin",
    "--skip",
    "weights",
    "--skip",
    "classify",
    "--skip",
    "ablate",
    "--skip",
    "report",
    "-q",
    "--n-syntax",
    "0",
]


def invoke(*args) -> None:
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


@pytest.fixture
def run(tmp_path):
    """A collect-only run over a user corpus; returns (run directory, corpus path, command)."""
    corpus = tmp_path / "mine.txt"
    corpus.write_text("The cat sat on the mat.\nDogs bark at night.\n")
    command = ["run", *COLLECT_ONLY, "--corpus", corpus, "--out", tmp_path / "runs", "--name", "r"]
    invoke(*command)
    return tmp_path / "runs" / "minilm-l6" / "r", corpus, command


def test_resume_skips_an_unchanged_run(run):
    run_dir, _, command = run
    first = manifest(run_dir)["stages"]["collect"]["id"]
    invoke(*command, "--resume")
    assert manifest(run_dir)["stages"]["collect"]["id"] == first


def test_resume_collects_again_when_the_corpus_content_changed(run):
    run_dir, corpus, command = run
    before = manifest(run_dir)["stages"]["collect"]
    corpus.write_text("Entirely different text now.\nAnd a second line.\nAnd a third.\n")
    invoke(*command, "--resume")
    after = manifest(run_dir)["stages"]["collect"]
    assert after["id"] != before["id"]
    assert after["inputs"]["files"][str(corpus)] != before["inputs"]["files"][str(corpus)]
    assert manifest(run_dir)["corpora"]["user:mine"]["n_sequences"] == 3


@pytest.mark.parametrize("damage", ["delete", "garbage", "wrong table"])
def test_resume_collects_again_when_a_table_is_missing_or_unreadable(run, damage):
    import pandas as pd

    run_dir, _, command = run
    before = manifest(run_dir)["stages"]["collect"]["id"]
    target = run_dir / "features.parquet"
    if damage == "delete":
        target.unlink()
    elif damage == "garbage":
        target.write_bytes(b"not parquet at all")
    else:
        pd.DataFrame({"x": [1]}).to_parquet(target)
    invoke(*command, "--resume")
    assert manifest(run_dir)["stages"]["collect"]["id"] != before
    assert len(pd.read_parquet(target)) > 0


def test_a_flag_wins_over_quick(tmp_path, monkeypatch):
    import interp.collect.stage
    from interp.pipeline.contract import StageRecord

    seen = {}
    monkeypatch.setattr(
        interp.collect.stage,
        "run_stage",
        lambda run_dir, model, config, progress: seen.update(c=config) or StageRecord(),
    )
    invoke(
        "run", *COLLECT_ONLY[:-2], "--quick", "--n-syntax", 500, "--out", tmp_path, "--name", "q"
    )
    assert (
        seen["c"].n_syntax == 500 and seen["c"].n_bootstrap == 100
    )  # the flag kept, the rest made quick
    invoke("run", *COLLECT_ONLY[:-2], "--quick", "--out", tmp_path, "--name", "q2")
    assert seen["c"].n_syntax == 300


def test_a_user_corpus_called_prose_is_its_own_suite(tmp_path):
    corpus = tmp_path / "prose.txt"
    corpus.write_text("My own first sentence.\nMy own second sentence.\n")
    invoke(
        "run",
        "--model",
        "minilm-l6",
        "--skip",
        "weights",
        "--skip",
        "classify",
        "--skip",
        "ablate",
        "--skip",
        "report",
        "-q",
        "--n-syntax",
        "0",
        "--max-sentences",
        "5",
        "--corpus",
        corpus,
        "--out",
        tmp_path / "runs",
        "--name",
        "p",
    )
    corpora = manifest(tmp_path / "runs" / "minilm-l6" / "p")["corpora"]
    assert corpora["prose"]["n_sequences"] == 5  # the shipped suite, alone
    assert corpora["user:prose"]["n_sequences"] == 2


def test_the_truncation_warning_reaches_the_user_once(tmp_path):
    corpus = tmp_path / "long.txt"
    corpus.write_text(("word " * 700 + "\n") * 2)  # 700 words: past minilm's 512-token context
    result = CliRunner().invoke(
        main, ["run", *COLLECT_ONLY, "--corpus", str(corpus), "--out", str(tmp_path / "runs")]
    )
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if not line.startswith("collect: ")]
    assert warnings == [
        "warning: 2 of 2 probe(s) of suite 'user:long' are longer than 512 tokens "
        "(the model's context, or --max-seq-len) and were truncated"
    ]

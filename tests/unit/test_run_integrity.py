"""A run directory has one owner, its stages record what they read when they start, NaN attention
is never read as a role, and every input a path names is bounded (issue 24)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from interp.errors import CorpusError, RunError
from interp.pipeline import rundir
from interp.pipeline.lock import LOCK, run_lock

ROOT = Path(__file__).resolve().parents[2]


# --- the lock ---------------------------------------------------------------------------------


def test_a_second_process_is_refused_with_the_holder_named(tmp_path):
    with run_lock(tmp_path):
        note = json.loads((tmp_path / LOCK).read_text())
        assert note["pid"] == os.getpid()
        code = (
            "import sys; from interp.pipeline.lock import run_lock\n"
            "from interp.errors import RunError\n"
            "try:\n    run_lock(sys.argv[1]).__enter__()\nexcept RunError as e:\n    print(e); sys.exit(3)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert out.returncode == 3, out.stderr
        assert f"is in use by another interp process (pid {os.getpid()} on " in out.stdout
    assert not (tmp_path / LOCK).exists()  # the holder removes it on its way out
    with run_lock(tmp_path):  # and the run can be taken again
        pass
        pass


def test_a_lock_whose_holder_died_is_free(tmp_path):
    code = "import os, sys; from interp.pipeline.lock import run_lock; held = run_lock(sys.argv[1]); held.__enter__(); os._exit(0)"
    subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        check=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert (tmp_path / LOCK).exists()  # left behind by a process that never cleaned up
    with run_lock(tmp_path):
        pass


def test_stage_commands_and_resume_take_the_lock(tmp_path):
    from interp.pipeline.execute import rerun_stage, run_pipeline
    from interp.pipeline.options import RunOptions

    run_dir = tmp_path / "m" / "r"
    run_dir.mkdir(parents=True)
    rundir.write_manifest(run_dir, {"stages": {}})
    before = sorted(p.name for p in run_dir.iterdir())
    with run_lock(run_dir):
        with pytest.raises(RunError, match="is in use by another interp process"):
            rerun_stage(run_dir, "report")
        options = RunOptions(out_dir=str(tmp_path), run_name="r", resume=True)
        with pytest.raises(RunError, match="is in use by another interp process"):
            run_pipeline(dataclass_model(options), progress=False)
    assert sorted(p.name for p in run_dir.iterdir()) == before


def dataclass_model(options):
    """The options with the model named so that its slug is the run's folder ``m``."""
    import dataclasses

    from interp.model.spec import ModelSpec

    return dataclasses.replace(options, model=ModelSpec(name="m"))


def test_a_stage_records_the_upstream_ids_it_read_at_its_start(tmp_path, monkeypatch):
    from interp.pipeline.contract import StageRecord
    from interp.pipeline.stages import stage

    run_dir = tmp_path
    rundir.write_manifest(run_dir, {"stages": {"collect": {"config": {}, "id": "old"}}})

    def concurrent_collect(run_dir, model, config, progress):  # collect reruns while classify runs
        manifest = rundir.read_manifest(run_dir)
        manifest["stages"]["collect"]["id"] = "new"
        rundir.write_manifest(run_dir, manifest)
        return StageRecord()

    st = stage("classify")
    monkeypatch.setattr(type(st), "function", lambda self: concurrent_collect)
    st.run(run_dir, None, st.config(), progress=False)
    recorded = rundir.read_manifest(run_dir)["stages"]["classify"]
    # the ids at its start: collect's old one; the other stages it reads have not run
    assert recorded["after"] == {name: "old" if name == "collect" else None for name in st.reads}
    assert not st.done(run_dir, st.config())  # what it read is stale: --resume runs it again


# --- NaN attention ----------------------------------------------------------------------------


def _nan_llama(*parts: str):
    """The tiny Llama built in Python (no load-time check) with a NaN in the weights whose name
    holds every part."""
    import torch
    from tiny_models import tiny_llama

    model = tiny_llama()
    with torch.no_grad():
        for name, param in model.bridge.named_parameters():
            if all(part in name for part in parts):
                param[0, 0] = float("nan")
    return model


def _options(tmp_path, name):
    from interp.collect.config import CollectConfig
    from interp.pipeline.options import RunOptions

    return RunOptions(
        out_dir=str(tmp_path),
        run_name=name,
        skip=("weights", "ablate", "report"),
        stages={
            "collect": CollectConfig(n_syntax=10, n_repeated=8, max_sentences=20, n_bootstrap=20)
        },
    )


def test_a_head_with_nan_attention_gets_no_role(tmp_path):
    from interp.pipeline.execute import run_pipeline

    model = _nan_llama(
        "layers.2.", "q_proj"
    )  # one query row of layer 2: its head 0 (of 4) computes NaN attention
    with pytest.warns(
        Warning, match=r"attention is NaN or infinite in 1 of 12 heads \(from layer 2 on\)"
    ):
        run_dir = run_pipeline(_options(tmp_path, "one"), model=model, progress=False)
    features = pd.read_parquet(run_dir / "features.parquet")
    lost = features[(features["layer"] == 2) & (features["head"] == 0)]
    assert (
        lost["value"].isna().all()
    )  # carried as NaN: no argmax over NaN attention reads as a score
    kept = features[
        (features["layer"] == 2) & (features["head"] == 1) & (features["feature"] == "first_token")
    ]
    assert kept["value"].notna().all()
    roles = pd.read_parquet(run_dir / "roles.parquet").set_index(["layer", "head"])
    assert roles.loc[(2, 0), "measured"] == 0 and roles.loc[(2, 0), "role"] == "unmeasured"
    assert roles.loc[(2, 0), "unmeasured"].split()[:2] == [
        "previous_token",
        "current_token",
    ]  # every input
    assert np.isnan(roles.loc[(2, 0), "confidence"]) and np.isnan(roles.loc[(2, 0), "stability"])
    assert roles.filter(like="score_").loc[(2, 0)].isna().all()
    assert (roles.drop(index=(2, 0))["measured"] == 1).all() and roles.drop(index=(2, 0))[
        "confidence"
    ].notna().all()


def test_a_model_whose_attention_is_mostly_nan_stops_at_collect(tmp_path):
    from interp.pipeline.execute import run_pipeline

    model = _nan_llama("embed_tokens")
    with pytest.raises(
        RunError, match=r"attention is NaN or infinite in 12 of 12 heads .*nothing can be measured"
    ):
        run_pipeline(_options(tmp_path, "all"), model=model, progress=False)
    assert not any(tmp_path.iterdir())  # no table, no run folder


def test_a_model_whose_output_is_nan_stops_at_ablate_and_keeps_what_finished(tmp_path):
    import dataclasses

    from interp.ablate.config import AblateConfig
    from interp.pipeline.execute import run_pipeline

    options = _options(tmp_path, "ablate")
    options = dataclasses.replace(
        options, skip=("report",), stages={**options.stages, "ablate": AblateConfig().for_quick()}
    )
    model = _nan_llama("layers.2.", "q_proj")  # one head's NaN attention makes every output NaN
    with (
        pytest.warns(Warning, match="attention is NaN"),
        pytest.raises(RunError, match="output is NaN or infinite on the evaluation corpus"),
    ):
        run_pipeline(options, model=model, progress=False)
    run = tmp_path / "tiny-llama" / "ablate"
    assert set(rundir.read_manifest(run)["stages"]) == {"collect", "weights"}
    assert not (run / "effects.parquet").exists()


# --- bounded inputs ---------------------------------------------------------------------------


def test_a_10000_word_conllu_sentence_validates_in_under_5_s(tmp_path):
    from interp.probes.readers import read_corpus

    n = 10_000
    rows = [f"{i}\tw{i}\tw\tX\t_\t_\t{i + 1 if i < n else 0}\tdep\t_\t_" for i in range(1, n + 1)]
    path = tmp_path / "long.conllu"
    path.write_text("\n".join(rows) + "\n")
    start = time.perf_counter()
    [sentence] = read_corpus(path)
    assert len(sentence.arcs) == n - 1 and time.perf_counter() - start < 5
    # ... and a cycle through all but the root, found as fast
    rows = [f"{i}\tw{i}\tw\tX\t_\t_\t{i % (n - 1) + 1}\tdep\t_\t_" for i in range(1, n)]
    path.write_text("\n".join([*rows, f"{n}\troot\tr\tX\t_\t_\t0\troot\t_\t_"]) + "\n")
    start = time.perf_counter()
    with pytest.raises(CorpusError, match="is in a cycle of HEADs"):
        read_corpus(path)
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize(
    "content, lines",
    [
        (b"one\rtwo\rthree\r", ["one", "two", "three"]),
        (b"one\r\ntwo\n\nthree", ["one", "two", "three"]),
        ("caf\u00e9 one\r\ntwo\n".encode("utf-16"), ["caf\u00e9 one", "two"]),
        (b"\xfe\xff" + "x\ny".encode("utf-16-be"), ["x", "y"]),
    ],
)
def test_text_in_any_line_ending_and_utf16_with_its_mark_is_read(tmp_path, content, lines):
    from interp.probes.readers import read_corpus

    path = tmp_path / "c.txt"
    path.write_bytes(content)
    assert [s.text for s in read_corpus(path)] == lines


def test_a_cr_only_file_longer_than_a_line_streams(tmp_path):
    from interp.probes.readers import read_corpus

    path = tmp_path / "mac.txt"
    path.write_bytes(b"a sentence of old Mac text\r" * 20_000)  # 540 kB without one \n
    sentences = read_corpus(path)
    assert len(sentences) == 20_000 and sentences[-1].source == f"{path}:20000"


def test_file_hashes_refuse_what_is_not_a_regular_file(tmp_path):
    from interp.pipeline.provenance import file_hash

    os.mkfifo(tmp_path / "fifo")
    for path in (tmp_path / "fifo", Path("/dev/zero")):
        with pytest.raises(OSError, match="not a regular file"):
            file_hash(path)


def test_a_reference_model_that_is_a_fifo_is_refused(tmp_path):
    from interp.classify.reference.fit import load_classifier

    os.mkfifo(tmp_path / "model.json")
    with pytest.raises(RunError, match="is not a classifier model \\(not a regular file\\)"):
        load_classifier(tmp_path / "model.json")


@pytest.mark.skipif(sys.platform != "linux", reason="the platform's cache folder: Linux's here")
def test_every_cache_lives_under_one_folder(monkeypatch, tmp_path):
    from interp.model.cache import cache_root
    from interp.synthetic import cache, toy, trained

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    for empty in ("", "  "):  # an empty INTERP_CACHE is the default folder, never the current one
        monkeypatch.setenv("INTERP_CACHE", empty)
        assert cache_root() == tmp_path / ".cache" / "interp"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "interp"
    monkeypatch.setenv("INTERP_CACHE", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"
    for made in (cache.default_cache_root(), toy.default_cache_dir(), trained.cache_dir("t", 0)):
        assert made.is_relative_to(tmp_path / "mine")


def test_a_fifo_reference_fails_before_the_model_loads(tmp_path):
    from click.testing import CliRunner

    from interp.cli import main

    fifo = tmp_path / "model.json"
    os.mkfifo(fifo)
    result = CliRunner().invoke(
        main,
        [
            "run",
            "--model",
            str(tmp_path / "no-such-model"),
            "--out",
            str(tmp_path / "runs"),
            "--classify-reference",
            str(fifo),
        ],
    )
    assert (
        result.exit_code == 1 and "is not a classifier model (not a regular file)" in result.output
    )
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("manifest.json"))


# --- NaN on some sequences only ------------------------------------------------------------------


def test_an_ablation_nan_on_some_sequences_is_refused_naming_the_head():
    """NaN read as "not measured": the effect silently rested on the other sequences."""
    import torch

    from interp.ablate.metrics import PerSeq
    from interp.ablate.stats import SumStore, effects_from_sums

    def per(index, num):
        num = torch.tensor(num, dtype=torch.float64)
        return PerSeq(torch.tensor(index), num, torch.ones_like(num))

    store = SumStore({"loss_prose": 4})
    store.add_base({"loss_prose": per([0, 1, 2, 3], [1.0, 2.0, 3.0, 4.0])})
    store.add(("zero", 0, 1), {"loss_prose": per([0, 1, 2, 3], [1.5, 2.5, 3.5, 4.5])})
    assert len(effects_from_sums(store, "exact", 20, 0)) == 1
    store.add(("zero", 2, 3), {"loss_prose": per([0, 1], [1.5, float("nan")])})
    store.add(("zero", 2, 3), {"loss_prose": per([2, 3], [float("inf"), 4.5])})
    shard = SumStore({"loss_prose": 4}).merge(store)  # the mark survives a merge
    for s in (store, shard):
        with pytest.raises(
            RunError,
            match=r"exact effect of L2H3 \(zero ablation\) on loss_prose "
            r"is NaN or infinite on 2 of 4 sequences",
        ):
            effects_from_sums(s, "exact", 20, 0)


def test_a_head_whose_ablation_is_nan_on_one_batch_stops_the_stage(monkeypatch):
    from tiny_models import tiny_llama

    from interp.ablate import sweep
    from interp.ablate.config import AblateConfig
    from interp.ablate.stage import ablate

    def poisoned(kind, heads, batch, *args, **kwargs):
        """L1H2's mean ablation, NaN on the first sequence of the prose batch only."""
        edits = real(kind, heads, batch, *args, **kwargs)
        if heads != [(1, 2)] or batch.eval_set != "loss_prose":
            return edits
        n, pos = batch.tokens.shape
        out = []
        for e in edits:
            value = e.value.expand(n, pos, e.value.shape[-1]).clone()
            value[0] = float("nan")
            out.append(e.__class__(e.layer, e.head, value, e.replica))
        return out

    real = sweep.edits_for
    monkeypatch.setattr(sweep, "edits_for", poisoned)
    config = AblateConfig(
        ablations=("mean",),
        n_prose=4,
        n_repeated=0,
        n_syntax=0,
        attribution=False,
        prune=False,
        max_rounds=1,
        max_tokens_per_batch=64,
        threads=1,
    )
    with pytest.raises(
        RunError, match=r"L1H2 \(mean ablation\) on loss_prose is NaN or infinite on [123] of 4 "
    ):
        ablate(tiny_llama(), config, progress=False)

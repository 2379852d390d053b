"""Collection and the exact sweep on Ray workers, on a Ray cluster started inside the test: the same
tables as the local executor, also when a worker dies mid-stage, and a resume that does not redo
the stage."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import ray
from click.testing import CliRunner

from interp.cli import main
from interp.executors import ray_workers

# ablate alone, every head exactly, one thread (the local and the Ray runs alike: see ray_workers)
# one sweep of every head (--max-rounds 1), so that the manifest lists one sweep's shards
ABLATE_ONLY = (
    "--skip",
    "collect",
    "--skip",
    "weights",
    "--skip",
    "classify",
    "--skip",
    "report",
    "--ablate-n-syntax",
    6,
    "--ablate-n-prose",
    3,
    "--ablate-n-repeated",
    3,
    "--n-bootstrap",
    100,
    "--ablate-threads",
    1,
    "--max-rounds",
    1,
    "-q",
)


@pytest.fixture(scope="module")
def cluster(ray_to_itself):
    ray.init(
        num_cpus=2, include_dashboard=False, object_store_memory=100 * 2**20, log_to_driver=False
    )
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from tiny_models import save_tiny_llama

    return save_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="module")
def local_run(model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    invoke("run", "--model", model_dir, "--out", out, "--name", "local", *ABLATE_ONLY)
    return out / model_dir.name / "local"


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def ablate_record(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())["stages"]["ablate"]


def assert_same_tables(a: Path, b: Path) -> None:
    for table in ("effects", "pruning"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(a / f"{table}.parquet"),
            pd.read_parquet(b / f"{table}.parquet"),
            check_exact=True,
            obj=table,
        )


def test_ray_workers_give_the_local_tables_and_a_resume_keeps_them(cluster, model_dir, local_run):
    out = local_run.parents[1]
    invoke(
        "run",
        "--model",
        model_dir,
        "--out",
        out,
        "--name",
        "ray",
        *ABLATE_ONLY,
        "--executor",
        "ray",
        "--address",
        "auto",
        "--workers",
        2,
    )
    run_dir = out / model_dir.name / "ray"
    assert_same_tables(local_run, run_dir)
    record = ablate_record(run_dir)
    sweep = record["executor"]
    assert (sweep["executor"], sweep["workers"], sweep["retried"]) == ("ray", 2, [])
    shards = sweep["shards"]
    # 2 shards per worker wanted, 3 layers: the costliest (the first) is shared out in two
    assert sorted((s["shard"], tuple(s["layers"])) for s in shards) == [
        (0, (0,)),
        (1, (0,)),
        (2, (1,)),
        (3, (2,)),
    ]
    assert all(
        s["seconds"] > 0 and s["worker"] in ("w0", "w1") and s["attempts"] == 1 for s in shards
    )
    assert (
        record["config"]["executor"] == "ray"
        and ablate_record(local_run)["executor"]["executor"] == "local"
    )

    # where the sweep ran is placement, not a setting of the measurement: a resume without Ray keeps it
    invoke("run", "--model", model_dir, "--out", out, "--name", "ray", *ABLATE_ONLY, "--resume")
    assert ablate_record(run_dir)["id"] == record["id"]


def test_a_worker_dying_mid_sweep_has_its_shard_retried(cluster, local_run, monkeypatch, tmp_path):
    import shutil

    run_dir = tmp_path / "again"
    shutil.copytree(local_run, run_dir)
    monkeypatch.setattr(ray_workers, "DIE_ON_FIRST_TRY", frozenset({0}))
    invoke("ablate", run_dir, "--executor", "ray", "--workers", 2, "-q")
    assert_same_tables(local_run, run_dir)
    sweep = ablate_record(run_dir)["executor"]
    assert [(r["shard"], r["attempt"]) for r in sweep["retried"]] == [(0, 1)]
    attempts = {s["shard"]: s["attempts"] for s in sweep["shards"]}
    assert (
        attempts == {0: 2, 1: 1, 2: 1, 3: 1} and len(sweep["shards"]) == 4
    )  # every shard once, shard 0 retried
    died = sweep["retried"][0]["worker"]
    assert next(s["worker"] for s in sweep["shards"] if s["shard"] == 0) != died
    assert sweep["workers_started"] == 3  # the dead worker was replaced


def test_a_model_built_in_python_is_refused_in_one_line():
    from tiny_models import tiny_llama

    from interp.ablate.stage import AblateConfig, ablate
    from interp.errors import ConfigError

    config = AblateConfig(
        executor="ray",
        n_prose=2,
        n_repeated=0,
        n_syntax=0,
        attribution=False,
        prune=False,
        threads=1,
    )
    with pytest.raises(ConfigError, match="a model built in Python has none"):
        ablate(tiny_llama(), config, progress=False)


# collect alone, in shards of about 8 sequences (the stage's cut is monkeypatched), one thread
COLLECT_ONLY = (
    "--skip",
    "classify",
    "--skip",
    "ablate",
    "--skip",
    "report",
    "--n-syntax",
    24,
    "--n-repeated",
    12,
    "--max-sentences",
    12,
    "--n-bootstrap",
    20,
    "--max-tokens-per-batch",
    96,
    "--threads",
    1,
    "-q",
)


def collect_record(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())["stages"]["collect"]


def test_collection_on_ray_workers_equals_local_and_a_dead_workers_shard_is_retried(
    cluster, model_dir, tmp_path, monkeypatch
):
    import numpy as np

    from interp.collect import shards, stage

    monkeypatch.setattr(stage, "partition", lambda groups: shards.partition(groups, 8))
    monkeypatch.setattr(ray_workers, "DIE_ON_FIRST_TRY", frozenset({1}))
    invoke("run", "--model", model_dir, "--out", tmp_path, "--name", "local", *COLLECT_ONLY)
    invoke(
        "run",
        "--model",
        model_dir,
        "--out",
        tmp_path,
        "--name",
        "ray",
        *COLLECT_ONLY,
        "--executor",
        "ray",
        "--workers",
        2,
    )
    local, on_ray = tmp_path / model_dir.name / "local", tmp_path / model_dir.name / "ray"
    for table in ("features", "syntax", "sinks"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(local / f"{table}.parquet"),
            pd.read_parquet(on_ray / f"{table}.parquet"),
            check_exact=True,
            obj=table,
        )
    for archive in ("feature_replicates.npz", "exemplars.npz"):
        with np.load(local / archive) as a, np.load(on_ray / archive) as b:
            assert a.files == b.files
            for key in a.files:
                np.testing.assert_array_equal(a[key], b[key], err_msg=f"{archive}: {key}")

    placed = collect_record(on_ray)["executor"]
    n_shards = len(collect_record(local)["executor"]["shards"])
    assert n_shards >= 4 and placed["workers"] == 2
    assert [(r["shard"], r["attempt"]) for r in placed["retried"]] == [(1, 1)]
    attempts = {s["shard"]: s["attempts"] for s in placed["shards"]}
    assert attempts == {i: 2 if i == 1 else 1 for i in range(n_shards)}  # every shard once
    assert placed["workers_started"] == 3  # the dead worker was replaced
    assert sum(s["sequences"] for s in placed["shards"]) == sum(
        s["sequences"] for s in collect_record(local)["executor"]["shards"]
    )
    assert collect_record(on_ray)["threads"] == collect_record(local)["threads"] == 1

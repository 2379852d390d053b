"""The experiments' shared helpers and measures, on hand-built inputs with exact answers."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from analyses.__main__ import main, stale, why_stale
from analyses._common import (
    EXPERIMENTS,
    dependency_versions,
    depends_on,
    features_version,
    md,
    mean_ci,
    pm,
)
from analyses.specialisation import appearance, named_overlap, overlap


def roles(layer_roles: dict[int, list[str]], **extra) -> pd.DataFrame:
    rows = [
        {"layer": layer, "head": h, "role": r, **extra}
        for layer, rs in layer_roles.items()
        for h, r in enumerate(rs)
    ]
    return pd.DataFrame(rows)


def test_mean_ci_matches_the_t_interval():
    frame = pd.DataFrame({"g": ["a"] * 3 + ["b"], "x": [1.0, 2.0, 3.0, 5.0]})
    out = mean_ci(frame, ["g"], "x").set_index("g")
    assert out.loc["a", "mean"] == 2.0 and out.loc["a", "sd"] == 1.0 and out.loc["a", "n"] == 3
    half = 4.302652729911275 / math.sqrt(3)  # t(0.975, df=2) * sd / sqrt(n)
    assert out.loc["a", "ci_low"] == pytest.approx(2.0 - half) and out.loc[
        "a", "ci_high"
    ] == pytest.approx(2.0 + half)
    assert math.isnan(out.loc["b", "ci_low"])  # one value: no interval
    assert pm(2.0, float("nan"), float("nan")) == "2.000"


def test_md_table():
    assert (
        md(pd.DataFrame({"a": [1, 2], "b": [0.5, float("nan")]}), 2)
        == "| a | b |\n|---|---|\n| 1 | 0.50 |\n| 2 |  |"
    )


def test_overlap_matches_heads_within_layers():
    a = roles({0: ["induction", "broad"], 1: ["syntactic", "unexplained"]})
    b = roles({0: ["broad", "induction"], 1: ["induction", "unexplained"]})
    assert overlap(a, b) == 3 / 4  # head order inside a layer does not matter
    assert overlap(a, a) == 1.0
    # named roles only: a has induction, syntactic; b has induction twice; one matched pair
    assert named_overlap(a, b) == 2 * 1 / (2 + 2)
    swapped = roles({0: ["syntactic", "broad"], 1: ["induction", "unexplained"]})
    assert named_overlap(a, swapped) == 0.0  # same roles in the other layers do not count
    assert math.isnan(named_overlap(roles({0: ["broad"]}), roles({0: ["unexplained"]})))


def test_appearance_first_and_settled_steps():
    frames = [
        roles({0: r}, seed=0, step=s)
        for s, r in (
            (0, ["broad", "broad"]),
            (100, ["induction", "broad"]),
            (200, ["broad", "broad"]),
            (300, ["induction", "local"]),
            (400, ["induction", "local"]),
        )
    ]
    out = appearance(pd.concat(frames, ignore_index=True)).set_index("role")
    assert out.loc["induction", "first_step"] == 100 and out.loc["induction", "settled_step"] == 300
    assert out.loc["local", "first_step"] == 300 and out.loc["local", "settled_step"] == 300
    assert out.loc["induction", "heads_at_end"] == 1


def write_up(folder, name: str, **data) -> None:
    """A write-up ``name.md`` and the data file beside it (``name.json``) with these fields."""
    (folder / f"{name}.md").write_text(
        f"# Title\n\n**Answer.** yes\n\n- Command: `python -m analyses.{name}`\n"
    )
    (folder / f"{name}.json").write_text(
        json.dumps({"name": name, "title": "Title", "answer": "yes", **data})
    )


def test_features_version_is_read_from_the_write_ups_data(tmp_path):
    write_up(tmp_path, "a", features_version=7)
    write_up(tmp_path, "b")
    assert features_version(tmp_path / "a.md") == 7
    assert features_version(tmp_path / "b.md") is None  # recorded none
    assert features_version(tmp_path / "c.md") is None  # no write-up at all
    (tmp_path / "a.md").write_text("- Code: interp 0123456789ab, features version 12\n")
    assert features_version(tmp_path / "a.md") == 7, "the data file, never the markdown"


def test_stale_compares_every_version_a_write_up_depends_on(tmp_path):
    now = dependency_versions()
    for name in EXPERIMENTS:
        write_up(tmp_path, name, **now)
    assert stale(tmp_path) == []
    write_up(
        tmp_path, "specialisation", **(now | {"features_version": now["features_version"] - 1})
    )
    write_up(tmp_path, "split_cost", **(now | {"features_version": now["features_version"] - 1}))
    (tmp_path / "head_count.md").unlink()
    # split_cost labels no heads, so its features version does not matter
    assert stale(tmp_path) == ["specialisation", "head_count"]
    (
        tmp_path / "concat_mixing.json"
    ).unlink()  # a write-up without its data: labels of unknown origin
    assert stale(tmp_path) == ["specialisation", "concat_mixing", "head_count"]
    assert stale(tmp_path / "nothing") == list(EXPERIMENTS)


def test_stale_notices_a_new_reference_bank_and_another_default_ablation(tmp_path):
    now = dependency_versions()
    for name in EXPERIMENTS:
        write_up(tmp_path, name, **now)
    write_up(tmp_path, "concat_mixing", **(now | {"reference_version": "0.9.0"}))
    write_up(
        tmp_path, "pruning", **{k: v for k, v in now.items() if k != "ablation"}
    )  # from before it was recorded
    write_up(
        tmp_path, "one_head", **(now | {"ablation": "resample"})
    )  # ablates nothing with the defaults
    assert stale(tmp_path) == ["concat_mixing", "pruning"]
    assert why_stale(tmp_path, "concat_mixing") == [
        f"reference_version 0.9.0, now {now['reference_version']}"
    ]
    assert why_stale(tmp_path, "pruning") == [f"ablation not recorded, now {now['ablation']}"]
    assert depends_on("pruning") == ("ablation",) and depends_on("split_cost") == ()


def test_the_runner_refuses_an_unknown_experiment(capsys):
    with pytest.raises(SystemExit):
        main(["specialisation", "nope"])
    assert "unknown experiment(s) nope" in capsys.readouterr().err


def test_readme_intro_sums_the_run_times_and_quotes_the_quick_suite(tmp_path):
    from analyses.readme import quick_time, total_time

    results = tmp_path / "results"
    results.mkdir()
    for i, name in enumerate(EXPERIMENTS):
        write_up(results, name, run_seconds=60 * i + 30)
    assert (
        total_time(results) == " (18 min in their last full runs)"
    )  # 30 + 90 + ... + 330 = 1080 s
    (results / "pruning.json").unlink()
    assert total_time(results) == ""
    assert quick_time(tmp_path) == ""
    (tmp_path / "benchmarks" / "sections").mkdir(parents=True)
    (tmp_path / "benchmarks" / "sections" / "analyses-quick.md").write_text(
        "3.4 min in all: within the CI budget of 8 min.\n"
    )
    assert quick_time(tmp_path) == (
        " All six `--quick` modes together, as the CI test runs them: 3.4 min "
        "(budget 8 min; `benchmarks/analyses_quick.py`)."
    )

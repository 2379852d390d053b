"""The experiments' shared helpers and measures, on hand-built inputs with exact answers."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from analyses.__main__ import main, stale
from analyses._common import EXPERIMENTS, features_version, md, mean_ci, pm
from analyses.specialisation import appearance, named_overlap, overlap


def roles(layer_roles: dict[int, list[str]], **extra) -> pd.DataFrame:
    rows = [{"layer": layer, "head": h, "role": r, **extra} for layer, rs in layer_roles.items() for h, r in enumerate(rs)]
    return pd.DataFrame(rows)


def test_mean_ci_matches_the_t_interval():
    frame = pd.DataFrame({"g": ["a"] * 3 + ["b"], "x": [1.0, 2.0, 3.0, 5.0]})
    out = mean_ci(frame, ["g"], "x").set_index("g")
    assert out.loc["a", "mean"] == 2.0 and out.loc["a", "sd"] == 1.0 and out.loc["a", "n"] == 3
    half = 4.302652729911275 / math.sqrt(3)  # t(0.975, df=2) * sd / sqrt(n)
    assert out.loc["a", "ci_low"] == pytest.approx(2.0 - half) and out.loc["a", "ci_high"] == pytest.approx(2.0 + half)
    assert math.isnan(out.loc["b", "ci_low"])  # one value: no interval
    assert pm(2.0, float("nan"), float("nan")) == "2.000"


def test_md_table():
    assert md(pd.DataFrame({"a": [1, 2], "b": [0.5, float("nan")]}), 2) == "| a | b |\n|---|---|\n| 1 | 0.50 |\n| 2 |  |"


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
    frames = [roles({0: r}, seed=0, step=s) for s, r in
              ((0, ["broad", "broad"]), (100, ["induction", "broad"]), (200, ["broad", "broad"]),
               (300, ["induction", "local"]), (400, ["induction", "local"]))]
    out = appearance(pd.concat(frames, ignore_index=True)).set_index("role")
    assert out.loc["induction", "first_step"] == 100 and out.loc["induction", "settled_step"] == 300
    assert out.loc["local", "first_step"] == 300 and out.loc["local", "settled_step"] == 300
    assert out.loc["induction", "heads_at_end"] == 1


def write_up(code_line: str) -> str:
    return f"# Title\n\n**Answer.** yes\n\n- Command: `python -m analyses.x`\n{code_line}- Seeds: 0\n"


def test_features_version_is_read_from_the_code_line():
    assert features_version(write_up("- Code: interp 0123456789ab, features version 7\n")) == 7
    assert features_version(write_up("- Code: interp 0123456789ab + uncommitted changes, features version 12\n")) == 12
    assert features_version(write_up("")) is None


def test_stale_lists_missing_write_ups_and_labels_from_another_classifier(tmp_path):
    from interp.collect.config import FEATURES_VERSION

    current = write_up(f"- Code: interp 0123456789ab, features version {FEATURES_VERSION}\n")
    older = write_up(f"- Code: interp 0123456789ab, features version {FEATURES_VERSION - 1}\n")
    for name in EXPERIMENTS:
        (tmp_path / f"{name}.md").write_text(older if name in ("specialisation", "split_cost") else current)
    (tmp_path / "head_count.md").unlink()
    # split_cost labels no heads, so its features version does not matter
    assert stale(tmp_path) == ["specialisation", "head_count"]
    assert stale(tmp_path / "nothing") == list(EXPERIMENTS)


def test_the_runner_refuses_an_unknown_experiment(capsys):
    with pytest.raises(SystemExit):
        main(["specialisation", "nope"])
    assert "unknown experiment(s) nope" in capsys.readouterr().err


def test_readme_intro_sums_the_run_times_and_quotes_the_quick_suite(tmp_path):
    from analyses.readme import quick_time, total_time

    results = tmp_path / "results"
    results.mkdir()
    for i, name in enumerate(EXPERIMENTS):
        (results / f"{name}.md").write_text(f"# T\n\n- Run time: 1.0 min ({60 * i + 30} s) on a machine\n")
    assert total_time(results) == " (18 min in their last full runs)"  # 30 + 90 + ... + 330 = 1080 s
    (results / "pruning.md").unlink()
    assert total_time(results) == ""
    assert quick_time(tmp_path) == ""
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "RESULTS.md").write_text("3.4 min in all: within the CI budget of 8 min.\n")
    assert quick_time(tmp_path) == (" All six `--quick` modes together, as the CI test runs them: 3.4 min "
                                    "(budget 8 min; `benchmarks/analyses_quick.py`).")

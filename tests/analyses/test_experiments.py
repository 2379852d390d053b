"""Every experiment's --quick mode runs and writes what its write-up promises (shapes, not conclusions).

The six run once, through ``python -m analyses --quick`` (each as its own process, in order), into
a temporary results folder and a temporary model cache (the later ones load models the earlier
ones trained, as in the full runs); benchmarks/analyses_quick.py times the same run (the "analyses
--quick" section of benchmarks/RESULTS.md: it must stay under 8 minutes on 2 cores).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analyses._common import EXPERIMENTS as ORDER
from analyses._common import features_version

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = (
    "**Claim.**",
    "**Answer.**",
    "- Command:",
    "- Run time:",
    "- Code:",
    "- Seeds:",
    "## Setup",
    "## Figures",
    "## Reading",
)
# experiment -> {table: columns it must have}, figures
EXPECTED = {
    "specialisation": (
        {
            "roles": {"seed", "step", "layer", "head", "role", "confidence", "stability"},
            "evals": {"seed", "step", "loss", "acc_repeat", "foil_acc"},
            "appearance": {"seed", "role", "first_step", "settled_step", "heads_at_end"},
            "agreement": {
                "step",
                "seed_a",
                "seed_b",
                "overlap",
                "chance",
                "named_overlap",
                "named_chance",
            },
        },
        ("roles_over_training", "task_over_training", "agreement_over_training"),
    ),
    "one_head": (
        {
            "models": {
                "n_heads",
                "d_head",
                "seed",
                "loss",
                "lemma_acc",
                "number_acc",
                "mean_entropy_norm",
                "solved",
            },
            "heads": {
                "n_heads",
                "seed",
                "head",
                "mass_cue",
                "mass_subject",
                "mass_bos",
                "entropy",
                "entropy_norm",
            },
            "summary": {"n_heads", "lemma_acc_mean", "number_acc_mean", "seeds_solved"},
        },
        ("accuracy_and_allocation", "entropy"),
    ),
    "split_cost": (
        {
            "counts": {
                "d_model",
                "n_heads",
                "d_head",
                "params_attention",
                "flops_per_token",
                "flops_formula_total",
                "pattern_entries_per_token",
            },
            "timings": {"d_model", "n_heads", "implementation", "repeat", "seconds"},
            "timing_summary": {
                "d_model",
                "n_heads",
                "implementation",
                "ms_q1",
                "ms_median",
                "ms_q3",
            },
        },
        ("cost_vs_heads",),
    ),
    "concat_mixing": (
        {
            "evals": {"arm", "seed", "step", "loss", "acc_repeat", "foil_acc"},
            "roles": {"arm", "seed", "layer", "head", "role"},
            "lifts": {"arm", "seed", "layer", "head", "induction", "previous_token", "sink_mass"},
            "paired": {"metric", "learned", "fixed", "diff_mean", "diff_ci_low", "diff_ci_high"},
        },
        ("training", "head_features"),
    ),
    "head_count": (
        {
            "models": {
                "n_heads",
                "d_head",
                "seed",
                "loss",
                "acc_repeat",
                "foil_acc",
                "ms_per_step",
            },
            "summary": {
                "n_heads",
                "d_head",
                "mean",
                "ci_low",
                "ci_high",
                "p_vs_best",
                "worse_than_best",
            },
            "parts": {"n_heads", "metric", "mean", "ci_low", "ci_high"},
        },
        ("loss_vs_heads",),
    ),
    "pruning": (
        {
            "pruning": {"model", "family", "fraction_removed", "heads_removed", "metric", "value"},
            "removable": {
                "model",
                "family",
                "n_heads_total",
                "metric",
                "tolerance",
                "share",
                "heads",
            },
            "timings": {"model", "seconds"},
        },
        ("pruning_curves",),
    ),
}


def run(module: str, out: Path, cache: Path, *extra: str) -> str:
    """``python -m module --quick`` into ``out`` with the model cache ``cache``; returns its stdout."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-m", module, "--quick", "--out", str(out), "--cache", str(cache), *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"{module} failed:\n{done.stdout[-1000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory) -> tuple[Path, Path]:
    """(results folder, model cache) of one ``python -m analyses --quick``."""
    out, cache = tmp_path_factory.mktemp("results"), tmp_path_factory.mktemp("cache")
    printed = run("analyses", out, cache)
    assert f"{len(ORDER)} experiment(s) in" in printed
    return out, cache


@pytest.fixture(scope="module")
def results(quick_run) -> Path:
    return quick_run[0]


# Tables whose rows are the finding itself: a quick run's barely trained models may name no role.
MAY_BE_EMPTY = {"appearance"}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", ORDER)
def test_quick_mode_writes_its_tables_figures_and_write_up(results, name):
    tables, figures = EXPECTED[name]
    folder = results / name
    for table, columns in tables.items():
        frame = pd.read_csv(folder / f"{table}.csv")
        assert len(frame) > 0 or table in MAY_BE_EMPTY, table
        assert columns <= set(frame.columns), (table, columns - set(frame.columns))
    text = (results / f"{name}.md").read_text()
    for heading in SECTIONS:
        assert heading in text, heading
    assert "quick mode" in text and "--quick" in text
    for figure in figures:
        png = folder / f"{figure}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", figure
        assert f"]({name}/{figure}.png)" in text, figure
    assert "nan" not in text.split("**Answer.**")[1].split("\n")[0].lower()
    assert features_version(results / f"{name}.md") is not None


def test_the_experiments_section_is_generated_from_the_write_ups(results):
    from analyses.readme import section

    body = section(results, ROOT, ROOT)
    claims = [line for line in body.splitlines() if line.startswith("- **")]
    assert len(claims) == len(ORDER)
    for name, line in zip(ORDER, claims):
        answer = (results / f"{name}.md").read_text().split("**Answer.** ")[1].split("\n")[0]
        assert line.endswith(answer) and f"{name}.md)" in line


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_pruning_quick_with_smollm2(quick_run, tmp_path):
    # the quick run's cache: its trained models are reused, not trained again
    run("analyses.pruning", tmp_path / "out", quick_run[1], "--smollm")
    removable = pd.read_csv(tmp_path / "out" / "pruning" / "removable.csv")
    smollm = removable[removable["family"] == "smollm2"]
    assert set(smollm["metric"]) == {"loss_prose"} and (smollm["n_heads_total"] == 270).all()
    assert (
        "SmolLM2-135M"
        in (tmp_path / "out" / "pruning.md").read_text().split("**Answer.**")[1].split("\n")[0]
    )

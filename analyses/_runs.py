"""The runs the sink analyses make, kept under ``reports/analyses/<model>/`` so a rerun only re-reads.

- :func:`current`: features (default probe suites, ``CollectConfig()``) and roles on this code;
- :func:`before_sinks`: the roles the toolkit gave the same heads at ``PRE_SINK_COMMIT`` (the
  last commit before features version 3), by running that commit's own code on the same probes
  in a subprocess (``git archive`` of ``interp/`` into a temporary folder);
- :func:`exact_effects`: every head ablated exactly, zero and sink ablation, on the ablate
  stage's default evaluation corpus (``AblateConfig()``), with bootstrap intervals.

Delete the folder (or pass ``--fresh`` to a script) to make them again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "reports" / "analyses"
PRE_SINK_COMMIT = "0c6a858"
MODELS = ("smollm2-135m", "minilm-l6")
# These analyses run as scripts (python analyses/NAME.py): the results helpers are in benchmarks/.
sys.path.insert(0, str(ROOT / "benchmarks"))
from _results import regenerate, write_section  # noqa: E402,F401  (regenerate: for packaged.py)

RESULTS = ROOT / "analyses" / "RESULTS.md"
HEADER = "# Analyses\n\nEach section is written by the script it names; rerun the script to refresh it.\n"


def write(name: str, script: str, body: str) -> None:
    """Write one section of analyses/RESULTS.md."""
    write_section(name, script, body, RESULTS, HEADER)


def md(frame: pd.DataFrame, digits: int = 3) -> str:
    """A DataFrame as a markdown table (floats rounded, NaN as "-")."""

    def cell(v) -> str:
        if isinstance(v, (float, np.floating)):
            return "-" if np.isnan(v) else f"{v:.{digits}f}"
        return str(v)

    head = [str(c) for c in frame.columns]
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + rows)


def folder(name: str) -> Path:
    path = CACHE / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def current(name: str, model=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(features, roles) of the model on this code's default probes."""
    from interp import CollectConfig
    from interp.classify.stage import classify
    from interp.collect.stage import collect
    from interp.model.load import load_model

    here = folder(name)
    if not (here / "features.csv").exists():
        result = collect(model or load_model(name), CollectConfig(), progress=False)
        result.features.to_csv(here / "features.csv", index=False)
        np.savez_compressed(
            here / "replicates.npz",
            values=result.replicates.astype(np.float32),
            names=np.array(result.names),
        )
    features = pd.read_csv(here / "features.csv")
    with np.load(here / "replicates.npz", allow_pickle=False) as data:
        roles = classify(features, data["values"], [str(n) for n in data["names"]]).roles
    return features, roles


_OLD_RUN = """
import sys
import interp
assert interp.__path__[0].startswith(sys.argv[3]), interp.__path__
from interp.classify.stage import classify
from interp.collect.stage import collect
from interp import CollectConfig
from interp.model.load import load_model
result = collect(load_model(sys.argv[1]), CollectConfig(), progress=False)
classify(result.features, result.replicates, result.names).roles.to_csv(sys.argv[2], index=False)
"""


def before_sinks(name: str, commit: str = PRE_SINK_COMMIT) -> pd.DataFrame:
    """The roles table the toolkit at ``commit`` gives the model (same default probes)."""
    target = folder(name) / f"roles_{commit}.csv"
    if not target.exists():
        with tempfile.TemporaryDirectory() as tmp:
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", commit, "interp"],
                check=True,
                capture_output=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            # run from the archive: ``python -c`` puts the working directory first on sys.path
            subprocess.run(
                [sys.executable, "-c", _OLD_RUN, name, str(target), tmp],
                check=True,
                cwd=tmp,
                env={**os.environ, "PYTHONPATH": tmp},
            )
    return pd.read_csv(target, keep_default_na=False, na_values={"second_role": [""]})


def exact_effects(name: str, model=None) -> pd.DataFrame:
    """Exact zero and sink ablation effects of every head (the effects table's columns)."""
    target = folder(name) / "effects.csv"
    if not target.exists():
        _exact_effects(model or _load(name)).to_csv(target, index=False)
    return pd.read_csv(target)


def _load(name: str):
    from interp.model.load import load_model

    return load_model(name)


def _exact_effects(model) -> pd.DataFrame:
    from interp import AblateConfig
    from interp.ablate.config import CPU_TOKENS_PER_PASS
    from interp.ablate.evaluation import build_corpus
    from interp.ablate.forward import Ablator
    from interp.ablate.metrics import metric_sizes
    from interp.ablate.stats import SumStore, effects_from_sums
    from interp.ablate.sweep import exact_sweep
    from interp.ablate.values import SINK
    from interp.executors.threads import choose_threads, stage_threads

    cfg = AblateConfig(max_tokens_per_batch=CPU_TOKENS_PER_PASS)
    corpus = build_corpus(
        model,
        n_prose=cfg.n_prose,
        n_repeated=cfg.n_repeated if model.causal else 0,
        repeated_lengths=cfg.repeated_lengths,
        n_syntax=cfg.n_syntax if model.causal else 0,
        seed=cfg.seed,
        max_tokens=cfg.max_tokens_per_batch,
    )
    ablator = Ablator(model)
    store = SumStore(metric_sizes(corpus.sizes))
    heads = [(layer, head) for layer in range(model.n_layers) for head in range(model.n_heads)]
    with stage_threads(choose_threads(None).n):
        exact_sweep(
            ablator,
            corpus,
            store,
            heads,
            ("zero", SINK),
            None,
            None,
            cfg.max_tokens_per_batch,
            progress=False,
        )
    return effects_from_sums(store, "exact", cfg.n_bootstrap, cfg.seed)


def head_effects(effects: pd.DataFrame, ablation: str) -> pd.DataFrame:
    """One row per head: ``delta`` and its interval per metric, as columns ``<metric>`` and
    ``<metric>_lo`` / ``<metric>_hi``."""
    rows = effects[effects["ablation"] == ablation]
    wide = rows.pivot_table(
        index=["layer", "head"], columns="metric", values=["delta", "ci_low", "ci_high"]
    )
    out = wide["delta"].copy()
    for metric in out.columns:
        out[f"{metric}_lo"], out[f"{metric}_hi"] = wide["ci_low"][metric], wide["ci_high"][metric]
    return out


def main_args(argv: list[str]) -> tuple[list[str], bool]:
    """Models named on the command line (default: both packaged ones) and ``--fresh``."""
    fresh = "--fresh" in argv
    names = [a for a in argv if not a.startswith("--")] or list(MODELS)
    if fresh:
        import shutil

        for name in names:
            shutil.rmtree(CACHE / name, ignore_errors=True)
    return names, fresh


def describe_commit(commit: str = PRE_SINK_COMMIT) -> str:
    out = subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%h %s", commit],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()[:90] or commit

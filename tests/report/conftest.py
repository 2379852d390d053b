"""Synthetic but schema-valid runs for the report tests (no model is loaded)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from interp import rundir
from interp.roles import NAMED_ROLES, ROLE_NAMES, ROLES, UNEXPLAINED

XSS = "<script>alert(1)</script>"
ALL_TABLES = ("features", "roles", "effects", "pruning")
SYNTACTIC = ("syntactic:nsubj:head2dep", "syntactic:amod:dep2head")
# Which roles the fake model's heads carry, cycled over heads; two unexplained heads per 12.
ROLE_CYCLE = ("previous_token", "first_token", "induction", UNEXPLAINED, "duplicate_token", "syntactic",
              "current_token", "delimiter", "local", "broad", UNEXPLAINED, "first_token")


def fake_roles(n_layers: int, n_heads: int, rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for i, (layer, head) in enumerate((l, h) for l in range(n_layers) for h in range(n_heads)):
        role = ROLE_CYCLE[i % len(ROLE_CYCLE)]
        scores = rng.dirichlet(np.ones(len(ROLE_NAMES)) * 0.5)
        scores[ROLE_NAMES.index(role)] += 1.0
        scores /= scores.sum()
        row = {"layer": layer, "head": head, "role": role, "confidence": float(scores.max()),
               "second_role": "first_token" if i % 4 == 0 and role != "first_token" else np.nan,
               "stability": float(rng.uniform(0.5, 1.0))}
        row.update({f"score_{name}": float(s) for name, s in zip(ROLE_NAMES, scores)})
        rows.append(row)
    return pd.DataFrame(rows)


def fake_features(roles: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    names = [ROLES[r].feature for r in NAMED_ROLES if r != "syntactic"] + list(SYNTACTIC)
    rows = []
    for _, head in roles.iterrows():
        for name in names:
            base = float(rng.uniform(0.02, 0.2))
            own = head["role"] == name or (head["role"] == "syntactic" and name.startswith("syntactic:"))
            value = base + (0.6 if own else float(rng.normal(0, 0.05)))
            rows.append({"layer": head["layer"], "head": head["head"], "feature": name, "value": value,
                         "baseline": base, "ci_low": value - 0.05, "ci_high": value + 0.05, "n": 500})
    return pd.DataFrame(rows)


def fake_effects(roles: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for _, head in roles.iterrows():
        strength = 0.3 if head["role"] in ("induction", "first_token") else 0.02
        for ablation in ("mean", "zero"):
            for metric, base, sign in (("loss_prose", 2.7, 1), ("loss_repeated", 1.1, 1), ("sv_logit_diff", 0.9, -1)):
                for method in ("exact", "attribution"):
                    delta = float(abs(rng.normal(strength, strength / 3)))
                    ablated = base + sign * delta
                    rows.append({"layer": head["layer"], "head": head["head"], "ablation": ablation,
                                 "metric": metric, "baseline": base, "ablated": ablated, "delta": delta,
                                 "delta_rel": delta / base, "ci_low": delta * 0.8, "ci_high": delta * 1.2,
                                 "method": method})
    return pd.DataFrame(rows)


def fake_pruning(n_total: int) -> pd.DataFrame:
    rows = []
    for metric, start, sign in (("loss_prose", 2.7, 1), ("sv_logit_diff", 0.9, -1)):
        for k in range(n_total + 1):
            frac = k / n_total
            rows.append({"fraction_removed": frac, "heads_removed": k, "metric": metric,
                         "value": start * (1 + sign * 0.2 * frac ** 3),
                         "last_removed": f"L{k % 4}H{k % 3}" if k else np.nan})
    return pd.DataFrame(rows)


def fake_exemplars() -> dict:
    tokens = ["<s>", "The", XSS, " cat", "$x$", "\x00ctl", "new\nline", " sat", "."]
    rep = ["<s>", "a", "b", "c", "d", "a", "b", "c", "d"]
    n = len(tokens)

    def pattern(offset: int) -> list[list[float]]:
        p = np.zeros((n, n))
        for q in range(n):
            p[q, max(q - offset, 0)] = 0.8
            p[q, 0] += 0.2
        return p.tolist()

    return {"items": [
        {"feature": "previous_token", "layer": 0, "head": 0, "suite": "prose", "tokens": tokens, "pattern": pattern(1)},
        {"feature": "induction", "layer": 0, "head": 2, "suite": "repeated", "tokens": rep, "pattern": pattern(3)},
        {"feature": "syntactic:nsubj:head2dep", "layer": 1, "head": 2, "suite": "syntax", "tokens": tokens,
         "pattern": pattern(2)},
    ]}


def make_fake_run(tmp_path: Path, name: str = "run", n_layers: int = 4, n_heads: int = 3,
                  tables: tuple[str, ...] = ALL_TABLES, exemplars: bool = True, clusters: bool = True,
                  seed: int = 0, roles_override: dict[tuple[int, int], str] | None = None) -> Path:
    """Write a run directory with every table the report reads; returns the run directory."""
    rng = np.random.default_rng(seed)
    run_dir = Path(tmp_path) / name
    run_dir.mkdir(parents=True, exist_ok=True)
    roles = fake_roles(n_layers, n_heads, rng)
    for (layer, head), role in (roles_override or {}).items():
        roles.loc[(roles["layer"] == layer) & (roles["head"] == head), "role"] = role
    frames = {"roles": roles, "features": fake_features(roles, rng), "effects": fake_effects(roles, rng),
              "pruning": fake_pruning(n_layers * n_heads)}
    for table in tables:
        rundir.write_table(run_dir, table, frames[table])
    if clusters:
        rundir.write_text(run_dir / "clusters.csv",
                        "cluster,layer,head,size,top_feature\n0,0,3,2,local\n0,2,1,2,local\n1,3,2,1," + XSS + "\n")
    if exemplars:
        rundir.write_text(run_dir / "exemplars.json", json.dumps(fake_exemplars()))
    rundir.write_manifest(run_dir, {
        "model": {"name": f"tiny-{name} {XSS}", "source": "bridge", "causal": True, "n_layers": n_layers,
                  "n_heads": n_heads, "n_kv_heads": n_heads, "d_head": 16, "n_ctx": 64,
                  "bos_policy": "prepend", "bos_token_id": 0, "dtype": "float32", "device": "cpu"},
        "corpora": {"prose": {"n_sequences": 40, "n_tokens": 1234, "hash": "abc123"},
                    "repeated": {"n_sequences": 96, "n_tokens": 3168, "hash": "def456"}},
        "provenance": {"created": "2025-01-01T00:00:00+00:00", "versions": {"interp": "0.1.0", "torch": "2.13.0"},
                       "python": "3.11.7", "machine": "Linux x86_64, 2 cpus", "git_hash": None, "seed": seed},
        "stages": {"collect": {"config": {"seed": seed, "suites": ["prose", "repeated"]}, "seconds": 12.5,
                               "finished": "2025-01-01T00:01:00+00:00"},
                   "classify": {"config": {}, "seconds": 0.4, "finished": "2025-01-01T00:01:02+00:00"}},
    })
    return run_dir


@pytest.fixture
def fake_run(tmp_path: Path) -> Path:
    return make_fake_run(tmp_path)


@pytest.fixture(name="make_fake_run")
def make_fake_run_fixture():
    """The factory itself, for tests that need several runs or some tables left out."""
    return make_fake_run


@pytest.fixture(scope="session")
def built_report(tmp_path_factory) -> Path:
    """One fake run with its report built (figures, report.html, report.pdf); tests only read it."""
    from interp.report.html import build_report

    run_dir = make_fake_run(tmp_path_factory.mktemp("built"))
    build_report(run_dir)
    return run_dir

"""Synthetic but schema-valid runs for the report tests (no model is loaded)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from interp.collect.exemplars import Exemplars, Probe, write_exemplars
from interp.pipeline import rundir
from interp.pipeline.tables import TABLES
from interp.roles import LOOKS, ROLE_NAMES, ROLES, UNEXPLAINED

XSS = "<script>alert(1)</script>"
ALL_TABLES = ("features", "syntax", "roles", "effects", "pruning")
SYNTACTIC = ("syntactic:nsubj:head2dep", "syntactic:amod:dep2head")
# Which roles the fake model's heads carry, cycled over heads; two unexplained heads per 12.
ROLE_CYCLE = (
    "previous_token",
    "first_token",
    "induction",
    UNEXPLAINED,
    "duplicate_token",
    "syntactic",
    "current_token",
    "delimiter",
    "local",
    "broad",
    UNEXPLAINED,
    "first_token",
)


def fake_roles(
    n_layers: int, n_heads: int, rng: np.random.Generator, sink: bool = True
) -> pd.DataFrame:
    rows = []
    for i, (layer, head) in enumerate((l, h) for l in range(n_layers) for h in range(n_heads)):
        role = ROLE_CYCLE[i % len(ROLE_CYCLE)]
        scores = rng.dirichlet(np.ones(len(ROLE_NAMES)) * 0.5)
        scores[ROLE_NAMES.index(role)] += 1.0
        scores /= scores.sum()
        row = {
            "layer": layer,
            "head": head,
            "role": role,
            "confidence": float(scores.max()),
            "second_role": "first_token" if i % 4 == 0 and role != "first_token" else np.nan,
            "stability": float(rng.uniform(0.5, 1.0)),
        }
        row.update({f"score_{name}": float(s) for name, s in zip(ROLE_NAMES, scores)})
        if sink:
            row["sink_mass"] = 0.9 if role == "first_token" else float(rng.uniform(0.0, 0.6))
        rows.append(row)
    return pd.DataFrame(rows)


def fake_features(roles: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    names = [ROLES[r].feature for r in LOOKS if r != "syntactic"] + list(SYNTACTIC)
    rows = []
    for _, head in roles.iterrows():
        for name in names:
            base = float(rng.uniform(0.02, 0.2))
            own = head["role"] == name or (
                head["role"] == "syntactic" and name.startswith("syntactic:")
            )
            value = base + (0.6 if own else float(rng.normal(0, 0.05)))
            row = {
                "layer": head["layer"],
                "head": head["head"],
                "feature": name,
                "value": value,
                "baseline": base,
                "ci_low": value - 0.05,
                "ci_high": value + 0.05,
                "n": 500,
            }
            if "sink_mass" in head:  # runs since features version 3
                row["sink_mass"] = head["sink_mass"]
            rows.append(row)
    return pd.DataFrame(rows)


def fake_syntax(roles: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """The syntax table: the built-in suite's two relations of SYNTACTIC (the features read it)
    and a user treebank (its name carries markup) with a relation of a handful of arcs."""
    rows = []
    for corpus, relations in (
        ("syntax", (("nsubj", "head2dep", 1254), ("amod", "dep2head", 420))),
        (f"user:{XSS}", (("det", "head2dep", 641), ("punct", "dep2head", 7))),
    ):
        for relation, direction, arcs in relations:
            rule = float(rng.uniform(0.2, 0.6))
            heads = roles.sample(3, random_state=int(rng.integers(1 << 30)))
            for rank, (score, (_, head)) in enumerate(
                zip(sorted(rng.uniform(0.3, 0.95, 3), reverse=True), heads.iterrows()), 1
            ):
                rows.append(
                    {
                        "corpus": corpus,
                        "relation": relation,
                        "direction": direction,
                        "rank": rank,
                        "layer": head["layer"],
                        "head": head["head"],
                        "accuracy": score,
                        "ci_low": score - 0.04,
                        "ci_high": score + 0.03,
                        "arcs": arcs,
                        "sentences": arcs // 2 + 1,
                        "in_features": int(corpus == "syntax"),
                        "best_rule": "offset_-1",
                        "best_rule_accuracy": rule,
                        "offset_-3": 0.0,
                        "offset_-2": rule / 2,
                        "offset_-1": rule,
                        "offset_1": 0.0,
                        "offset_2": 0.0,
                        "offset_3": 0.0,
                    }
                )
    return pd.DataFrame(rows)


def fake_effects(roles: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for _, head in roles.iterrows():
        strength = 0.3 if head["role"] in ("induction", "first_token") else 0.02
        for ablation in ("mean", "zero"):
            for metric, base, sign in (
                ("loss_prose", 2.7, 1),
                ("loss_repeated", 1.1, 1),
                ("sv_logit_diff", 0.9, -1),
            ):
                for method in ("exact", "attribution"):
                    delta = float(abs(rng.normal(strength, strength / 3)))
                    ablated = base + sign * delta
                    rows.append(
                        {
                            "layer": head["layer"],
                            "head": head["head"],
                            "ablation": ablation,
                            "metric": metric,
                            "baseline": base,
                            "ablated": ablated,
                            "delta": delta,
                            "delta_rel": delta / base,
                            "ci_low": delta * 0.8,
                            "ci_high": delta * 1.2,
                            "estimator": method,
                        }
                    )
    return pd.DataFrame(rows)


def fake_pruning(n_total: int) -> pd.DataFrame:
    rows = []
    for metric, start, sign in (("loss_prose", 2.7, 1), ("sv_logit_diff", 0.9, -1)):
        for k in range(n_total + 1):
            frac = k / n_total
            value = start * (1 + sign * 0.2 * frac**3)
            rows.append(
                {
                    "fraction_removed": frac,
                    "heads_removed": k,
                    "metric": metric,
                    "value": value,
                    "last_removed": f"L{k % 4}H{k % 3}" if k else np.nan,
                    "ci_low": value - 0.05,
                    "ci_high": value + 0.05,
                    "removed_by": "effect",
                }
            )
        # every head of one role removed at once (the ablate stage's role rows)
        value = start * (1 + sign * 0.1)
        rows.append(
            {
                "fraction_removed": 3 / n_total,
                "heads_removed": 3,
                "metric": metric,
                "value": value,
                "last_removed": "L0H0 L1H0 L2H0",
                "ci_low": value - 0.05,
                "ci_high": value + 0.05,
                "removed_by": "role:first_token",
            }
        )
    return pd.DataFrame(rows)


TOKENS = ("<s>", "The", XSS, " cat", "$x$", "\x00ctl", "new\nline", " sat", ".")
REPEATED = ("<s>", "a", "b", "c", "d", "a", "b", "c", "d")


def offset_pattern(n: int, offset: int) -> np.ndarray:
    """[q, k]: 0.8 on k = q - offset (or 0), 0.2 on the first token."""
    p = np.zeros((n, n))
    for q in range(n):
        p[q, max(q - offset, 0)] = 0.8
        p[q, 0] += 0.2
    return p


def fake_exemplars(n_layers: int, n_heads: int) -> Exemplars:
    """Three stored probes (natural, repeated, syntax); head (l, h) attends (l + h) % 4 tokens back."""
    probes = []
    for suite, kind, tokens in (
        ("prose", "natural", TOKENS),
        ("repeated", "repeated", REPEATED),
        ("syntax", "syntax", TOKENS),
    ):
        n = len(tokens)
        patterns = np.stack(
            [
                np.stack([offset_pattern(n, (l + h) % 4) for h in range(n_heads)])
                for l in range(n_layers)
            ]
        ).astype(np.float16)
        probes.append(Probe(suite, kind, tokens, n + 3 if kind == "repeated" else n, patterns))
    return Exemplars(tuple(probes))


def make_fake_run(
    tmp_path: Path,
    name: str = "run",
    n_layers: int = 4,
    n_heads: int = 3,
    tables: tuple[str, ...] = ALL_TABLES,
    exemplars: bool = True,
    clusters: bool = True,
    seed: int = 0,
    roles_override: dict[tuple[int, int], str] | None = None,
    sink: bool = True,
    model_name: str | None = None,
) -> Path:
    """Write a run directory with every table the report reads; returns the run directory.

    ``exemplars``: whether to store exemplars.npz.
    """
    rng = np.random.default_rng(seed)
    run_dir = Path(tmp_path) / name
    run_dir.mkdir(parents=True, exist_ok=True)
    roles = fake_roles(n_layers, n_heads, rng, sink)
    for (layer, head), role in (roles_override or {}).items():
        roles.loc[(roles["layer"] == layer) & (roles["head"] == head), "role"] = role
    frames = {
        "roles": roles,
        "features": fake_features(roles, rng),
        "effects": fake_effects(roles, rng),
        "pruning": fake_pruning(n_layers * n_heads),
        "syntax": fake_syntax(roles, np.random.default_rng(seed + 1)),
    }
    for table in tables:
        rundir.write_table(run_dir, table, frames[table])
    if clusters:
        described = (
            "more delimiter (lift 0.30 vs 0.01) " + XSS
        )  # one group: the two unexplained heads of 4 x 3
        rows = [(0, 1, 0, described, np.nan), (0, 3, 1, described, np.nan)]
        rundir.write_table(
            run_dir, "clusters", pd.DataFrame(rows, columns=TABLES["clusters"].names)
        )
    if exemplars:
        write_exemplars(run_dir, fake_exemplars(n_layers, n_heads))
    rundir.write_manifest(
        run_dir,
        {
            "model": {
                "name": model_name or f"tiny-{name} {XSS}",
                "source": "bridge",
                "causal": True,
                "n_layers": n_layers,
                "n_heads": n_heads,
                "n_kv_heads": n_heads,
                "d_head": 16,
                "n_ctx": 64,
                "bos_policy": "prepend",
                "bos_token_id": 0,
                "dtype": "float32",
                "device": "cpu",
            },
            "corpora": {
                "prose": {"n_sequences": 40, "n_tokens": 1234, "hash": "abc123"},
                "repeated": {"n_sequences": 96, "n_tokens": 3168, "hash": "def456"},
            },
            "provenance": {
                "created": "2025-01-01T00:00:00+00:00",
                "versions": {"interp": "0.1.0", "torch": "2.13.0"},
                "python": "3.11.7",
                "machine": "Linux x86_64, 2 cpus",
                "git_hash": None,
                "seed": seed,
            },
            "stages": {
                "collect": {
                    "config": {"seed": seed, "suites": ["prose", "repeated"]},
                    "seconds": 12.5,
                    "finished": "2025-01-01T00:01:00+00:00",
                },
                "classify": {"config": {}, "seconds": 0.4, "finished": "2025-01-01T00:01:02+00:00"},
            },
        },
    )
    return run_dir


def document_texts(doc) -> list[str]:
    """Every piece of text a content model says (titles, text, cards, cells, captions, configs)."""
    from interp.report import content as C

    def of(block) -> list[str]:
        if isinstance(block, (C.Heading, C.Text)):
            return [block.text]
        if isinstance(block, C.Cards):
            return [t for card in block.items for t in (card.value, card.label)]
        if isinstance(block, C.Table):
            return [*block.columns, *(cell.text for row in block.rows for cell in row)]
        if isinstance(block, C.FigureBlock):
            return [block.title, block.caption]
        if isinstance(block, C.KeyValues):
            return [t for pair in block.pairs for t in pair]
        if isinstance(block, C.Code):
            return [block.label, block.text]
        return [t for child in block.blocks for t in of(child)]

    texts = [doc.title, *doc.lead]
    for sec in doc.sections:
        texts += [sec.title, *(t for b in sec.blocks for t in of(b))]
    return [t for t in texts if t]

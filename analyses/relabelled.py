"""Heads the sink-aware roles relabel: what was called ``first_token``, and what it does instead.

Before features version 3 a head was ``first_token`` whenever its sink outweighed what it did
with the rest of its attention; now its role is what it does with the attention off the sink,
and ``first_token`` is left to heads with too little of it (interp.classify.primary). For
each packaged model this script makes (and caches, analyses/_runs.py) three runs on the default
probe suites: the roles at the last commit before the change, run by that commit's own code; the
roles now; and every head's exact zero- and sink-ablation effects on the ablate stage's default
evaluation corpus. It lists every head relabelled from ``first_token`` with its sink mass, the
lift of its new role's feature, its entropy and its exact effects, and checks the textbook heads.

    python analyses/relabelled.py [MODEL ...] [--fresh]

Writes the "Heads relabelled from first_token" section of analyses/RESULTS.md.
"""

from __future__ import annotations

import sys

import _runs  # noqa: E402
import pandas as pd

KNOWN = {
    "smollm2-135m": {
        (17, 3): "induction",
        (17, 4): "induction",
        (17, 5): "induction",
        (18, 6): "induction",
        (16, 0): "previous_token",
        (11, 1): "previous_token",
        (13, 8): "syntactic",
    },
    "minilm-l6": {(0, 2): "previous_token", (1, 8): "next_token"},
}


def known_heads(name: str, old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (layer, head), expected in KNOWN.get(name, {}).items():
        o, n = _row(old, layer, head), _row(new, layer, head)
        rows.append(
            {
                "head": f"L{layer}H{head}",
                "expected": expected,
                "before": o["role"],
                "now": n["role"],
                "confidence": n["confidence"],
                "sink_mass": n["sink_mass"],
                "stability": n["stability"],
                "kept": "yes" if n["role"] == expected else "NO",
            }
        )
    return pd.DataFrame(rows)


def _row(roles: pd.DataFrame, layer: int, head: int) -> pd.Series:
    return roles[(roles["layer"] == layer) & (roles["head"] == head)].iloc[0]


def relabelled(
    old: pd.DataFrame, new: pd.DataFrame, features: pd.DataFrame, effects: pd.DataFrame
) -> pd.DataFrame:
    """Every head that was first_token and is not now, with its features and exact effects."""
    from interp.classify.matrix import head_matrix

    merged = old[["layer", "head", "role"]].merge(
        new, on=["layer", "head"], suffixes=("_before", "")
    )
    moved = merged[(merged["role_before"] == "first_token") & (merged["role"] != "first_token")]
    matrix = head_matrix(features)
    zero, sink = _runs.head_effects(effects, "zero"), _runs.head_effects(effects, "sink")
    metrics = [m for m in zero.columns if not m.endswith(("_lo", "_hi"))]
    rows = []
    for r in moved.itertuples(index=False):
        lh = (r.layer, r.head)
        lift = matrix.loc[lh, r.role] if r.role in matrix.columns else float("nan")
        row = {
            "layer": r.layer,
            "head": r.head,
            "now": r.role,
            "confidence": r.confidence,
            "second": r.second_role if isinstance(r.second_role, str) else "-",
            "sink_mass": r.sink_mass,
            "own lift": lift,
            "entropy": matrix.loc[lh, "broad"],
        }
        for m in metrics:
            row[f"zero {m}"] = zero.loc[lh, m]
        for m in metrics:
            row[f"sink {m}"] = sink.loc[lh, m]
        rows.append(row)
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame(rows).sort_values(["now", "layer", "head"]).reset_index(drop=True)
    frame.insert(0, "head", [f"L{l}H{h}" for l, h in zip(frame.pop("layer"), frame.pop("head"))])
    return frame


def section(name: str) -> str:
    from interp.model.load import load_model

    model = load_model(name)
    features, new = _runs.current(name, model)
    old = _runs.before_sinks(name)
    effects = _runs.exact_effects(name, model)
    n = len(new)
    share = lambda roles, role: float((roles["role"] == role).mean())  # noqa: E731
    counts = (
        pd.DataFrame({"before": old["role"].value_counts(), "now": new["role"].value_counts()})
        .fillna(0)
        .astype(int)
    )
    counts = counts.reset_index(names="role").sort_values("before", ascending=False)
    moved = relabelled(old, new, features, effects)
    flows = (
        moved["now"].value_counts().rename_axis("now").reset_index(name="heads")
        if len(moved)
        else pd.DataFrame()
    )
    known = known_heads(name, old, new)
    lines = [
        f"### {name} ({n} heads)",
        "",
        f"`first_token` as primary role: **{share(old, 'first_token'):.1%}** before "
        f"({_runs.describe_commit()}), **{share(new, 'first_token'):.1%}** now; `unexplained`: "
        f"{share(old, 'unexplained'):.1%} before, {share(new, 'unexplained'):.1%} now.",
        "",
        "Heads per primary role:",
        "",
        _runs.md(counts),
        "",
    ]
    if len(known):
        lines += ["Textbook heads:", "", _runs.md(known), ""]
    lines += [
        f"{len(moved)} heads relabelled from `first_token`, by new role:",
        "",
        _runs.md(flows) if len(flows) else "none",
        "",
        "Each of them: its sink mass, the lift of its new role's feature on its non-sink attention (for "
        "`broad`: the entropy itself; `unexplained`: none), its normalised entropy over the content keys, "
        "and its exact effects (delta, positive = the model got worse) under zero ablation (the head "
        "removed) and sink ablation (all of its attention moved onto the first position):",
        "",
        _runs.md(moved) if len(moved) else "none",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    names, _ = _runs.main_args(argv)
    body = "\n\n".join(section(n) for n in names)
    _runs.write(
        "Heads relabelled from first_token",
        "analyses/relabelled.py",
        __doc__.split("\n\n")[1] + "\n\n" + body,
    )
    print(body)


if __name__ == "__main__":
    main(sys.argv[1:])

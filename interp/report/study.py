"""Many runs compared: the tables and the page a study ends with (``interp study``).

From the runs' tables alone (never the model, never torch):

- ``role_shares``: for each run, the share of its heads in each role by relative depth (the
  layer's position in the model, binned into thirds), so models of different depths line up;
- ``role_changes``: for each model, the heads whose primary role differs between two of its runs
  (another corpus, seed or setting), with both roles and confidences;
- ``effect_spread``: for each run and metric, the distribution of the heads' effects (quartiles,
  the largest, the share of heads whose interval excludes zero);
- ``matched_heads``: for each model, every head's role, confidence, role scores and effect in each
  of its runs side by side, so that a head's change is read from numbers, not from colours.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from interp.pipeline.results import RunTables
from interp.report import content as C
from interp.report import summary as S
from interp.report.compare import role_differences
from interp.report.figures import role_colour, save

DEPTHS = ("early", "middle", "late")  # relative depth in thirds of the model's layers


def depth_bin(layer: pd.Series, n_layers: int) -> pd.Series:
    """The third of the model a layer sits in: layer / n_layers in [0, 1/3), [1/3, 2/3), [2/3, 1)."""
    index = np.minimum((layer.to_numpy() * len(DEPTHS)) // max(n_layers, 1), len(DEPTHS) - 1)
    return pd.Series(np.asarray(DEPTHS)[index.astype(int)], index=layer.index)


def role_shares(runs: dict[str, RunTables]) -> pd.DataFrame:
    """One row per (run, depth, role): the share of that depth's heads carrying the role."""
    rows = []
    for label, run in runs.items():
        if run.roles is None or run.roles.empty:
            continue
        n_layers, _ = S.head_shape(run.manifest, run.roles)
        depth = depth_bin(run.roles["layer"], n_layers)
        counts = run.roles.groupby([depth.rename("depth"), "role"]).size()
        totals = counts.groupby(level="depth").transform("sum")
        for (d, role), n in counts.items():
            rows.append(
                {
                    "run": label,
                    "depth": d,
                    "role": role,
                    "heads": int(n),
                    "share": n / totals[(d, role)],
                }
            )
    frame = pd.DataFrame(rows, columns=["run", "depth", "role", "heads", "share"])
    frame["depth"] = pd.Categorical(frame["depth"], categories=list(DEPTHS), ordered=True)
    return frame.sort_values(["run", "depth", "role"], kind="stable").reset_index(drop=True)


def role_changes(runs: dict[str, RunTables], model_of: dict[str, str]) -> pd.DataFrame:
    """Heads whose primary role differs between two runs of the same model (or, ``mixed`` in
    both, whose blends hold other roles: :func:`interp.report.compare.role_differences`), with
    both blends where the runs have them."""
    columns = ["model", "run_a", "run_b", "layer", "head", "role_a", "confidence_a", "role_b"]
    columns += ["confidence_b", "components_a", "components_b"]
    frames = []
    labels = [label for label, run in runs.items() if run.roles is not None and not run.roles.empty]
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            roles_a, roles_b = runs[a].roles, runs[b].roles
            if model_of[a] != model_of[b] or roles_a is None or roles_b is None:
                continue
            diff = role_differences(roles_a, roles_b)
            frames.append(diff.assign(model=model_of[a], run_a=a, run_b=b))
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True).reindex(columns=columns)


def _shown_effects(run: RunTables) -> tuple[pd.DataFrame | None, S.EffectChoice | None]:
    choice = S.choose_effect(run.effects)
    if choice is None:
        return None, None
    return S.head_effects(run.effects, choice), choice


def effect_spread(runs: dict[str, RunTables]) -> pd.DataFrame:
    """Per run and metric (the ablation and estimate the run's report shows): how the heads'
    effects are spread."""
    rows = []
    for label, run in runs.items():
        if run.effects is None or run.effects.empty:
            continue
        choice = S.choose_effect(run.effects)
        if choice is None:  # no effect with a value
            continue
        for metric in sorted(run.effects["metric"].dropna().unique()):
            picked = S.EffectChoice(choice.ablation, metric, choice.estimator)
            delta = S.head_effects(run.effects, picked)
            if delta.empty:
                continue
            values = delta["delta"].astype(float)
            excludes = (
                ((delta["ci_low"] > 0) | (delta["ci_high"] < 0)).mean()
                if "ci_low" in delta
                else np.nan
            )
            rows.append(
                {
                    "run": label,
                    "metric": metric,
                    "ablation": choice.ablation,
                    "heads": len(values),
                    "q25": values.quantile(0.25),
                    "median": values.median(),
                    "q75": values.quantile(0.75),
                    "largest": values.loc[values.abs().idxmax()],
                    "share_ci_excludes_zero": float(excludes),
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "run",
            "metric",
            "ablation",
            "heads",
            "q25",
            "median",
            "q75",
            "largest",
            "share_ci_excludes_zero",
        ],
    )


def matched_heads(runs: dict[str, RunTables], model_of: dict[str, str]) -> pd.DataFrame:
    """For each model: one row per (head, run) with role, confidence, role scores and the
    effect the run's report shows, in long form (pivot on ``run`` to read them side by side).
    Runs are labelled ``model/run``; ``run`` here is the part after the model, so that the runs of
    different models on the same corpus, seed and variant share a column."""
    frames = []
    for label, run in runs.items():
        if run.roles is None or run.roles.empty:
            continue
        scores = [c for c in run.roles.columns if c.startswith("score_")]
        frame = run.roles[["layer", "head", "role", "confidence", *scores]].copy()
        effects, choice = _shown_effects(run)
        if effects is not None and choice is not None and not effects.empty:
            frame = frame.merge(
                effects[["layer", "head", "delta"]].rename(columns={"delta": "effect"}),
                on=["layer", "head"],
                how="left",
            )
            frame["effect_metric"] = choice.metric
        frame.insert(0, "run", label.rpartition("/")[2])
        frame.insert(0, "model", model_of[label])
        frames.append(frame)
    return (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=["model", "run", "layer", "head"])
    )


def shares_figure(shares: pd.DataFrame, fig_dir: Path) -> C.FigureBlock | None:
    """Role shares by relative depth, one panel per run."""
    if shares.empty:
        return None
    order = S.role_order(shares["role"])
    runs = list(dict.fromkeys(shares["run"]))
    fig = Figure(
        figsize=(3.2 * min(len(runs), 4), 2.8 * ((len(runs) + 3) // 4)), layout="constrained"
    )
    axes = fig.subplots((len(runs) + 3) // 4, min(len(runs), 4), squeeze=False).ravel()
    for ax, label in zip(axes, runs):
        pivot = (
            shares[shares["run"] == label]
            .pivot_table(index="depth", columns="role", values="share", fill_value=0)
            .reindex(
                index=list(DEPTHS),
                columns=[r for r in order if r in set(shares["role"])],
                fill_value=0,
            )
        )
        pivot.plot.bar(
            stacked=True,
            ax=ax,
            legend=False,
            width=0.8,
            color=[role_colour(r) for r in pivot.columns],
        )
        ax.set_title(label, fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_xlabel("")
        ax.tick_params(labelsize=7, labelrotation=0)
    for ax in axes[len(runs) :]:
        ax.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right", fontsize=7)  # type: ignore[call-overload]  # constrained layout's
    saved = save(
        fig,
        fig_dir,
        "role_shares",
        "Role shares by relative depth",
        "Each panel is one run; bars are the model's first, middle and last third of layers.",
    )
    return C.figure(saved)


def study_document(
    name: str,
    plan: list[dict[str, Any]],
    shares: pd.DataFrame,
    changes: pd.DataFrame,
    spread: pd.DataFrame,
    matched: pd.DataFrame,
    figure: C.FigureBlock | None,
) -> C.Document:
    runs = pd.DataFrame(plan)
    wide = _side_by_side(matched)
    sections = [
        C.section("runs", "Runs", C.table(runs, "runs-table")),
        C.section(
            "shares",
            "Role shares by relative depth",
            figure,
            C.table(shares, "shares-table", percent_columns=("share",), filter="Filter:")
            if not shares.empty
            else None,
        ),
        C.section(
            "changes",
            "Heads whose role differs between runs of one model",
            C.Text(f"{len(changes)} head(s) change role between runs of the same model.")
            if plan
            else None,
            C.table(
                changes, "changes-table", role_columns=("role_a", "role_b"), filter="Filter heads:"
            )
            if not changes.empty
            else None,
        ),
        C.section(
            "effects",
            "How the effects are spread",
            C.table(spread, "spread-table", percent_columns=("share_ci_excludes_zero",))
            if not spread.empty
            else C.Text("No run of this study has an effects table.", "note"),
        ),
        C.section(
            "matched",
            "Matching heads side by side",
            C.Text("For each model, each head's role, confidence and shown effect in every run."),
            C.table(
                wide,
                "matched-table",
                role_columns=tuple(c for c in wide.columns if c.startswith("role")),
                filter="Filter heads:",
            )
            if not wide.empty
            else None,
        ),
    ]
    return C.Document(
        f"Study: {name}",
        f"interp study {name}",
        (f"{len(plan)} runs",),
        tuple(s for s in sections if s is not None),
    )


def _side_by_side(matched: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, head); role, confidence and effect of each run in columns of their own."""
    if matched.empty or "role" not in matched:
        return pd.DataFrame()
    values = [c for c in ("role", "confidence", "effect") if c in matched.columns]
    wide = matched.pivot_table(
        index=["model", "layer", "head"], columns="run", values=values, aggfunc="first"
    )
    wide.columns = [f"{value} [{run}]" for value, run in wide.columns]
    ordered = sorted(wide.columns, key=lambda c: (c.split(" [")[1], values.index(c.split(" [")[0])))
    return wide[ordered].reset_index()

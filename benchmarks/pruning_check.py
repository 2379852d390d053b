"""Benchmark: a run's pruning curve against independent hook code.

A pruning curve that falls far below the intact model (the metric *improves* as heads are
removed) is either a real effect or an artefact of how the ablate stage measures it. This
script recomputes the first steps of such a curve without the stage's machinery: the held-out
evaluation sequences (the stage's own inputs, split 1) run one at a time, unpadded, through the
model with plain TransformerLens hooks that set each removed head's ``hook_z`` to its mean,
taken by the same kind of hooks over the stage's evaluation corpus (split 0, every round), and
the metric is the token-weighted next-token loss at the scored positions. Each step's value is
set beside the one in the run's ``pruning`` table.

Usage: ``python benchmarks/pruning_check.py RUN_DIR [--metric loss_repeated] [--steps 4] [--no-write]``
(a run of a causal model with mean ablation and a pruning table).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from _results import markdown, write_section  # noqa: E402

from interp.ablate.batches import EvalCorpus  # noqa: E402
from interp.ablate.config import AblateConfig  # noqa: E402
from interp.ablate.corpora import stage_corpus, stage_metrics  # noqa: E402
from interp.config import from_jsonable  # noqa: E402
from interp.model.load import load_model  # noqa: E402
from interp.model.spec import ModelSpec  # noqa: E402
from interp.pipeline import rundir  # noqa: E402

SCRIPT = "benchmarks/pruning_check.py"
SECTION = "Pruning curve against independent hook code"
EVAL_SET = {"loss_prose": "loss_prose", "loss_repeated": "loss_repeated"}


def head_means(bridge, corpus: EvalCorpus, n_layers: int) -> list[torch.Tensor]:
    """Per layer, every head's mean ``hook_z`` over the corpus' tokens: [head, d_head]."""
    sums: list[torch.Tensor | None] = [None] * n_layers
    count = 0

    def keep(layer: int):
        def hook(z, hook):
            total = z[0].double().sum(0)
            sums[layer] = total if sums[layer] is None else sums[layer] + total

        return hook

    hooks = [(f"blocks.{layer}.attn.hook_z", keep(layer)) for layer in range(n_layers)]
    with torch.inference_mode():
        for item in corpus.items:
            bridge.run_with_hooks(item.tokens[None], fwd_hooks=hooks)
            count += len(item.tokens)
    return [s / count for s in sums]


def loss(bridge, items, removed: list[tuple[int, int]], means: list[torch.Tensor]) -> float:
    """Token-weighted next-token loss at the items' scored positions, ``removed`` heads at their mean."""
    by_layer: dict[int, list[int]] = {}
    for layer, head in removed:
        by_layer.setdefault(layer, []).append(head)

    def ablate(layer: int):
        def hook(z, hook):
            z = z.clone()
            for head in by_layer[layer]:
                z[:, :, head, :] = means[layer][head].to(z.dtype)
            return z

        return hook

    hooks = [(f"blocks.{layer}.attn.hook_z", ablate(layer)) for layer in by_layer]
    total, n = 0.0, 0
    with torch.inference_mode():
        for item in items:
            logits = bridge.run_with_hooks(item.tokens[None], fwd_hooks=hooks)[0]
            total += float(
                F.cross_entropy(logits[item.rows].double(), item.targets, reduction="sum")
            )
            n += len(item.rows)
    return total / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--metric", default="loss_repeated", choices=sorted(EVAL_SET))
    parser.add_argument(
        "--steps", type=int, default=4, help="curve steps to recompute after the intact one"
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    run = Path(args.run_dir)
    manifest = rundir.read_manifest(run)
    model = load_model(from_jsonable(ModelSpec, manifest["model"]["spec"]))
    cfg = from_jsonable(AblateConfig, manifest["stages"]["ablate"]["config"]).resolved(
        model.n_layers * model.n_heads
    )
    if cfg.ablations[0] != "mean":
        raise SystemExit(
            "this check recomputes mean ablation; the run's curve used " + cfg.ablations[0]
        )
    metrics = stage_metrics(model, cfg)
    means = head_means(model.bridge, stage_corpus(model, cfg, metrics), model.n_layers)
    held_out = [
        it
        for it in stage_corpus(model, cfg, metrics, split=1).items
        if it.eval_set == EVAL_SET[args.metric] and len(it.rows)
    ]
    pruning = pd.read_csv(run / "pruning.csv")
    curve = pruning[(pruning["metric"] == args.metric) & (pruning["removed_by"] == "effect")].head(
        args.steps + 1
    )
    rows, removed = [], []
    for step in curve.itertuples():
        if isinstance(step.last_removed, str):
            removed += [
                (int(h[1:].split("H")[0]), int(h.split("H")[1])) for h in step.last_removed.split()
            ]
        independent = loss(model.bridge, held_out, removed, means)
        rows.append(
            {
                "heads removed": int(step.heads_removed),
                "run's value": float(step.value),
                "independent": independent,
                "difference": independent - float(step.value),
                "last removed": step.last_removed
                if isinstance(step.last_removed, str)
                else "(intact)",
            }
        )
    frame = pd.DataFrame(rows)
    worst = frame["difference"].abs().max()
    body = (
        f"Run `{run.name}` of `{model.name}`, metric `{args.metric}`, mean ablation, on its "
        f"{len(held_out)} held-out sequences ({sum(len(it.rows) for it in held_out)} scored positions): the "
        f"first {len(frame)} points of the curve recomputed with plain hooks on hook_z, one unpadded sequence "
        f"at a time, means over the stage's evaluation corpus.\n\n{markdown(frame)}\n\n"
        f"Largest |difference|: {worst:.2e} nats."
    )
    print(body)
    if not args.no_write:
        write_section(SECTION, SCRIPT, body)


if __name__ == "__main__":
    main()

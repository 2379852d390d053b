"""Benchmark: which estimator of head effects agrees with exact ablation (the one ``--top-k`` trusts).

For each model, on the ablate stage's default evaluation corpus (``AblateConfig()``) and its
default ablation kind (``--kind`` for another): every head ablated exactly (the sweep), every head estimated by first-order
attribution, by AtP* (attribution with the QK fix and GradDrop, :mod:`interp.ablate.atp_star`,
both on the whole corpus) and by integrated gradients over the clean -> ablated path with 1, 2, 4
and 8 steps. Per metric with estimates:

- **recall**: of the ``top`` heads with the largest exact |delta|, the share among the
  estimator's ``window`` largest |estimates|; ``top``/``window`` = 10/30, or a quarter/half of
  the heads for a model with fewer than 60 (on 8 heads, 10-in-30 would be trivially met);
- **spearman**: rank correlation of estimate and exact delta over all heads;
- **seconds**: the estimator's wall time on the corpus (the exact sweep's alongside).

Attribution is measured a second time on the corpus ``--top-k`` gives it (``--positions``,
4000 scored positions per metric by default: the same sequences and more of each eval set,
:func:`interp.ablate.corpora.estimator_corpus`), against the same exact effects. The top-k
selection's rule is measured too: a head's score is its best percentile of |estimate| under
either that attribution or integrated gradients (4 steps, on the sweep's corpus), so a head
that either estimator ranks high is chosen (no Spearman: it ranks, it does not estimate).

Models: planted (hand-set weights: a previous-token head feeding two induction heads that copy),
the planted indirect-object circuit and three random variants of it (interp.synthetic.circuit:
an inhibitor composing into one or two movers, a negative mover and decoys, measured on their
task ``ioi`` beside the built-in metrics), the
toy trained on text with repeats (interp.synthetic.toy: a layer-0 previous-token head feeding
layer-1 induction heads), three models trained on the induction task (interp.synthetic.trained,
seeds 0-2), MiniLM-L6 (encoder: only retrieval_margin has a gradient) and SmolLM2-135M.

Usage: ``python benchmarks/estimators.py [--models planted,circuits,toy,trained,minilm,smollm2] [--positions N] [--no-write]``
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import pandas as pd
import torch
from _results import markdown, write_section  # noqa: E402

from interp.ablate import atp_star  # noqa: E402
from interp.ablate.attribution import attribute  # noqa: E402
from interp.ablate.config import CPU_TOKENS_PER_PASS, ESTIMATOR_POSITIONS  # noqa: E402
from interp.ablate.corpora import estimator_corpus, stage_metrics  # noqa: E402
from interp.ablate.evaluation import build_corpus  # noqa: E402
from interp.ablate.forward import Ablator  # noqa: E402
from interp.ablate.integrated import integrate  # noqa: E402
from interp.ablate.metrics import metric_sizes  # noqa: E402
from interp.ablate.stage import AblateConfig  # noqa: E402
from interp.ablate.stats import SumStore, effects_from_sums  # noqa: E402
from interp.ablate.sweep import exact_sweep  # noqa: E402
from interp.executors.threads import stage_threads  # noqa: E402

SCRIPT = "benchmarks/estimators.py"
STEPS = (1, 2, 4, 8)
SELECTORS = ("wide", "integrated/4")  # what --top-k ranks heads by (interp.ablate.selection)
CIRCUIT_SEEDS = (0, 1, 2)  # random variants of the planted indirect-object circuit
AFFORDABLE = 3_000_000  # heads x tokens: exact ablation on the wide corpus as well, where it takes minutes at most


def recall(exact: pd.Series, estimate: pd.Series, top: int, window: int) -> float:
    """Share of the ``top`` largest |exact| among the ``window`` largest |estimate| (same index)."""
    best = set(exact.abs().sort_values(ascending=False, kind="stable").index[:top])
    seen = set(estimate.abs().sort_values(ascending=False, kind="stable").index[:window])
    return len(best & seen) / len(best)


def missed(exact: pd.Series, estimate: pd.Series, top: int, window: int) -> str:
    """The ``top`` largest |exact| heads not among the ``window`` largest |estimate|, each as
    ``L{layer}H{head} exact/estimate (rank of its |estimate|)``; '' when none is missed."""
    best = exact.abs().sort_values(ascending=False, kind="stable").index[:top]
    rank = estimate.abs().rank(ascending=False, method="first")
    return ", ".join(
        f"L{layer}H{head} {exact[key]:.3f}/{estimate[key]:.3f} ({int(rank[key])})"
        for key in best
        if rank[key] > window
        for _, layer, head in [key]
    )


def sizes(n_heads: int) -> tuple[int, int]:
    return (10, 30) if n_heads >= 60 else (max(1, n_heads // 4), max(2, n_heads // 2))


def deltas(store: SumStore, method: str) -> pd.DataFrame:
    frame = effects_from_sums(store, method, 10, 0)
    return frame.set_index(["metric", "layer", "head"])["delta"].rename(method).to_frame()


def measure(name: str, model, cfg: AblateConfig, kind: str, positions: int) -> list[dict]:
    corpus = build_corpus(
        model,
        cfg.n_prose,
        cfg.n_repeated,
        cfg.repeated_lengths,
        cfg.n_syntax,
        cfg.seed,
        cfg.max_tokens_per_batch,
        tasks=cfg.tasks,
    )
    ablator = Ablator(model)
    heads = [(layer, head) for layer in range(model.n_layers) for head in range(model.n_heads)]
    seconds, frames = {}, []
    start = time.perf_counter()
    attr = attribute(ablator, corpus, (kind,), progress=False)
    seconds["attribution"] = time.perf_counter() - start
    frames.append(deltas(attr.store, "attribution"))
    every = {
        eval_set: n for eval_set, n in corpus.sizes.items()
    }  # QK fix and GradDrop on all of it
    start = time.perf_counter()
    star = atp_star.estimate(
        ablator, corpus, (kind,), attr.means, atp_star.Tiers(every, every), cfg.seed, False
    )
    seconds["atp_star"] = time.perf_counter() - start
    frames.append(deltas(star.store, "atp_star"))
    wide_name = f"attribution, {positions} positions"
    one_round = dataclasses.replace(cfg, max_rounds=1, estimator_positions=positions)
    wide = estimator_corpus(model, one_round, stage_metrics(model, one_round), corpus)
    start = time.perf_counter()
    wide_attr = attribute(ablator, wide, (kind,), progress=False)
    frames.append(deltas(wide_attr.store, wide_name))
    seconds[wide_name] = time.perf_counter() - start
    reference = None
    if (
        len(heads) * wide.n_tokens <= AFFORDABLE
    ):  # the exact effects on the wide corpus too: less sampling noise
        reference = SumStore(metric_sizes(wide.sizes))
        exact_sweep(
            ablator,
            wide,
            reference,
            heads,
            (kind,),
            wide_attr.means,
            None,
            cfg.max_tokens_per_batch,
            progress=False,
        )
        reference = deltas(reference, "exact_wide")
    combined = f"top-k rule: {wide_name} or integrated/4"
    selectors = [wide_name if s == "wide" else s for s in SELECTORS]
    for steps in STEPS:
        start = time.perf_counter()
        store = integrate(ablator, corpus, (kind,), attr.means, steps, progress=False)
        seconds[f"integrated/{steps}"] = time.perf_counter() - start
        frames.append(deltas(store, f"integrated/{steps}"))
    start = time.perf_counter()
    exact = SumStore(metric_sizes(corpus.sizes))
    exact_sweep(
        ablator,
        corpus,
        exact,
        heads,
        (kind,),
        attr.means,
        None,
        cfg.max_tokens_per_batch,
        progress=False,
    )
    seconds["exact"] = time.perf_counter() - start
    table = deltas(exact, "exact").join(pd.concat(frames, axis=1), how="inner")
    if reference is not None:
        table = table.join(reference, how="left")
    top, window = sizes(len(heads))
    rows = []
    for metric, part in table.groupby(level="metric"):
        # The top-k selection's rule: a head's best percentile of |estimate| over both estimators.
        part = part.assign(
            **{
                combined: pd.concat([part[m].abs().rank(pct=True) for m in selectors], axis=1).max(
                    axis=1
                )
            }
        )
        seconds[combined] = sum(seconds[m] for m in selectors)
        for method in [c for c in part.columns if c not in ("exact", "exact_wide")]:
            if part[method].isna().all():  # a metric this estimator does not estimate
                continue
            wide_ok = "exact_wide" in part.columns and part["exact_wide"].notna().all()
            rows.append(
                {
                    "model": name,
                    "metric": metric,
                    "heads": len(heads),
                    "tokens": wide.n_tokens if method in (wide_name, combined) else corpus.n_tokens,
                    "estimator": method,
                    "top_in_window": f"{top} in {window}",
                    "recall": recall(part["exact"], part[method], top, window),
                    "missed": missed(part["exact"], part[method], top, window)
                    if method != combined
                    else "",
                    "spearman": part["exact"].rank().corr(part[method].rank())
                    if method != combined
                    else float("nan"),
                    "recall_wide": recall(part["exact_wide"], part[method], top, window)
                    if wide_ok
                    else float("nan"),
                    "seconds": seconds[method],
                    "exact_seconds": seconds["exact"],
                }
            )
    return rows


def models(names: list[str]):
    """(name, LoadedModel, tasks) in the order asked, each built or loaded when its turn comes."""
    for name in names:
        if name == "planted":
            from interp.synthetic.planted import Planted, planted_model

            copy = Planted("induction", "copy")  # induction heads that copy: a real circuit
            plan = {(1, 0): copy, (1, 1): copy, (0, 1): "previous_token"}
            yield "planted", planted_model(plan), ()
        elif name == "circuits":
            yield from circuits()
        elif name == "toy":
            from interp.synthetic.toy import toy_cached

            yield "toy (prev -> induction)", toy_cached(progress=False).model, ()
        elif name == "trained":
            from interp.synthetic.trained import trained

            for seed in (0, 1, 2):
                yield f"induction task, seed {seed}", trained("induction", seed).model, ()
        else:
            from interp.model.load import load_model

            packaged = {"minilm": "minilm-l6", "smollm2": "smollm2-135m"}[name]
            yield packaged, load_model(packaged), ()


def circuits():
    """The planted indirect-object circuit and variants of it, each with its task
    (interp.synthetic.circuit: an inhibitor composing into movers, a negative mover, decoys)."""
    from interp.synthetic.circuit import planted_circuit, random_circuit

    circuit = planted_circuit()
    yield "IOI circuit, planted", circuit.model, (circuit.task,)
    for seed in CIRCUIT_SEEDS:
        circuit = random_circuit(seed)
        yield f"IOI circuit, seed {seed}", circuit.model, (circuit.task,)


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """Per estimator: the worst recall over (model, metric), the mean, the lowest Spearman."""
    return (
        results.groupby("estimator")
        .agg(
            worst_recall=("recall", "min"),
            mean_recall=("recall", "mean"),
            worst_recall_wide=("recall_wide", "min"),
            worst_spearman=("spearman", "min"),
            mean_spearman=("spearman", "mean"),
        )
        .sort_values(["worst_recall", "mean_recall"], ascending=False)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="planted,circuits,toy,trained,minilm,smollm2")
    parser.add_argument(
        "--kind", default=AblateConfig().ablations[0], help="ablation kind  [default: the stage's]"
    )
    parser.add_argument(
        "--positions",
        type=int,
        default=ESTIMATOR_POSITIONS,
        help="scored positions per metric of the second attribution  [default: --top-k's]",
    )
    parser.add_argument(
        "--no-write", action="store_true", help="print only; leave RESULTS.md alone"
    )
    args = parser.parse_args()
    cfg = AblateConfig(max_tokens_per_batch=CPU_TOKENS_PER_PASS)
    rows = []
    with stage_threads(torch.get_num_threads()):
        for name, model, tasks in models(args.models.split(",")):
            asked = dataclasses.replace(cfg, tasks=tasks)
            measured = measure(name, model, asked, args.kind, args.positions)
            rows += measured
            print(pd.DataFrame(measured).round(3).to_string(index=False), flush=True)
            del model
    results = pd.DataFrame(rows)
    summary = summarise(results)
    print(summary.round(3).to_string())
    if args.no_write:
        return
    shown = results.assign(
        recall=results["recall"].round(2),
        recall_wide=results["recall_wide"].round(2),
        spearman=results["spearman"].round(3),
        seconds=results["seconds"].round(1),
        exact_seconds=results["exact_seconds"].round(1),
    )
    body = (
        f"{args.kind.capitalize()} ablation on the ablate stage's default evaluation corpus (one round); exact = "
        "every head ablated alone. `tokens`: the tokens the estimator read (the exact sweep read the first ones). "
        "recall: share of the `top` heads with the largest exact |delta| among the estimator's `window` largest "
        "|estimates| (10 in 30; a quarter in a half of the heads for models under 60 heads); `missed`: each of "
        "those heads the estimator left out of its window, as exact/estimated delta (rank of its |estimate|). "
        "`integrated/k`: integrated gradients over the clean -> ablated path, k path points. "
        "`recall_wide`: the same recall against exact effects measured on the wide corpus (the one the "
        f"{args.positions}-position attribution read), where that costs at most {AFFORDABLE:,} heads x tokens "
        "(not SmolLM2): exact effects from a few sentences share their sampling noise with an estimate from the "
        "same sentences, which flatters it. "
        f"Metrics without a gradient at the intact model (embedding_cosine) have no estimate.\n\n"
        + markdown(shown)
        + "\n\nPer estimator, over every (model, metric) above:\n\n"
        + markdown(summary.reset_index())
        + f"\n\nBest recall (worst first, then mean): {summary.index[0]!r}. The stage's estimator (the estimates "
        f"in its table): `AblateConfig.estimator` = {cfg.estimator!r}; `--top-k` ranks heads by attribution on "
        f"{ESTIMATOR_POSITIONS} positions per metric or integrated gradients ({cfg.ig_steps} steps, on the sweep's "
        f"corpus), whichever ranks a head higher. The exact effects are themselves measured on the sweep's few "
        f"sequences: where their intervals overlap, the exact top {sizes(270)[0]} is partly sampling noise."
    )
    write_section("estimators", SCRIPT, body)


if __name__ == "__main__":
    main()

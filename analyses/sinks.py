"""Which keys are attention sinks, and how much attention off the sink makes a head do something.

Two measurements behind the sink-aware roles (interp.collect.features, interp.classify.primary):

1. **Which keys are sinks.** For every head, over the default probe suites: the attention mass on
   each kind of key (the first position, [SEP], punctuation, other tokens) next to that kind's
   uniform share of the visible keys, and the norm of what the head reads from such a key, its
   value vector through the output projection, ``|v_k W_O|`` (Kobayashi et al. 2020: attention
   to a key whose transformed value is small is a no-op), relative to ordinary tokens. A sink
   draws much more than its share and writes little.
2. **How much attention off the sink is substantial.** Every head is sink-ablated exactly (its
   output replaced by the value at the first position: all of its attention moved onto the sink,
   interp.ablate.values), which removes precisely what the head does besides sinking, and
   zero-ablated for scale. Heads are binned by their share of attention off the sink on the
   queries where their non-sink label is measured, the share the sink rule reads.

    python analyses/sinks.py [MODEL ...] [--fresh]

Writes the "Attention sinks" section of analyses/RESULTS.md (runs cached by analyses/_runs.py).
"""

from __future__ import annotations

import sys

import _runs  # noqa: E402
import numpy as np
import pandas as pd
import torch

INTRO = (
    "Two measurements behind the sink-aware roles: which keys draw attention as a no-op (much more mass "
    "than their share of the keys, a small value vector through W_O: Kobayashi et al. 2020), and how much "
    "attention off the sink makes a head do something, measured by sink ablation (the head's output "
    "replaced by its value at the first position: all of its attention moved onto the sink), which "
    "removes exactly what a head does besides sinking. Heads are binned by their share of attention off "
    "the sink on the queries where their non-sink label is measured: what the sink rule "
    "(interp.classify.primary) reads."
)
KEY_CLASSES = ("first position", "[SEP] / other specials", "punctuation", "other tokens")
BINS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0001)
ALWAYS_POSITIVE = ("embedding_cosine",)


def key_classes(batch) -> torch.Tensor:
    """float [batch, pos, class]: which KEY_CLASSES each position belongs to (padding: none)."""
    valid = batch.valid
    first = torch.zeros_like(valid)
    first[:, 0] = valid[:, 0]
    specials = batch.is_special & valid & ~first
    punct = batch.is_delim & valid & ~batch.is_special
    other = valid & ~batch.is_special & ~batch.is_delim
    return torch.stack([first, specials, punct, other], -1).float()


def key_class_stats(model) -> pd.DataFrame:
    """Per (layer, head, class): mean attention mass over content queries, the class's uniform
    share, and the mean |v W_O| of its keys relative to other tokens."""
    from interp import CollectConfig
    from interp.collect.features import context
    from interp.collect.stage import build_suites, encode_all
    from interp.model import lens
    from interp.probes.batch import bucket, make_batch

    config = CollectConfig()
    seqs, _ = encode_all(model, config, build_suites(config))
    w_o = lens.output_weights(model.bridge)  # [layer, head, d_head, d_model]
    n_layers, n_heads, n_cls = model.n_layers, model.n_heads, len(KEY_CLASSES)
    mass, norms = np.zeros((n_layers, n_heads, n_cls)), np.zeros((n_layers, n_heads, n_cls))
    share, n_keys, n_queries = np.zeros(n_cls), np.zeros(n_cls), 0.0
    pad = model.tokenizer.pad_token_id or 0
    for group in bucket(seqs, config.cpu_batch_tokens):
        batch = make_batch([seqs[i] for i in group], group, model.causal, pad)
        ctx = context(batch)
        cls = key_classes(batch)
        queries = ctx.content.float()
        share += (
            (
                torch.einsum("bqk,bkc->bqc", ctx.allowed.float(), cls)
                / ctx.n_allowed[..., None]
                * queries[..., None]
            )
            .sum((0, 1))
            .numpy()
        )
        n_queries += float(queries.sum())
        n_keys += cls.sum((0, 1)).numpy()
        values: dict[int, torch.Tensor] = {}

        def keep_v(v: torch.Tensor, layer: int) -> None:  # [batch, pos, kv_head, d_head]
            values[layer] = v.float()

        def on_pattern(p: torch.Tensor, layer: int) -> None:  # [batch, head, q, k]
            mass[layer] += torch.einsum("bhqk,bkc,bq->hc", p.float(), cls, queries).numpy()
            v = values[layer]
            v = v.repeat_interleave(
                n_heads // v.shape[2], dim=2
            )  # grouped-query: one value per KV group
            out = torch.einsum("bkhd,hdm->bkhm", v, w_o[layer]).norm(dim=-1)  # [batch, k, head]
            norms[layer] += torch.einsum("bkh,bkc->hc", out, cls).numpy()

        with torch.inference_mode():
            lens.run(
                model,
                batch.tokens,
                batch.attention_mask,
                [lens.Tap("v", keep_v), lens.Tap("pattern", on_pattern)],
                lens.FinalHidden(),
            )
    with np.errstate(invalid="ignore", divide="ignore"):
        norms = norms / n_keys
        relative = norms / norms[..., -1:]
    layer, head, c = np.meshgrid(
        np.arange(n_layers), np.arange(n_heads), np.arange(n_cls), indexing="ij"
    )
    return pd.DataFrame(
        {
            "layer": layer.ravel(),
            "head": head.ravel(),
            "key": np.array(KEY_CLASSES)[c.ravel()],
            "mass": (mass / n_queries).ravel(),
            "share": np.broadcast_to(share / n_queries, mass.shape).ravel(),
            "value_norm": relative.ravel(),
        }
    )


def sink_table(stats: pd.DataFrame) -> pd.DataFrame:
    """Per key class: mean mass over heads vs its share, heads drawn to it, value norm."""
    rows = []
    for key, g in stats.groupby("key", sort=False):
        if not np.isfinite(g["value_norm"]).any():
            continue
        lift = (g["mass"] - g["share"]) / (1 - g["share"])
        weights = g["mass"] / g["mass"].sum()
        rows.append(
            {
                "key": key,
                "uniform share": g["share"].iloc[0],
                "mean mass (all heads)": g["mass"].mean(),
                "heads with lift > 0.3": int((lift > 0.3).sum()),
                "value norm vs other tokens (median head)": float(np.nanmedian(g["value_norm"])),
                "value norm, mass-weighted": float((g["value_norm"] * weights).sum()),
            }
        )
    return pd.DataFrame(rows)


def nonsink_shares(features: pd.DataFrame) -> pd.Series:
    """Per head, the share off the sink on the queries where its non-sink label is measured."""
    from interp.classify.matrix import head_frames
    from interp.classify.primary import nonsink_share
    from interp.classify.reference.fit import default_classifier

    matrix, sinks = head_frames(features)
    named = default_classifier().predict(matrix).astype(str)
    return pd.Series(nonsink_share(named, sinks), index=matrix.index, name="nonsink")


def per_head(features: pd.DataFrame, effects: pd.DataFrame) -> pd.DataFrame:
    """Per head: non-sink share, sink-ablation effect in units of a large one, whether it is
    measurable, and the ratio of sink- to zero-ablation effects."""
    share = nonsink_shares(features)
    sink = _runs.head_effects(effects, "sink")
    zero = _runs.head_effects(effects, "zero")
    metrics = [m for m in sink.columns if not m.endswith(("_lo", "_hi"))]
    scale = zero[metrics].abs().quantile(0.9)  # a "large" effect on each metric
    size = (sink[metrics].abs() / scale).max(1)  # largest effect in units of a large one
    measurable = pd.Series(False, index=sink.index)
    for m in metrics:
        if m not in ALWAYS_POSITIVE:
            measurable |= (sink[f"{m}_lo"] > 0) | (sink[f"{m}_hi"] < 0)
    frame = pd.DataFrame(
        {
            "nonsink": share,
            "size": size,
            "measurable": measurable,
            "kept": (sink[metrics].abs().sum(1) / zero[metrics].abs().sum(1).replace(0, np.nan)),
        }
    )
    return frame.join(sink[metrics].add_prefix("sink "))


def threshold_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Heads binned by their non-sink share: what sink ablation (removing everything but the
    sink) does, against zero ablation (removing the head)."""
    frame = frame.assign(bin=pd.cut(frame["nonsink"], BINS, right=False))
    out = (
        frame.groupby("bin", observed=True)
        .agg(
            heads=("size", "size"),
            share_measurable=("measurable", "mean"),
            median_effect=("size", "median"),
            max_effect=("size", "max"),
            share_large=("size", lambda s: float((s >= 0.5).mean())),
            sink_over_zero=("kept", "median"),
        )
        .reset_index()
    )
    out["bin"] = out["bin"].astype(str)
    return out


def section(name: str) -> str:
    from interp.model.load import load_model

    model = load_model(name)
    features, _ = _runs.current(name, model)
    effects = _runs.exact_effects(name, model)
    stats = key_class_stats(model)
    heads = per_head(features, effects)
    lowest = heads.nsmallest(6, "nonsink").reset_index()
    lowest.insert(0, "head", [f"L{l}H{h}" for l, h in zip(lowest.pop("layer"), lowest.pop("head"))])
    return (
        f"### {name}\n\nKeys by kind (default probe suites; mass averaged over content queries; value norm "
        f"= |v W_O| relative to other tokens):\n\n{_runs.md(sink_table(stats))}\n\n"
        f"Heads by their share of attention off the sink (on the queries of their non-sink label): "
        f"effect of sink ablation in units of a large zero-ablation effect (the 90th percentile of "
        f"|delta| per metric, largest over metrics), share whose sink-ablation interval excludes 0 on some "
        f"metric (embedding_cosine, a distance that is never negative, left out), share with an effect "
        f">= half a large one, and the median ratio of sink- to zero-ablation effect:\n\n"
        f"{_runs.md(threshold_table(heads))}\n\nThe heads with the least attention off the sink "
        f"(sink-ablation deltas per metric):\n\n{_runs.md(lowest.drop(columns=['kept']))}"
    )


def main(argv: list[str]) -> None:
    names, _ = _runs.main_args(argv)
    body = "\n\n".join(section(n) for n in names)
    _runs.write("Attention sinks", "analyses/sinks.py", INTRO + "\n\n" + body)
    print(body)


if __name__ == "__main__":
    main(sys.argv[1:])

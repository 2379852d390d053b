"""What each trick of interp.model.lens saves against TransformerLens' public API, measured in one run.

Every comparison runs each way on the same inputs in the same process, interleaved batch by
batch (one order, then the reverse, ...) so that a shared machine's drift hits all alike; each
batch keeps its fastest round, and the tables sum those. One torch thread by default: on a
shared 2-core box, two threads stall whenever another process takes a core.

1. **Collect pass** (SmolLM2, the collect stage's own length buckets over a subset of its default
   probes), every layer's pattern streamed to a hook, and then

   - public hooks only (what ``lens.run_patterns`` does): a hook on ``unembed.hook_in`` hands
     the unembedding zero rows, so no logits are computed (the last MLP still runs);
   - the trick it replaced: the last pattern's hook raises TransformerLens'
     ``StopAtLayerException``, ending the pass there;
   - a plain public ``run_with_hooks(..., return_type=None)``: the last MLP and all logits run.
2. **Restarting at a layer** (SmolLM2, the default evaluation corpus of the ablate stage, a
   layer's 9 heads zero-ablated in stacked copies as the sweep does): ``lens.run`` with
   ``start_layer`` (blocks below skipped) against TransformerLens' ``start_at_layer`` alone
   (blocks below run, their output discarded), at layers spread over the model; their mean is
   the sweep's mean (a head of layer l reruns blocks l..29 either way). The readouts are
   compared on the first batch: the public path must give the same numbers on SmolLM2.
3. **Encoder readout** (MiniLM-L6, prose lines): the last block's output with zero rows into
   the unembedding (``lens.FinalHidden``), against stopping the pass after the last block
   (``StopAtLayerException``) and against a full public forward (the random MLM head runs on
   every token).
4. **Causal readout** (SmolLM2, the evaluation corpus): logits at the scored rows only
   (``lens.Rows``: the unembedding runs on those rows) against all logits, then indexed.

Usage: ``flock /tmp/interp-cpu.lock python benchmarks/lens_tricks.py [--threads 1] [--rounds 3] [--no-write]``
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable

import torch
from _results import write_section  # noqa: E402

from interp import AblateConfig, CollectConfig  # noqa: E402
from interp.ablate.config import CPU_TOKENS_PER_PASS  # noqa: E402
from interp.ablate.evaluation import build_corpus  # noqa: E402
from interp.ablate.forward import Ablator, Edit  # noqa: E402
from interp.ablate.sweep import pass_size  # noqa: E402
from interp.collect.stage import build_suites, encode_all  # noqa: E402
from interp.model import lens  # noqa: E402
from interp.model.load import load_model  # noqa: E402
from interp.probes.batch import bucket, make_batch  # noqa: E402

SCRIPT = "benchmarks/lens_tricks.py"
SECTION = "lens_tricks"


def interleaved(
    variants: dict[str, Callable[[object], object]], items: list, rounds: int
) -> dict[str, float]:
    """Seconds per variant over ``items``: each item runs every variant once per round (order
    reversed in odd rounds); per item the fastest round counts."""
    best = {name: [float("inf")] * len(items) for name in variants}
    names = list(variants)
    for r in range(rounds):
        for i, item in enumerate(items):
            for name in names if r % 2 == 0 else names[::-1]:
                start = time.perf_counter()
                variants[name](item)
                best[name][i] = min(best[name][i], time.perf_counter() - start)
    return {name: sum(times) for name, times in best.items()}


def _stop(x, hook) -> None:
    """End the pass here, as TransformerLens' own stop_at_layer does (run_with_hooks catches it)."""
    from transformer_lens.model_bridge.exceptions import StopAtLayerException

    raise StopAtLayerException(x)


ZERO_ROWS = [("unembed.hook_in", lambda x, hook: x[:, :0])]


def collect_pass(model, rounds: int) -> tuple[dict[str, float], str]:
    config = CollectConfig(n_repeated=16, n_syntax=100, max_sentences=60)
    seqs, _ = encode_all(model, config, build_suites(config))
    pad = model.tokenizer.pad_token_id or 0
    batches = [
        make_batch([seqs[i] for i in g], g, model.causal, pad)
        for g in bucket(seqs, config.cpu_batch_tokens)
    ]
    last = model.n_layers - 1

    def lens_pass(b) -> None:
        lens.run_patterns(model, b.tokens, b.attention_mask, lambda layer, p: None)

    def public(b, end: list) -> None:
        hooks = [(lens.hook_name("pattern", layer), lambda x, hook: None) for layer in range(last)]
        with torch.inference_mode():
            model.bridge.run_with_hooks(
                b.tokens, attention_mask=b.attention_mask, return_type=None, fwd_hooks=hooks + end
            )

    times = interleaved(
        {
            "zero rows into the unembedding (lens)": lens_pass,
            "stop at the last pattern (StopAtLayerException)": lambda b: public(
                b, [(lens.hook_name("pattern", last), _stop)]
            ),
            "public: full forward": lambda b: public(
                b, [(lens.hook_name("pattern", last), lambda x, hook: None)]
            ),
        },
        batches,
        rounds,
    )
    n_tokens = sum(int(b.attention_mask.sum()) for b in batches)
    return times, f"{len(seqs)} probe sequences, {n_tokens} tokens, {len(batches)} batches"


@contextlib.contextmanager
def public_restart():
    """TransformerLens' start_at_layer alone: the blocks below the restart run again."""
    saved = lens._skipping_blocks
    lens._skipping_blocks = lambda bridge, start_layer, resid: contextlib.nullcontext()
    try:
        yield
    finally:
        lens._skipping_blocks = saved


def restart(
    model, layers: list[int], rounds: int
) -> tuple[dict[int, dict[str, float]], float, str]:
    cfg = AblateConfig(max_tokens_per_batch=CPU_TOKENS_PER_PASS)
    corpus = build_corpus(
        model,
        cfg.n_prose,
        cfg.n_repeated,
        cfg.repeated_lengths,
        cfg.n_syntax,
        cfg.seed,
        cfg.max_tokens_per_batch,
    )
    ablator = Ablator(model)
    cleans = [ablator.clean(b, keep_resid=True) for b in corpus.batches]
    assert ablator.check_reuse(corpus.batches[0], cleans[0]), (
        "restarting is not exact on this model"
    )
    items = list(zip(corpus.batches, cleans))
    worst = 0.0
    out: dict[int, dict[str, float]] = {}
    for layer in layers:

        def args(item):
            batch, clean = item
            k = min(model.n_heads, pass_size(batch, None, cfg.max_tokens_per_batch))
            edits = [Edit(layer, h, torch.zeros(()), replica=h) for h in range(k)]
            return batch, edits, k, clean.resid_pre[layer]

        def skip(item):
            batch, edits, k, resid = args(item)
            return ablator.run(batch, edits, replicas=k, start_layer=layer, resid=resid)

        def public(item):
            with public_restart():
                return skip(item)

        worst = max(worst, float((skip(items[0]) - public(items[0])).abs().max()))
        out[layer] = interleaved(
            {"skip the blocks below (lens)": skip, "public: start_at_layer": public}, items, rounds
        )
    shapes = f"{len(corpus.batches)} batches, {sum(b.tokens.numel() for b in corpus.batches)} padded tokens"
    return out, worst, shapes


def encoder_readout(model, rounds: int) -> tuple[dict[str, float], str]:
    corpus = build_corpus(model, 24, 0, (10,), 0, 0, 2048)
    last = lens.hook_name("out", model.n_layers - 1)

    def lens_pass(b):
        with torch.inference_mode():
            return lens.run(model, b.tokens, b.attention_mask, [], lens.FinalHidden())

    def public(b, stop: bool = False):
        box: list = []
        keep = (
            (lambda x, hook: (box.append(x), _stop(x, hook)))
            if stop
            else (lambda x, hook: box.append(x))
        )
        with torch.inference_mode():
            model.bridge.run_with_hooks(
                b.tokens,
                attention_mask=b.attention_mask,
                return_type=None,
                fwd_hooks=[(last, keep)],
            )
        return box[0]

    for b in corpus.batches:
        assert torch.equal(lens_pass(b), public(b)), "the lens readout differs from the full pass's"
    times = interleaved(
        {
            "zero rows into the unembedding (lens)": lens_pass,
            "stop after the last block (StopAtLayerException)": lambda b: public(b, stop=True),
            "public: full forward": public,
        },
        corpus.batches,
        rounds,
    )
    return (
        times,
        f"{len(corpus.batches)} batches, {sum(b.tokens.numel() for b in corpus.batches)} padded tokens",
    )


def causal_readout(model, rounds: int) -> dict[str, float]:
    cfg = AblateConfig(max_tokens_per_batch=CPU_TOKENS_PER_PASS)
    corpus = build_corpus(
        model,
        cfg.n_prose,
        cfg.n_repeated,
        cfg.repeated_lengths,
        cfg.n_syntax,
        cfg.seed,
        cfg.max_tokens_per_batch,
    )

    def rows(b):
        with torch.inference_mode():
            return lens.run(
                model, b.tokens, b.attention_mask, [], lens.Rows(b.row_batch, b.row_pos)
            )

    def full(b):
        with torch.inference_mode():
            return model.bridge(b.tokens, attention_mask=b.attention_mask)[b.row_batch, b.row_pos]

    for b in corpus.batches:
        torch.testing.assert_close(
            rows(b), full(b), rtol=1e-5, atol=1e-4
        )  # other matmul shapes: fp32 rounding
    return interleaved(
        {"logits at the scored rows (lens)": rows, "public: all logits, then indexed": full},
        corpus.batches,
        rounds,
    )


def table(times: dict[str, float], trick: str) -> str:
    lines = ["| pass | seconds | vs the trick |", "| --- | ---: | ---: |"]
    lines += [f"| {name} | {s:.2f} | {s / times[trick]:.2f}x |" for name, s in times.items()]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (1: a shared 2-core box's other core cannot stall it)",
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="interleaved rounds; each batch keeps its fastest"
    )
    parser.add_argument(
        "--layers",
        type=int,
        nargs="+",
        default=[1, 15, 29],
        help="restart layers to time (their mean stands for the sweep's)",
    )
    parser.add_argument(
        "--no-write", action="store_true", help="print only; leave RESULTS.md alone"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    smollm2 = load_model("smollm2-135m")
    collect_times, collect_shape = collect_pass(smollm2, args.rounds)
    print(table(collect_times, "zero rows into the unembedding (lens)"), flush=True)
    restarts, worst, restart_shape = restart(smollm2, args.layers, args.rounds)
    print(restarts, worst, flush=True)
    causal_times = causal_readout(smollm2, args.rounds)
    del smollm2
    minilm = load_model("minilm-l6")
    encoder_times, encoder_shape = encoder_readout(minilm, args.rounds)

    skip_total = sum(t["skip the blocks below (lens)"] for t in restarts.values())
    public_total = sum(t["public: start_at_layer"] for t in restarts.values())
    per_layer = [
        "| restart layer | skip the blocks below (lens) | public: start_at_layer | ratio |",
        "| ---: | ---: | ---: | ---: |",
    ]
    per_layer += [
        f"| {layer} | {t['skip the blocks below (lens)']:.2f} s | {t['public: start_at_layer']:.2f} s | "
        f"{t['public: start_at_layer'] / t['skip the blocks below (lens)']:.2f}x |"
        for layer, t in restarts.items()
    ]
    body = "\n".join(
        [
            f"SmolLM2-135M and MiniLM-L6, float32, {args.threads} torch thread(s), TransformerLens "
            f"{lens.installed_version()}. Seconds summed over batches, each batch the fastest of {args.rounds} interleaved "
            "rounds.",
            "",
            f"**1. Collect pass** (SmolLM2, a subset of the default probes: {collect_shape}):",
            "",
            table(collect_times, "zero rows into the unembedding (lens)"),
            "",
            f"**2. Restarting at a layer** (SmolLM2, default evaluation corpus: {restart_shape}; every head of the layer "
            f"zero-ablated in stacked copies, as the sweep does). Largest |difference| between the two paths' logits "
            f"(first batch, each layer): "
            f"{worst:.3g}.",
            "",
            "\n".join(per_layer),
            "",
            f"Mean over these layers (the sweep's mean): skipping {skip_total:.1f} s, public {public_total:.1f} s: "
            f"the public path makes the exact sweep **{public_total / skip_total:.2f}x** as long.",
            "",
            f"**3. Encoder readout** (MiniLM-L6, 24 prose lines and their views: {encoder_shape}):",
            "",
            table(encoder_times, "zero rows into the unembedding (lens)"),
            "",
            "**4. Causal readout** (SmolLM2, default evaluation corpus, intact passes):",
            "",
            table(causal_times, "logits at the scored rows (lens)"),
        ]
    )
    print(body)
    if not args.no_write:
        write_section(SECTION, SCRIPT, body)


if __name__ == "__main__":
    main()

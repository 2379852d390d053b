"""Measure a stage's peak memory against interp.model.memory's estimate, in this (fresh) process.

    python tests/unit/memory_probe.py collect|ablate MODEL '{"n_syntax": 100}'

prints one JSON line: the estimate and the measured peak, in bytes. The model is warmed up
first (every weight read once, since a memory-mapped file is paged in lazily, and one tiny
forward to initialise the kernels), then the stage runs
and the kernel's high-water mark of the resident size is read (interp.model.memory.measure_peak).
Run it with MALLOC_MMAP_THRESHOLD_=65536 to measure live tensors (what the estimate counts),
without it to see glibc's default allocator on top. Used by tests/unit/test_memory.py and
benchmarks/memory_estimate.py.
"""

from __future__ import annotations

import json
import sys

import torch


def load(name: str):
    if name.startswith("tiny"):
        import tiny_models

        return getattr(tiny_models, name.replace("-", "_"))()
    from interp.model.load import load_model

    return load_model(name)


def collect_case(model, kwargs: dict) -> tuple[float, object]:
    from interp import CollectConfig
    from interp.collect.shards import Treebanks
    from interp.collect.stage import accumulated_columns, build_suites, collect, encode_all
    from interp.model import memory
    from interp.probes.batch import bucket

    config = CollectConfig(**kwargs)
    seqs, aligner, _ = encode_all(model, config, build_suites(config))
    groups = [(len(g), max(len(seqs[i]) for i in g)) for g in bucket(seqs, config.cpu_batch_tokens)]
    relations = tuple(aligner.relations)
    n_features = accumulated_columns(
        relations, len(Treebanks.of(seqs, relations, config.pool_syntax).corpora)
    )
    estimate = memory.collect_peak(memory.Shape.of(model), groups, n_features, config.n_bootstrap)
    return estimate, lambda: collect(model, config, progress=False)


def ablate_case(model, kwargs: dict) -> tuple[float, object]:
    from interp import AblateConfig
    from interp.ablate.corpora import (
        asked_sizes,
        estimator_corpus,
        opening_corpus,
        stage_corpus,
        stage_metrics,
    )
    from interp.ablate.pruning import step_sizes
    from interp.ablate.sequential import rounds
    from interp.ablate.stage import ablate
    from interp.ablate.sweep import pass_size
    from interp.model import memory

    quick = kwargs.pop("quick", False)  # --quick's form of the config
    config = AblateConfig(threads=1, **kwargs)
    config = config.for_quick() if quick else config
    cfg = config.resolved(model.n_layers * model.n_heads)
    metrics = stage_metrics(model, cfg)
    corpus = stage_corpus(model, cfg, metrics)
    # the passes the stage makes (interp.ablate.estimate): the heads' means and the second
    # opinions on the opening rounds, the estimator on its own wider corpus, the sweep round by round
    pad = model.tokenizer.pad_token_id or 0
    parts = rounds(corpus, cfg.n_rounds, cfg.tokens_per_pass, pad, asked=asked_sizes(model, cfg))
    opening = opening_corpus(model, cfg, metrics, corpus)
    batches = [*opening.batches]
    if cfg.attribution or cfg.top_k is not None:
        batches += estimator_corpus(model, cfg, metrics, opening).batches
    batches += [b for part in parts for b in part.batches]
    steps = len(step_sizes(model.n_layers * model.n_heads, cfg.prune_step)) if cfg.prune else 0
    most = max(cfg.heads_per_pass or model.n_heads, steps)
    shapes = [
        (
            len(b),
            b.tokens.shape[1],
            len(b.row_batch),
            min(most, pass_size(b, None, cfg.max_tokens_per_batch)),
        )
        for b in batches
    ]
    return memory.ablate_peak(memory.Shape.of(model), shapes), lambda: ablate(
        model, config, progress=False
    )


def main() -> None:
    from interp.model import memory
    from interp.model.lens import run_patterns

    stage, name, kwargs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    torch.set_num_threads(1)
    model = load(name)
    with torch.inference_mode():  # page every weight in: a memory-mapped file is read lazily
        for tensor in [*model.bridge.parameters(), *model.bridge.buffers()]:
            tensor.sum()
    warm = torch.randint(5, 500, (2, 8))
    run_patterns(model, warm, torch.ones_like(warm), lambda layer, pattern: None)
    estimate, run = {"collect": collect_case, "ablate": ablate_case}[stage](model, kwargs)
    measured = memory.measure_peak(run)
    print(
        json.dumps(
            {
                "stage": stage,
                "model": name,
                "config": kwargs,
                "estimate": estimate,
                "measured": measured,
            }
        )
    )


if __name__ == "__main__":
    main()

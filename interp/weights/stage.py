"""Weights stage: what every head writes and whom it works with, read from its weights.

It writes two tables (schema in ``interp/pipeline/tables.tsv``):

- ``weights``: one row per (layer, head, score): the OV scores (``copying``, ``copy_rate``,
  ``suppression_rate``, ``successor``; :mod:`interp.weights.ov`) read through the embedding and
  the unembedding, and ``output_size`` (:mod:`interp.weights.output`), each beside its null and
  a bootstrap interval;
- ``composition``: one row per (kind, reading head, earlier writing head): Q-, K- and
  V-composition (:mod:`interp.weights.composition`) beside the random-matrix baseline, and
  the writer's rank among the reader's earlier heads.

A score the model cannot have is NaN for every head, and the reason is in the manifest
(``stages.weights.unscored``): an encoder, or a bridge without an embedding or unembedding, has
no OV scores, but its output sizes and composition; a vocabulary without ordinal sequences has
no successor score. How the weights were read (what was folded, which embedding, whether the
unembedding is tied, how many tokens) is recorded beside it (``stages.weights.reading``), and
where the stage's seconds went (``stages.weights.timings``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from interp.collect.config import CPU_TOKENS_PER_BATCH
from interp.model.load import LoadedModel
from interp.model.vocab import ordinary_ids
from interp.pipeline import rundir
from interp.pipeline.contract import StageRecord, loaded
from interp.weights import composition, output
from interp.weights.config import WeightsConfig
from interp.weights.evidence import OV_SCORES, Score, Tokens, ov_evidence
from interp.weights.ordinals import MIN_ITEMS, ordinal_sequences
from interp.weights.read import HeadWeights, read_heads, read_vocabulary, token_inputs

SCORES = (*OV_SCORES, "output_size")
NO_ORDINALS = (
    f"the vocabulary has no ordinal sequence (numbers, number words, ordinal words, days, months, "
    f"letters) of {MIN_ITEMS} or more items that are single tokens"
)


@dataclass
class WeightsResult:
    weights: pd.DataFrame  # the weights table
    composition: pd.DataFrame  # the composition table
    unscored: dict[str, str] = field(default_factory=dict)  # score -> why it is NaN everywhere
    reading: dict[str, Any] = field(default_factory=dict)  # how the weights were read
    timings: dict[str, float] = field(default_factory=dict)  # seconds per part


def weights(
    model: LoadedModel, config: WeightsConfig = WeightsConfig(), progress: bool = True
) -> WeightsResult:
    """Every head's weight evidence and every pair's composition (see the module doc)."""
    generator = torch.Generator().manual_seed(config.seed)
    timings: dict[str, float] = {}
    with tqdm(total=3, desc="weights", unit="part", disable=not progress) as bar:
        start = time.perf_counter()
        heads = read_heads(model)
        scores, unscored, reading = _ov_scores(model, heads, config, generator)
        timings["ov"] = time.perf_counter() - start
        bar.update()
        start = time.perf_counter()
        size, n_sequences = _output_size(model, config, generator)
        if size is None:
            unscored["output_size"] = "no probe sequence could be encoded for this model"
        else:
            scores["output_size"] = size
            reading.update(output_sequences=n_sequences, output_positions=size.n)
        timings["output_size"] = time.perf_counter() - start
        bar.update()
        start = time.perf_counter()
        d_model, d_head = heads.w_q.shape[2:]
        null = {
            kind: composition.random_scores(kind, config.n_null, d_model, d_head, generator)
            for kind in composition.KINDS
        }
        comp = composition_table(composition.all_scores(heads), null)
        timings["composition"] = time.perf_counter() - start
        bar.update()
    table = weights_table(scores, heads.n_layers, heads.n_heads)
    return WeightsResult(table, comp, unscored, reading, timings)


def _ov_scores(
    model: Any, heads: HeadWeights, config: WeightsConfig, generator: torch.Generator
) -> tuple[dict[str, Score], dict[str, str], dict[str, Any]]:
    """The OV scores of every head, the ones the model cannot have (and why), and how the
    vocabulary was read."""
    vocab = read_vocabulary(model)
    reading: dict[str, Any] = {"folded": heads.folded, "tied_unembedding": vocab.tied}
    if vocab.embed is not None and vocab.unembed is not None:
        limit = min(vocab.embed.shape[0], vocab.unembed.shape[1])
        pool = torch.tensor(ordinary_ids(model.tokenizer, limit), dtype=torch.long)
        if not len(pool):
            vocab = replace(vocab, missing="the tokenizer has no ordinary (non-special) token")
    if vocab.missing or vocab.unembed is None:
        return {}, {name: vocab.missing for name in OV_SCORES}, reading
    take = torch.randperm(len(pool), generator=generator)[: config.n_tokens]
    ordinals = ordinal_sequences(model.tokenizer, limit)
    tokens, ids = Tokens.of(pool[take], ordinals)  # in random order: see BOOTSTRAP_BLOCKS
    inputs = token_inputs(model, ids)
    scores = ov_evidence(
        heads,
        vocab.unembed,
        inputs,
        tokens,
        config.top_k,
        config.n_null,
        config.n_bootstrap,
        generator,
    )
    unscored = {}
    if not ordinals:
        unscored["successor"] = NO_ORDINALS
    if config.top_k >= len(tokens.sample):
        few = (
            f"the vocabulary has {len(tokens.sample)} ordinary tokens, not more than top_k = "
            f"{config.top_k}: every token would rank among the top k of its row"
        )
        unscored.update(copy_rate=few, suppression_rate=few)
    reading.update(
        embedding=inputs.how,
        n_tokens=len(tokens.sample),
        top_k=config.top_k,
        ordinals={o.name: len(o.ids) for o in ordinals},
    )
    return scores, unscored, reading


def _output_size(
    model: Any, config: WeightsConfig, generator: torch.Generator
) -> tuple[Score | None, int]:
    """Every head's output size on a few prose and repeated-token probes (None: no probe)."""
    from interp.probes.align import Aligner
    from interp.probes.prose import prose_suite

    aligner = Aligner(model)
    seqs = aligner.encode_suite(prose_suite(config.n_prose)) if config.n_prose else []
    seqs += aligner.repeated(config.n_repeated, (config.repeated_length,), config.seed)
    if not seqs:
        return None, 0
    sums = output.output_sums(model, seqs, CPU_TOKENS_PER_BATCH)
    weights = torch.poisson(torch.ones(config.n_bootstrap, len(seqs)), generator=generator)
    value = output.output_size(sums)
    return Score(value, output.output_size(sums, weights), None, sums.positions), len(seqs)


def weights_table(scores: dict[str, Score], n_layers: int, n_heads: int) -> pd.DataFrame:
    """The weights table: every score of :data:`SCORES` for every head, NaN where unscored."""
    layer, head = np.divmod(np.arange(n_layers * n_heads), n_heads)
    frames = []
    for name in SCORES:
        columns: dict[str, Any] = {"layer": layer, "head": head, "score": name}
        score = scores.get(name)
        if score is None:
            columns.update(dict.fromkeys(_NUMBERS, np.nan), n=0)
        else:
            columns.update(_summary(score), n=score.n)
        frames.append(pd.DataFrame(columns))
    return pd.concat(frames, ignore_index=True)


_NUMBERS = ("value", "baseline", "null_low", "null_high", "ci_low", "ci_high")


def _summary(score: Score) -> dict[str, np.ndarray]:
    """Value, null mean and quantiles (per head, from its layer's null row) and bootstrap
    interval, each flat in (layer, head) order."""
    value = score.value.double()
    reps = score.replicates.double()
    n_layers, n_heads = value.shape
    if score.null is None:  # no null: the baseline is the model's median head
        finite = value[value.isfinite()]
        middle = float(finite.median()) if len(finite) else float("nan")
        baseline = torch.full_like(value, middle)
        low = high = torch.full_like(value, float("nan"))
    else:
        null = score.null.double()
        row = torch.tensor([0] + [1] * (n_layers - 1))
        stats = torch.stack(
            [null.mean(-1), *null.quantile(torch.tensor([0.025, 0.975], dtype=null.dtype), dim=-1)]
        )
        baseline, low, high = (s[row][:, None].expand(n_layers, n_heads) for s in stats)
    ci = reps.nanquantile(torch.tensor([0.025, 0.975], dtype=reps.dtype), dim=0)
    out = dict(
        value=value,
        baseline=baseline,
        null_low=low,
        null_high=high,
        ci_low=ci[0],
        ci_high=ci[1],
    )
    return {k: v.reshape(-1).numpy() for k, v in out.items()}


def composition_table(scores: torch.Tensor, null: dict[str, torch.Tensor]) -> pd.DataFrame:
    """The composition table from ``scores`` ``[kind, layer, head, writer_layer, writer_head]``
    (every writer in an earlier layer) and each kind's random-pair scores."""
    frames = []
    for k, kind in enumerate(composition.KINDS):
        block = scores[k].numpy()
        n_layers, n_heads = block.shape[:2]
        earlier = np.arange(n_layers)[None, :] < np.arange(n_layers)[:, None]  # [layer, writer]
        pairs = np.broadcast_to(earlier[:, None, :, None], block.shape)
        layer, head, w_layer, w_head = np.nonzero(pairs)
        draws = null[kind].double()
        frames.append(
            pd.DataFrame(
                {
                    "kind": kind,
                    "layer": layer,
                    "head": head,
                    "writer_layer": w_layer,
                    "writer_head": w_head,
                    "value": block[layer, head, w_layer, w_head].astype(np.float64),
                    "baseline": float(draws.mean()),
                    "null_low": float(draws.quantile(0.025)),
                    "null_high": float(draws.quantile(0.975)),
                }
            )
        )
    table = pd.concat(frames, ignore_index=True)
    # rank 1: the writer this reader reads most this way; ties: the earlier writer first; NaN
    # (a head with a NaN weight) after every score
    table["rank"] = (
        table.groupby(["kind", "layer", "head"], sort=False)["value"]
        .rank(method="first", ascending=False, na_option="bottom")
        .astype(np.int64)
    )
    return table


def partners(
    table: pd.DataFrame, layer: int, head: int, kind: str = "k", top: int = 3
) -> pd.DataFrame:
    """The ``top`` earlier heads that head (``layer``, ``head``) reads most by ``kind``
    composition (``k``: whose output its keys read, as an induction head's read the
    previous-token head), best first."""
    mine = table[(table["kind"] == kind) & (table["layer"] == layer) & (table["head"] == head)]
    return mine.nsmallest(top, "rank").reset_index(drop=True)


def write(run_dir: Path, result: WeightsResult) -> None:
    rundir.write_table(run_dir, "weights", result.weights)
    rundir.write_table(run_dir, "composition", result.composition)


@dataclass(frozen=True)
class WeightsRecord(StageRecord):
    """What the manifest records about a weights run."""

    unscored: dict[str, str]  # score -> why every head's value is NaN
    reading: dict[str, Any]  # what was folded, which embedding, tied or not, tokens, ordinals
    timings: dict[str, float]  # seconds: OV scores, output sizes, composition


def run_stage(
    run_dir: Path,
    model: LoadedModel | None,
    config: WeightsConfig = WeightsConfig(),
    progress: bool = True,
) -> WeightsRecord:
    """The weights stage of a run: compute, write both tables, record what was not scored."""
    result = weights(loaded(model, "weights"), config, progress)
    write(run_dir, result)
    return WeightsRecord(result.unscored, result.reading, result.timings)

"""Collect stage: one streaming pass over the probe suites -> the features and syntax tables.

The model runs batch by batch under ``torch.inference_mode()``, in shards whose sums merge
exactly (:mod:`interp.collect.shards`); a hook on every layer's
``hook_pattern`` folds that layer's pattern into the feature accumulator and the per-treebank
syntax accumulator (:mod:`interp.collect.syntax_table`) and lets it go, so
neither the corpus' patterns nor even one batch's 30 layers are ever held at once. Nothing else
is cached, and no logits are computed: features only need attention, so the unembedding (a fifth
of SmolLM2's forward, with its 49k-token vocabulary) does no work (:func:`interp.model.lens.run_patterns`).

The same hook sums every head's sink mass per suite (:mod:`interp.collect.sinks`: the ``sinks``
table). A suite asked for but skipped (a tokenizer that cannot express it, see
:mod:`interp.probes.align`) is recorded with the reason in the manifest
(``stages.collect.skipped_suites``); the features it feeds are NaN, and the classify stage says
which heads' roles they could have decided.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from interp.collect.config import CollectConfig
from interp.collect.exemplars import Exemplars, write_exemplars
from interp.collect.features import DIRECTIONS, STATIC_FEATURES
from interp.collect.measured import check_measured, measured, measured_mask
from interp.collect.shards import CollectJob, Treebanks, partition, run_shards
from interp.errors import CorpusError
from interp.executors.choice import check_executor, open_executor
from interp.executors.threads import choose_threads, stage_threads
from interp.model import memory
from interp.model.load import LoadedModel
from interp.pipeline import rundir
from interp.pipeline.contract import StageRecord, loaded
from interp.probes.align import Aligner
from interp.probes.base import ProbeSequence, Suite
from interp.probes.batch import bucket
from interp.probes.frequent import mark_frequent
from interp.probes.readers import read_corpus


@dataclass
class CollectResult:
    features: pd.DataFrame
    sequences: list[ProbeSequence]
    corpora: dict[str, dict[str, Any]]  # suite -> n_sequences, n_tokens, hash
    relations: tuple[str, ...]
    replicates: np.ndarray  # float [replicate, layer, feature, head]: bootstrap values
    names: list[str]  # feature names, in the replicates' feature order
    exemplars: Exemplars | None = (
        None  # every head's pattern on a few short probes (the report draws them)
    )
    syntax: pd.DataFrame | None = (
        None  # the syntax table: each treebank's best heads per relation and direction
    )
    syntactic_corpora: tuple[
        str, ...
    ] = ()  # the treebanks the features' syntactic:* values rest on
    sinks: pd.DataFrame | None = None  # the sinks table: every head's sink mass per suite
    skipped: dict[str, str] = field(
        default_factory=dict
    )  # suites asked for but skipped -> why (interp.probes.align)
    threads: int = 1  # the torch threads collection ran with (interp.executors.threads)
    executor: dict[str, Any] = field(default_factory=dict)  # where its shards ran, for the manifest
    # the corpus's frequent token types, commonest first, as text (interp.probes.frequent)
    frequent_types: list[str] = field(default_factory=list)


def build_suites(config: CollectConfig) -> list[Suite]:
    """The word-level suites a config asks for (repeated tokens are made per tokenizer later)."""
    from interp.probes.grammar import syntax_suite
    from interp.probes.prose import prose_suite

    suites: list[Suite] = []
    if "prose" in config.suites:
        suites.append(prose_suite(config.max_sentences))
    if "syntax" in config.suites and config.n_syntax:
        suites.append(syntax_suite(config.n_syntax, config.seed))
    taken = {s.name for s in suites}
    for path in config.corpora:
        suite = user_suite(path, read_corpus(path, config.text_column, config.max_sentences), taken)
        taken.add(suite.name)
        suites.append(suite)
    return suites


def user_suite(path: str, sentences: list, taken: AbstractSet[str] = frozenset()) -> Suite:
    """A user corpus: syntactic if it carries gold arcs (CoNLL-U), natural text otherwise. Its
    name is ``user:<file stem>`` (numbered if two files share a stem), never a built-in suite's:
    a file called prose.txt is not merged into the shipped prose suite."""
    from interp.probes.base import NATURAL, SYNTAX

    kind = SYNTAX if any(s.arcs for s in sentences) else NATURAL
    name = f"user:{Path(path).stem}"
    name = next(
        n for n in (name, *(f"{name}-{i}" for i in range(2, len(taken) + 3))) if n not in taken
    )
    return Suite(name, kind, tuple(sentences), card=f"user corpus {path}")


def encode_all(
    model: LoadedModel, config: CollectConfig, suites: list[Suite]
) -> tuple[list[ProbeSequence], Aligner, list[int]]:
    """Every probe sequence for this model, its tokens of the frequent types marked, the aligner
    that encoded them, and those types (token ids, commonest first)."""
    aligner = Aligner(model, config.max_seq_len)
    seqs: list[ProbeSequence] = []
    for suite in suites:
        seqs += aligner.encode_suite(suite)
    if "repeated" in config.suites and config.n_repeated:
        seqs += aligner.repeated(config.n_repeated, config.repeated_lengths, config.seed)
    if not seqs:
        raise CorpusError("no probe sequences: choose at least one suite or corpus")
    frequent = mark_frequent(seqs, unknown=model.tokenizer.unk_token_id)
    return seqs, aligner, frequent


def corpus_summary(seqs: list[ProbeSequence]) -> dict[str, dict[str, Any]]:
    from interp.pipeline.provenance import corpus_hash

    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(s.suite for s in seqs):
        mine = [s for s in seqs if s.suite == name]
        out[name] = {
            "kind": mine[0].kind,
            "n_sequences": len(mine),
            "n_tokens": int(sum(len(s) for s in mine)),
            "hash": corpus_hash([",".join(map(str, s.tokens.tolist())) for s in mine]),
        }
    return out


def accumulated_columns(relations: tuple[str, ...], n_treebanks: int) -> int:
    """Per-head columns kept with their bootstrap replicates (what interp.model.memory counts as
    features): the features, and the syntax accumulator's sums per treebank, which count as
    that many more sets of syntactic features."""
    return len(STATIC_FEATURES) + len(DIRECTIONS) * len(relations) * (1 + n_treebanks)


def batch_budget(
    model: LoadedModel,
    config: CollectConfig,
    seqs: list[ProbeSequence],
    relations: tuple[str, ...],
    n_treebanks: int = 0,
) -> int:
    """Padded tokens per batch: the configured budget, or less where memory is short (see
    interp.model.memory; refused with one line when not even the longest probe fits); none
    configured: 4096 on a CPU, grown to the free memory on an accelerator."""

    def groups(budget: int) -> list[tuple[int, int]]:
        return [(len(g), max(len(seqs[i]) for i in g)) for g in bucket(seqs, budget)]

    n_features = accumulated_columns(relations, n_treebanks)
    configured = config.max_tokens_per_batch
    return memory.collect_budget(
        memory.Shape.of(model),
        [len(s) for s in seqs],
        config.cpu_batch_tokens,
        n_features,
        config.n_bootstrap,
        groups,
        model.device,
        grow=configured is None and model.device != "cpu",
    )


def collect(
    model: LoadedModel,
    config: CollectConfig = CollectConfig(),
    suites: list[Suite] | None = None,
    progress: bool = True,
) -> CollectResult:
    """Gather every head's features over the probe suites in one streaming pass, shard by shard
    (:mod:`interp.collect.shards`), the shards' sums merged in shard order."""
    suites = build_suites(config) if suites is None else suites
    seqs, aligner, frequent_ids = encode_all(model, config, suites)
    frequent = [model.tokenizer.decode([t]) for t in frequent_ids]
    relations = tuple(aligner.relations)
    treebanks = Treebanks.of(seqs, relations, config.pool_syntax)
    groups = bucket(seqs, batch_budget(model, config, seqs, relations, len(treebanks.corpora)))
    job = CollectJob(
        tuple(seqs),
        relations,
        treebanks,
        config.local_window,
        config.n_bootstrap,
        config.seed,
        config.exemplar_tokens,
        model.tokenizer.pad_token_id or 0,
    )
    shards = partition(groups)
    threads = choose_threads(config.threads)
    start = time.perf_counter()
    with (
        stage_threads(threads.n),
        open_executor(config, model, threads.n, most=len(shards)) as executor,
        tqdm(total=len(seqs), desc="collect", unit="seq", disable=not progress) as bar,
    ):
        state = run_shards(executor, model, job, shards, bar.update)
    if not progress:  # one line where the bars are off, as the ablate stage's phases
        print(
            f"collect: {len(seqs)} sequences in {len(shards)} shard(s) on {executor.name}, {threads} "
            f"done in {time.perf_counter() - start:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    features = unmeasured_as_nan(state.features.table())
    heads = measured_mask(
        features, pd.MultiIndex.from_product([range(model.n_layers), range(model.n_heads)])
    )
    table = state.syntax.table(
        heads.reshape(model.n_layers, model.n_heads),
        treebanks.in_features,
        config.syntax_heads,
        lambda ids: model.tokenizer.decode(list(ids)).strip(),
    )
    return CollectResult(
        features,
        seqs,
        corpus_summary(seqs),
        relations,
        state.features.replicates(),
        state.features.names,
        state.exemplars.result(),
        table,
        treebanks.in_features,
        state.sinks.table(),
        dict(aligner.skipped),
        threads.n,
        executor.record(),
        frequent,
    )


def unmeasured_as_nan(features: pd.DataFrame) -> pd.DataFrame:
    """Every value of a head whose attention was NaN or infinite set to NaN (interp.collect.measured):
    an argmax over NaN attention still picks a word, and must not read as a syntactic score."""
    ok = measured(features)
    if ok.all():
        return features
    lost = ~ok.reindex(
        pd.MultiIndex.from_arrays([features["layer"].astype(int), features["head"].astype(int)])
    ).to_numpy()
    features = features.copy()
    for column in ("value", "raw", "ci_low", "ci_high", "sink_mass"):
        if column in features.columns:
            features.loc[lost, column] = np.nan
    return features


def write(run_dir: Path, result: CollectResult) -> None:
    """Write the features and syntax tables, the features' bootstrap replicates and the corpus facts into the run."""
    rundir.write_table(run_dir, "features", result.features)
    if result.syntax is not None:
        rundir.write_table(run_dir, "syntax", result.syntax)
    if result.sinks is not None:
        rundir.write_table(run_dir, "sinks", result.sinks)
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer, values=result.replicates.astype(np.float32), names=np.array(result.names)
    )
    rundir.write_bytes(run_dir / "feature_replicates.npz", buffer.getvalue())
    manifest = rundir.read_manifest(run_dir)
    manifest["corpora"] = result.corpora
    rundir.write_manifest(run_dir, manifest)


def check_inputs(config: CollectConfig) -> None:
    """Read every user corpus now, and check that the executor can run here, so that a bad one
    fails before the model loads."""
    check_executor(config)
    for path in config.corpora:
        read_corpus(path, config.text_column, config.max_sentences)


@dataclass(frozen=True)
class CollectRecord(StageRecord):
    """What the manifest records about a collect run."""

    syntactic_corpora: list[str]  # the treebanks the features' syntactic:* values rest on
    skipped_suites: dict[str, str]  # probe suites asked for but skipped -> why
    threads: int  # torch threads collection ran on (interp.executors.threads)
    executor: dict[str, Any]  # where its shards ran: the executor, its workers, each shard's time
    # the frequent token types the frequent_token features read, commonest first
    frequent_types: list[str] = field(default_factory=list)


def run_stage(
    run_dir: Path,
    model: LoadedModel | None,
    config: CollectConfig = CollectConfig(),
    progress: bool = True,
) -> CollectRecord:
    """The collect stage of a run: collect, then write the features and the exemplar patterns."""
    result = collect(loaded(model, "collect"), config, progress=progress)
    check_measured(result.features)  # most heads NaN: stop here, before any table is written
    write(run_dir, result)
    if result.exemplars is not None:
        write_exemplars(run_dir, result.exemplars)
    return CollectRecord(
        list(result.syntactic_corpora),
        dict(result.skipped),
        result.threads,
        result.executor,
        result.frequent_types,
    )

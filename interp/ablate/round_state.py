"""The exact sweep's state between rounds, kept in the run directory so that a stopped sweep
continues where it was (``interp run --resume``, ``interp ablate RUN_DIR``).

After each round of the sequential sweep (:mod:`interp.ablate.sequential`) the stage writes
``ablate_rounds.npz`` atomically (:func:`interp.pipeline.rundir.write_bytes`): the per-sequence
sums of every condition so far (:class:`interp.ablate.stats.SumStore`, float64, bit for bit),
the round log, the next round's index, and a key made of the resolved config, the model's shape
and dtype and every token of the corpus. A rerun with the same key loads the sums and starts at
the next round, so its table equals one of a sweep that was never stopped; a state with another
key (another config, corpus or model) is ignored with one line on stderr, never mixed in. The
stage removes the file once its tables are written.

Stored format (``numpy.savez_compressed``, plain arrays, no pickles)::

    version      int                     FORMAT_VERSION
    key          str                     sha256 of the config, model and corpus
    next_round   int                     the round the sweep continues with
    log          str                     JSON: per round, the heads each eval set's sweep ran
    cursors      str                     JSON: eval set -> [[layer, head, slices it has read], ...]
    reused       bool                    whether every sweep so far reused the layers below
    metrics      str     [metric]
    base_M, den_M             float64 [sequence]     the intact model's sums of metric M
    measured_M                bool    [sequence]
    conditions_M              int     [condition, 3] (kind index, layer, head)
    ablated_M                 float64 [condition, sequence]
    nonfinite_M               bool    [condition, sequence]

Beside it, ``ablate_estimate.npz`` keeps the estimate step's result (interp.ablate.estimate): its
effect rows and the heads' means, under a key of the config, the model's shape and dtype and both
corpora it read. A resumed stage with the same key reuses them instead of estimating again; the
stage removes it with the sweep's state::

    version      int                     ESTIMATE_VERSION
    key          str                     sha256 of the config, model and corpora
    rows         uint8   [byte]          the estimate rows, a Parquet file's bytes
    has_means    bool
    means        float32 [layer, head, d_head]   (empty when has_means is False)
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from interp.ablate.batches import EvalCorpus
from interp.ablate.catalogue import KINDS
from interp.ablate.sequential import Head, Rounds
from interp.ablate.stats import SumStore
from interp.errors import first_line
from interp.model.load import LoadedModel
from interp.pipeline import rundir

FILE = "ablate_rounds.npz"
# 2: the rounds slice sequence i of n into round i * rounds // n (interp.ablate.sequential.rounds);
# a state of 1 was read under other slices, so continuing it could read a sequence twice
# 3: each head reads its own next slice (a read pointer per head and eval set, ``cursors``); a state
# of 2 kept one round index for every head
FORMAT_VERSION = 3
ESTIMATE_FILE = "ablate_estimate.npz"
ESTIMATE_VERSION = 1


def sweep_key(config: Any, model: LoadedModel, heads: list[Head], corpus: EvalCorpus) -> str:
    """The state's key: the resolved config (``dataclasses.asdict``), the model's shape and
    dtype, the heads swept, and every sequence of the corpus (eval set, index, retrieval group,
    tokens, scored rows)."""
    digest = hashlib.sha256()
    settings = {
        "config": dataclasses.asdict(config),
        "shape": (model.n_layers, model.n_heads),
        "dtype": str(next(model.bridge.parameters()).dtype),
        "heads": heads,
    }
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    for item in corpus.items:
        digest.update(f"{item.eval_set}:{item.index}:{item.group}:".encode())
        digest.update(np.asarray(item.tokens).astype(np.int64).tobytes())
        digest.update(np.asarray(item.rows).astype(np.int64).tobytes())
    return digest.hexdigest()


def save(run_dir: Path, key: str, store: SumStore, rounds: Rounds, reused: bool) -> None:
    """Write the state atomically into ``run_dir`` (replacing the last round's); ``reused``:
    whether every sweep so far reused the layers below the ablated head."""
    arrays: dict[str, Any] = {
        "version": np.int64(FORMAT_VERSION),
        "key": np.array(key),
        "next_round": np.int64(rounds.next_round),
        "log": np.array(json.dumps(rounds.log)),
        "cursors": np.array(
            json.dumps(
                {
                    f: [[*h, n] for h, n in sorted(heads.items())]
                    for f, heads in rounds.cursors.items()
                }
            )
        ),
        "reused": np.bool_(reused),
        "metrics": np.array(list(store), dtype=str),
    }
    for i, sums in enumerate(store.values()):
        conditions = list(sums.ablated)
        arrays |= {
            f"base_{i}": sums.base.numpy(),
            f"den_{i}": sums.den.numpy(),
            f"measured_{i}": sums.measured.numpy(),
            f"conditions_{i}": np.array(
                [(KINDS.index(kind), layer, head) for kind, layer, head in conditions],
                dtype=np.int64,
            ).reshape(-1, 3),
            f"ablated_{i}": np.stack([sums.ablated[c].numpy() for c in conditions])
            if conditions
            else np.zeros((0, sums.size)),
            f"nonfinite_{i}": np.stack(
                [
                    sums.nonfinite.get(c, torch.zeros(sums.size, dtype=torch.bool)).numpy()
                    for c in conditions
                ]
            )
            if conditions
            else np.zeros((0, sums.size), dtype=bool),
        }
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    rundir.write_bytes(Path(run_dir) / FILE, buffer.getvalue())


def load(run_dir: Path, key: str, store: SumStore) -> tuple[Rounds, bool] | None:
    """The state of a stopped sweep with this ``key`` and whether its sweeps reused the layers
    below, its sums put into the empty ``store``; None (with one line on stderr when a state was
    there) when there is none to continue."""
    path = Path(run_dir) / FILE
    head = ("version", "key", "next_round", "log", "cursors", "reused", "metrics")
    try:
        arrays = rundir.read_archive(path, head, FORMAT_VERSION)
        if arrays is None:
            return None
        if str(arrays["key"]) != key or sorted(map(str, arrays["metrics"])) != sorted(store):
            _ignored(path, "another config, corpus or model")
            return None
        fields = tuple(f"{name}_{i}" for i in range(len(arrays["metrics"])) for name in _PER_METRIC)
        arrays |= rundir.read_archive(path, head + fields, FORMAT_VERSION) or {}
    except ValueError as exc:
        _ignored(path, f"unreadable: {first_line(exc)}")
        return None
    for i, metric in enumerate(map(str, arrays["metrics"])):
        sums = store[metric]
        sums.base = torch.from_numpy(arrays[f"base_{i}"].copy())
        sums.den = torch.from_numpy(arrays[f"den_{i}"].copy())
        sums.measured = torch.from_numpy(arrays[f"measured_{i}"].copy())
        for j, (kind, layer, head_) in enumerate(arrays[f"conditions_{i}"].tolist()):
            condition = (KINDS[kind], layer, head_)
            sums.ablated[condition] = torch.from_numpy(arrays[f"ablated_{i}"][j].copy())
            bad = arrays[f"nonfinite_{i}"][j]
            if bad.any():
                sums.nonfinite[condition] = torch.from_numpy(bad.copy())
    cursors = {
        f: {(layer, head_): n for layer, head_, n in heads}
        for f, heads in json.loads(str(arrays["cursors"])).items()
    }
    rounds = Rounds(
        int(arrays["next_round"]),
        json.loads(str(arrays["log"])),
        cursors,
    )
    return rounds, bool(arrays["reused"])


_PER_METRIC = ("base", "den", "measured", "conditions", "ablated", "nonfinite")


def estimate_key(config: Any, model: LoadedModel, corpora: list[EvalCorpus]) -> str:
    """The kept estimate's key: :func:`sweep_key` of each corpus it read, no heads."""
    parts = "".join(sweep_key(config, model, [], corpus) for corpus in corpora)
    return hashlib.sha256(parts.encode()).hexdigest()


def save_estimate(run_dir: Path, key: str, rows: pd.DataFrame, means: torch.Tensor | None) -> None:
    """Keep the estimate step's rows and means in ``run_dir`` (atomically)."""
    table = io.BytesIO()
    rows.to_parquet(table, index=False)
    arrays = {
        "version": np.int64(ESTIMATE_VERSION),
        "key": np.array(key),
        "rows": np.frombuffer(table.getvalue(), dtype=np.uint8),
        "has_means": np.bool_(means is not None),
        "means": means.detach().cpu().numpy() if means is not None else np.zeros(0, np.float32),
    }
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    rundir.write_bytes(Path(run_dir) / ESTIMATE_FILE, buffer.getvalue())


def load_estimate(
    run_dir: Path, key: str, device: str | torch.device
) -> tuple[pd.DataFrame, torch.Tensor | None] | None:
    """(rows, means on ``device``) of a kept estimate with this ``key``; None (with one line on
    stderr when one was there) when there is none to reuse."""
    path = Path(run_dir) / ESTIMATE_FILE
    try:
        arrays = rundir.read_archive(
            path, ("version", "key", "rows", "has_means", "means"), ESTIMATE_VERSION
        )
        if arrays is None:
            return None
        if str(arrays["key"]) != key:
            _ignored(path, "another config, corpus or model", "the estimate runs again")
            return None
        rows = pd.read_parquet(io.BytesIO(arrays["rows"].tobytes()))
    except (ValueError, OSError) as exc:
        _ignored(path, f"unreadable: {first_line(exc)}", "the estimate runs again")
        return None
    means = torch.from_numpy(arrays["means"].copy()).to(device) if arrays["has_means"] else None
    return rows, means


def remove(run_dir: Path) -> None:
    """Delete the state and the kept estimate (the stage finished: its tables hold them)."""
    for name in (FILE, ESTIMATE_FILE):
        (Path(run_dir) / name).unlink(missing_ok=True)


def _ignored(path: Path, why: str, then: str = "the exact sweep starts at round 1") -> None:
    print(f"ablate: {path} is not used ({why}): {then}", file=sys.stderr)

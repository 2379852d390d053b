"""Where each head attends between a task's named positions: the ``task_attention`` table.

A task that names positions in its sequences (``Task(named_positions=...)``, e.g. IO, S1, S2
and END of an indirect-object prompt) gets, for every head and every ordered pair of distinct
names (query, key), the head's attention weight from the query position to the key position,
averaged over the task's sequences (all of them: both the half that measures the effects and
the held-out half). A pair counts in a sequence only where the key is not after the query (a
causal head cannot look ahead: with IO before S1 in some templates and after it in others,
"S1 -> IO" rests on the sequences where IO comes first); ``n`` says on how many. The interval
is a percentile bootstrap over sequences, the same draws for every head. Beside each weight,
``baseline`` is what a head attending uniformly over the keys it can see would put on the key
(``1 / (q + 1)`` at query position ``q``, averaged the same way), and ``scored`` marks the rows
whose query is the position the task's metric is read at (a name at one of the task's
``positions`` in every sequence): where the task roles of interp.classify.tasks are read.

The weights are the model's own ``hook_pattern``, read by one pattern pass per batch
(:func:`interp.model.lens.run_patterns`, no logits computed), with sequences padded on the
right, which a causal model's earlier positions never see. Where a head of an IOI circuit sits
shows up without hook code: S-inhibition-like heads as large "END -> S2" weights, name movers
as large "END -> IO" ones.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from interp.ablate.batches import bucket_tight
from interp.ablate.evaluation import encode_task_sequence
from interp.ablate.stats import bootstrap_weights
from interp.ablate.tasks import Task
from interp.errors import ConfigError
from interp.model import lens
from interp.pipeline.tables import TASK_ATTENTION
from interp.probes.align import Aligner


@dataclass
class NamedPrompt:
    """One task sequence as the model sees it, with its named positions in those tokens."""

    tokens: torch.Tensor  # long [pos]
    rows: dict[str, int]  # name -> position in ``tokens``


def task_attention(
    model: Any, tasks: tuple[Task, ...], n_bootstrap: int, seed: int, max_tokens: int
) -> pd.DataFrame | None:
    """The ``task_attention`` table of the ``tasks`` that name positions; None when none does (the
    run then has no such table)."""
    frames = []
    for task in (t for t in tasks if t.named_positions):
        named = pairs(task.position_names)
        prompts = named_prompts(model, task)
        weights, valid = pair_weights(model, prompts, named, max_tokens)
        uniform = np.array([[1.0 / (p.rows[a] + 1) for a, _ in named] for p in prompts])
        frames.append(
            attention_table(
                task.name, named, weights, valid, n_bootstrap, seed, uniform, scored_names(task)
            )
        )
    if not frames:
        return None
    frames = [f for f in frames if len(f)] or [pd.DataFrame(columns=TASK_ATTENTION.names)]
    return TASK_ATTENTION.validate(pd.concat(frames, ignore_index=True))


def scored_names(task: Task) -> set[str]:
    """The named positions the task's metric is read at: among its ``positions`` in every
    sequence (none when it scores every position)."""
    if task.positions is None or not task.named_positions:
        return set()
    return {
        name
        for name in task.position_names
        if all(names[name] in at for names, at in zip(task.named_positions, task.positions))
    }


def pairs(names: tuple[str, ...]) -> list[tuple[str, str]]:
    """Every ordered pair of distinct names, (query, key), queries in the order given."""
    return [(q, k) for q in names for k in names if q != k]


def named_prompts(model: Any, task: Task) -> list[NamedPrompt]:
    """Every sequence of ``task``, encoded as the ablate stage encodes it, with its named positions
    moved past a prepended BOS; ConfigError for a name beyond the tokens the model sees."""
    aligner = Aligner(model)
    out = []
    for i in range(len(task.sequences)):
        tokens, shift, _ = encode_task_sequence(aligner, task, i, model.d_vocab)
        out.append(NamedPrompt(tokens, named_rows(task, i, len(tokens), shift)))
    return out


def named_rows(task: Task, i: int, n_tokens: int, shift: int) -> dict[str, int]:
    """Sequence ``i``'s named positions as positions in its ``n_tokens`` encoded tokens."""
    if task.named_positions is None:
        raise ValueError(f"task {task.name!r} names no positions")
    rows = {}
    for name, pos in task.named_positions[i].items():
        if pos + shift >= n_tokens:
            raise ConfigError(
                f"task {task.name!r}, sequence {i}: named position {name!r} = {pos} is beyond the "
                f"{n_tokens - shift} tokens the model sees; positions count from 0 in the sequence "
                f"as written"
            )
        rows[name] = pos + shift
    return rows


def pair_weights(
    model: Any, prompts: list[NamedPrompt], named: list[tuple[str, str]], max_tokens: int
) -> tuple[np.ndarray, np.ndarray]:
    """(weights ``[prompt, pair, layer, head]``, valid ``[prompt, pair]``): each head's attention
    from the pair's query position to its key position; valid where the key is not after the query
    (elsewhere the weight is 0 and not counted)."""
    q = np.array([[p.rows[a] for a, _ in named] for p in prompts])  # [prompt, pair]
    k = np.array([[p.rows[b] for _, b in named] for p in prompts])
    weights = np.zeros((len(prompts), len(named), model.n_layers, model.n_heads))
    pad = model.tokenizer.pad_token_id or 0
    for group in bucket_tight([len(p.tokens) for p in prompts], max_tokens):
        tokens, mask = _padded([prompts[i].tokens for i in group], pad)
        index = torch.tensor(group)

        def keep(
            layer: int, pattern: torch.Tensor
        ) -> None:  # [batch, head, q, k] -> [batch, pair, head]
            b = torch.arange(len(group))[:, None]
            picked = pattern[b, :, torch.from_numpy(q[group]), torch.from_numpy(k[group])]
            weights[index.numpy(), :, layer] = picked.float().cpu().numpy()

        lens.run_patterns(model, tokens, mask, keep)
    return weights, k <= q


def attention_table(
    task: str,
    named: list[tuple[str, str]],
    weights: np.ndarray,
    valid: np.ndarray,
    n_bootstrap: int,
    seed: int,
    uniform: np.ndarray | None = None,
    scored: AbstractSet[str] = frozenset(),
) -> pd.DataFrame:
    """One row per (pair, layer, head) counted in at least one prompt: the mean weight over the
    prompts where the pair is valid, its bootstrap interval over prompts, and how many prompts;
    ``uniform`` ``[prompt, pair]``: what a uniform head puts on the pair's key (the rows'
    ``baseline``, averaged like the weight; NaN without it); ``scored``: the query names the
    task's metric is read at."""
    n_prompts, n_pairs, n_layers, n_heads = weights.shape
    counted = np.nonzero(valid.any(0))[0]  # pairs with at least one prompt
    valid = valid[:, counted].astype(float)
    num = (weights[:, counted] * valid[:, :, None, None]).reshape(
        n_prompts, -1
    )  # [prompt, pair * layer * head]
    den = np.repeat(valid, n_layers * n_heads, axis=1)
    draws = bootstrap_weights(n_prompts, n_bootstrap, seed)  # [prompt, draw]
    with np.errstate(
        invalid="ignore", divide="ignore"
    ):  # a draw may miss every prompt of a pair: NaN there
        boot = (draws.T @ num) / (draws.T @ den)  # [draw, pair * layer * head]
    low, high = (
        np.nanquantile(boot, [0.025, 0.975], axis=0) if boot.size else (np.array([]), np.array([]))
    )
    pair, layer, head = np.unravel_index(np.arange(num.shape[1]), (len(counted), n_layers, n_heads))
    if uniform is None:
        baseline = np.full(len(counted), np.nan)
    else:
        baseline = (uniform[:, counted] * valid).sum(0) / valid.sum(0)
    return pd.DataFrame(
        {
            "task": task,
            "layer": layer,
            "head": head,
            "query": [named[counted[p]][0] for p in pair],
            "key": [named[counted[p]][1] for p in pair],
            "attention": num.sum(0) / den.sum(0),
            "ci_low": low,
            "ci_high": high,
            "n": den.sum(0).astype(int),
            "baseline": baseline[pair],
            "scored": [int(named[counted[p]][0] in scored) for p in pair],
        }
    )


def _padded(sequences: list[torch.Tensor], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded tokens ``[batch, pos]`` and their attention mask."""
    width = max(len(s) for s in sequences)
    tokens = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, s in enumerate(sequences):
        tokens[i, : len(s)], mask[i, : len(s)] = s, 1
    return tokens, mask

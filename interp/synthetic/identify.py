"""What a trained head really does, found by intervention on its task, not by the classifier.

For a model trained on a task (interp.synthetic.trained), every head is tested on fresh task
batches with two interventions:

1. **Necessity**: its output is zeroed (site ``z``); the rise of the task loss, ``damage``, says
   whether the model needs it. A task often grows several heads that do the same job, and then
   removing one costs nothing; such a head is tested *alone in its layer* instead (the other
   heads of its layer zeroed throughout, ``context`` "alone"), where the damage is that of
   zeroing the whole layer.
2. **Sufficiency of a hypothesis**: its attention pattern is replaced (site ``pattern``) by the
   ideal pattern of one hypothesis about its job -- all on the first position, on q-1, on q, on
   the earlier copies of the current token, on the tokens that followed them, uniformly on the
   three words before q, on a fixed position k = 1..6, or uniformly on the text -- computed from
   the tokens alone: the catalogue's roles that a causal model over words can have. The head keeps
   its own values and output weights, so a hypothesis restores the task only if *where* it makes
   the head look is what the head is for.

A head's true role is the hypothesis that restores the most loss, provided the head matters
(``damage >= MIN_DAMAGE`` nats) and the hypothesis restores at least ``MIN_RESTORED`` of the
damage; a needed head that no hypothesis restores is ``unexplained``; a head the model does
not need has no known role (None) and is left out of any validation. Nothing here reads an
attention-mass feature, the reference bank or the classifier. The passes go through
:mod:`interp.model.lens`, and only the logits the task loss reads are computed.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import torch
import torch.nn.functional as F

from interp.model import lens
from interp.synthetic.tasks.forced import TASKS, ForcedBatch, Ids
from interp.synthetic.trained import TrainedTask

POSITIONS = (1, 2, 3, 4, 5, 6)
LOCAL_WINDOW = 3  # as the local feature's (CollectConfig.local_window)
MIN_DAMAGE = 0.1  # nats of task loss
MIN_RESTORED = 0.8


def _onehot(index: torch.Tensor, width: int) -> torch.Tensor:
    """float [batch, q, k]: all mass on key ``index`` [batch, q]."""
    return torch.zeros(*index.shape, width).scatter_(-1, index[..., None], 1.0)


def _uniform_or_first(keys: torch.Tensor) -> torch.Tensor:
    """Uniform over ``keys`` bool [batch, q, k], or all on position 0 where a query has none."""
    width = keys.shape[-1]
    spread = keys.float() / keys.sum(-1, keepdim=True).clamp(min=1)
    first = _onehot(torch.zeros(keys.shape[:2], dtype=torch.long), width)
    return torch.where(keys.any(-1, keepdim=True), spread, first)


def hypotheses(tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """Ideal causal attention patterns float [batch, q, k] for ``tokens`` long [batch, pos] (BOS first)."""
    n, width = tokens.shape
    q = torch.arange(width)[None, :].expand(n, width)
    earlier = (
        torch.ones(width, width, dtype=torch.bool).tril(-1)[None]
        & (torch.arange(width) >= 1)[None, None, :]
    )
    same = tokens[:, :, None] == tokens[:, None, :]
    follows = torch.zeros_like(same)
    follows[:, :, 1:] = (
        tokens[:, :, None] == tokens[:, None, :-1]
    )  # key k-1 holds the query's token
    out = {
        "first_token": _onehot(torch.zeros_like(q), width),
        "previous_token": _onehot((q - 1).clamp(min=0), width),
        "current_token": _onehot(q, width),
        "duplicate_token": _uniform_or_first(earlier & same),
        "induction": _uniform_or_first(
            earlier & follows & (torch.arange(width) >= 2)[None, None, :]
        ),
        "local": _uniform_or_first(
            earlier & ((q[:, :, None] - torch.arange(width)) <= LOCAL_WINDOW)
        ),
        "broad": _uniform_or_first(
            torch.ones(width, width, dtype=torch.bool).tril()[None].expand(n, -1, -1)
            & (torch.arange(width) >= 1)[None, None, :]
        ),
    }
    for k in POSITIONS:
        out[f"position:{k}"] = _onehot(torch.where(q >= k, k, 0), width)
    return out


def role_of(hypothesis: str) -> str:
    return "positional" if hypothesis.startswith("position:") else hypothesis


def _loss(model: Any, batch: ForcedBatch, taps: list[lens.Tap]) -> float:
    """The task's cross-entropy with ``taps`` applied (the logits of its masked positions only)."""
    rows = batch.mask.nonzero()  # [row, 2]: (sequence, position), in the order batch.mask indexes
    with torch.inference_mode():
        logits = lens.run(
            model,
            batch.tokens,
            torch.ones_like(batch.tokens),
            taps,
            lens.Rows(rows[:, 0], rows[:, 1]),
        )
    return F.cross_entropy(logits.float(), batch.targets[batch.mask]).item()


def _zero_heads(layer: int, heads: list[int]) -> lens.Tap:
    def zero(z: torch.Tensor, _layer: int) -> torch.Tensor:  # [batch, pos, head, d_head]
        z = z.clone()
        z[:, :, heads] = 0.0
        return z

    return lens.Tap("z", zero, layer)


def _set_pattern(layer: int, head: int, pattern: torch.Tensor) -> lens.Tap:
    def replace(p: torch.Tensor, _layer: int) -> torch.Tensor:  # [batch, head, q, k]
        p = p.clone()
        p[:, head] = pattern.to(p.dtype)
        return p

    return lens.Tap("pattern", replace, layer)


def _test(
    model: Any,
    batch: ForcedBatch,
    ideal: dict[str, torch.Tensor],
    layer: int,
    head: int,
    context: list[lens.Tap],
    zero_taps: list[lens.Tap] | None = None,
) -> dict:
    """Damage, loss under each hypothesis, best hypothesis, restored share and true role of one
    head, with ``context`` taps (the other heads of its layer zeroed, or none) in place."""
    base = _loss(model, batch, context)
    zero = _loss(model, batch, zero_taps or [_zero_heads(layer, [head])])
    patched = {
        name: _loss(model, batch, context + [_set_pattern(layer, head, p)])
        for name, p in ideal.items()
    }
    best = min(patched, key=lambda name: patched[name])
    damage = zero - base
    restored = (zero - patched[best]) / damage if damage > 0 else float("nan")
    if damage < MIN_DAMAGE:
        truth = None
    else:
        truth = role_of(best) if restored >= MIN_RESTORED else "unexplained"
    return {
        "context": "alone" if context else "model",
        "loss": base,
        "damage": damage,
        "best": best,
        "restored": restored,
        "truth": truth,
        **{f"loss:{name}": v for name, v in patched.items()},
    }


def identify(run: TrainedTask, n: int = 128) -> pd.DataFrame:
    """One row per head: the context it was tested in, the task loss there, the damage of zeroing
    it, the loss under each hypothesis, the best one, and the true role."""
    task = TASKS[run.task]
    model = run.model
    batch = task.make(
        n,
        torch.Generator().manual_seed(20_000 + run.seed),
        Ids.of(model.tokenizer, task.words),
        run.seed,
    )
    ideal = hypotheses(batch.tokens)
    rows = []
    for layer in range(model.n_layers):
        everything = [_zero_heads(layer, list(range(model.n_heads)))]
        for head in range(model.n_heads):
            row = _test(model, batch, ideal, layer, head, [])
            if (
                row["damage"] < MIN_DAMAGE and model.n_heads > 1
            ):  # others do the same job: test it alone
                others = [h for h in range(model.n_heads) if h != head]
                row = _test(
                    model,
                    batch,
                    ideal,
                    layer,
                    head,
                    [_zero_heads(layer, others)],
                    zero_taps=everything,
                )
            rows.append(
                {
                    "model": model.name,
                    "task": run.task,
                    "seed": run.seed,
                    "layer": layer,
                    "head": head,
                    **row,
                }
            )
    return pd.DataFrame(rows)

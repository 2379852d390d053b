"""Your own metric for the ablate stage, in Python: sequences, the positions it reads, and what
it computes from the logits there.

A :class:`Task` is a metric family of its own, measured beside the built-in ones (and first, so
that it orders the pruning curve)::

    def logit_diff(logits, tokens):  # logits [row, vocab] at the task's positions, tokens [row] that follow
        return logits[:, wrong_id] - logits.gather(1, tokens[:, None])[:, 0]   # higher = worse

    AblateConfig(tasks=(Task("capitals", ("The capital of France is Paris", ...), positions=((4,), ...),
                              metric=logit_diff),))

``sequences`` are texts (encoded for the model as probes are: BOS prepended where the tokenizer
does not add one, cut to the context) or lists of token ids (used as given). ``positions``
count tokens of the sequence as written (a text's tokenizer ids, without the BOS interp
prepends); position ``p`` scores the prediction of token ``p + 1``. Without positions every
next-token prediction is scored. ``metric(logits, tokens)`` returns one value per scored
position, oriented so that higher means the model got worse (return a loss, or minus a score);
without it the value is the next-token loss. The effect is the token-weighted mean over the
scored positions, bootstrapped over sequences, like ``loss_prose``; attribution estimates it
through the metric's gradient, so keep it differentiable.

Sequences 0, 2, 4, ... measure the effects; 1, 3, 5, ... are held out for the pruning curve.
A task holds Python objects, so a run made with one is rerun from Python, not from its
manifest. Causal LMs only (an encoder's metrics read its sentence embedding, not logits).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from interp.ablate.catalogue import METRICS
from interp.errors import ConfigError


@dataclass(frozen=True)
class Task:
    """A user metric: its name (the effects table's ``metric``), sequences, positions, metric."""

    name: str
    sequences: tuple[str | tuple[int, ...], ...]
    positions: tuple[tuple[int, ...], ...] | None = None  # per sequence; None: every next-token prediction
    metric: Callable[[Any, Any], Any] | None = None  # (logits [row, vocab], tokens [row]) -> [row]; None: the loss

    def __post_init__(self) -> None:
        object.__setattr__(self, "sequences", tuple(s if isinstance(s, str) else tuple(s) for s in self.sequences))
        if self.positions is not None:
            object.__setattr__(self, "positions", tuple(tuple(p) for p in self.positions))
        if not self.name or self.name in METRICS:
            raise ConfigError(f"task name {self.name!r}: give a name that is not a built-in metric ({', '.join(METRICS)})")
        if len(self.sequences) < 2:
            raise ConfigError(f"task {self.name!r} has {len(self.sequences)} sequence(s); give at least 2 (half measure "
                              f"the effects, the other half the pruning curve)")
        if self.positions is not None and len(self.positions) != len(self.sequences):
            raise ConfigError(f"task {self.name!r} has {len(self.positions)} position lists for {len(self.sequences)} "
                              f"sequences; give one per sequence")
        if self.metric is not None and not callable(self.metric):
            raise ConfigError(f"task {self.name!r}: metric must be a function (logits, tokens) -> values")


def task_items(aligner: Any, task: Task, split: int, d_vocab: int) -> list[Any]:
    """The EvalItems of one half of a task (sequences ``split``, ``split + 2``, ...)."""
    import torch

    from interp.ablate.evaluation import EvalItem
    from interp.probes.base import NATURAL, Sentence, Suite

    suite = Suite(f"task:{task.name}", NATURAL)
    items = []
    for i in range(split, len(task.sequences), 2):
        sequence = task.sequences[i]
        if isinstance(sequence, str):
            seq = aligner.encode(Sentence(sequence), suite)
            tokens, shift, special = seq.tokens, int(aligner.bos_policy == "prepend"), seq.is_special
        else:
            tokens, shift = torch.tensor(sequence, dtype=torch.long), 0
            special = torch.zeros(len(tokens), dtype=torch.bool)
        if len(tokens) and not 0 <= int(tokens.min()) <= int(tokens.max()) < d_vocab:
            raise ConfigError(f"task {task.name!r}, sequence {i}: token ids outside the model's {d_vocab}-id embedding")
        rows = _rows(task, i, tokens, special, shift)
        items.append(EvalItem(tokens, task.name, len(items), rows, tokens[rows + 1], score=task.metric))
    return items


def _rows(task: Task, i: int, tokens: Any, special: Any, shift: int) -> Any:
    """Positions (in the encoded sequence) whose next-token prediction the task scores."""
    import torch

    if task.positions is None:
        rows = torch.arange(len(tokens) - 1)
        return rows[~special[rows + 1]]
    rows = torch.tensor(task.positions[i], dtype=torch.long) + shift
    bad = [p for p, r in zip(task.positions[i], rows.tolist()) if not 0 <= r < len(tokens) - 1]
    if bad:
        raise ConfigError(f"task {task.name!r}, sequence {i}: position {bad[0]} has no next token in the "
                          f"{len(tokens) - shift} tokens the model sees; positions count from 0 and score token p + 1")
    return rows


def names(tasks: Sequence[Task]) -> tuple[str, ...]:
    return tuple(t.name for t in tasks)

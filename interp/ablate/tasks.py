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


def names(tasks: Sequence[Task]) -> tuple[str, ...]:
    return tuple(t.name for t in tasks)

"""Your own metric for the ablate stage, in Python: sequences, the positions it reads, what it
computes from the logits there, the data each sequence carries, and the positions it names.

A :class:`Task` is an eval set of its own, measured beside the built-in ones (and first, so
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

**Per-sequence data** (``fields``): a mapping from a name to one number per sequence (a token
id, a count, a weight). The metric receives each field as a keyword argument holding one value
per scored row, the value of the sequence that row belongs to (a long tensor when every value
is a whole number, else float64), on the logits' device, so it stays aligned with ``logits``
whatever the stage batches, splits, resamples or differentiates. Indirect object
identification, where the wrong answer (the subject S) differs from prompt to prompt::

    def io_vs_s(logits, tokens, s):   # tokens: the IO name that follows END; s: [row] the S name's id
        return logits.gather(1, s[:, None])[:, 0] - logits.gather(1, tokens[:, None])[:, 0]

    Task("ioi", prompts, positions=[(p["END"],) for p in names], metric=io_vs_s,
         fields={"s": s_ids}, named_positions=names)

**Named positions** (``named_positions``): one mapping per sequence from a name to a token
position, counted as ``positions`` are (e.g. ``{"IO": 2, "S1": 4, "S2": 10, "END": 14}``), the
same names in every sequence. The ablate stage then writes the ``task_attention`` table
(:mod:`interp.ablate.task_attention`): every head's mean attention from each named position to
each other one, over all the task's sequences, so "END -> S2" and "END -> IO" rows show
S-inhibition-like and name-mover-like heads without hook code.

Everything is checked when the task is made (one-line ConfigError): one field value and one
name mapping per sequence, numbers only, the same names everywhere, and a metric that accepts
exactly the fields given; a named position beyond its sequence is refused once the model's
tokenizer has encoded it.

Sequences 0, 2, 4, ... measure the effects; 1, 3, 5, ... are held out for the pruning curve.
A task holds Python objects, so a run made with one is rerun from Python, not from its
manifest. Causal LMs only (an encoder's metrics read its sentence embedding, not logits).
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from interp.ablate.catalogue import METRICS
from interp.errors import ConfigError


@dataclass(frozen=True)
class Task:
    """A user metric: its name (the effects table's ``metric``), sequences, positions, metric,
    per-sequence fields the metric receives, and named positions (see the module docstring)."""

    name: str
    sequences: tuple[str | tuple[int, ...], ...]
    positions: tuple[tuple[int, ...], ...] | None = (
        None  # per sequence; None: every next-token prediction
    )
    metric: Callable[..., Any] | None = (
        None  # (logits [row, vocab], tokens [row], **fields [row]) -> [row]; None: the loss
    )
    fields: Mapping[str, Sequence[Any]] | None = None  # name -> one number per sequence
    named_positions: Sequence[Mapping[str, int]] | None = (
        None  # per sequence: name -> token position
    )

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "sequences", tuple(s if isinstance(s, str) else tuple(s) for s in self.sequences)
        )
        if self.positions is not None:
            object.__setattr__(self, "positions", tuple(tuple(p) for p in self.positions))
        if not self.name or self.name in METRICS:
            raise ConfigError(
                f"task name {self.name!r}: give a name that is not a built-in metric ({', '.join(METRICS)})"
            )
        if len(self.sequences) < 2:
            raise ConfigError(
                f"task {self.name!r} has {len(self.sequences)} sequence(s); give at least 2 (half measure "
                f"the effects, the other half the pruning curve)"
            )
        if self.positions is not None and len(self.positions) != len(self.sequences):
            raise ConfigError(
                f"task {self.name!r} has {len(self.positions)} position lists for {len(self.sequences)} "
                f"sequences; give one per sequence"
            )
        if self.metric is not None and not callable(self.metric):
            raise ConfigError(
                f"task {self.name!r}: metric must be a function (logits, tokens) -> values"
            )
        object.__setattr__(self, "fields", self._checked_fields())
        object.__setattr__(self, "named_positions", self._checked_names())
        self._check_metric_takes_fields()

    # --- what the stage reads ----------------------------------------------------------------

    def fields_of(self, i: int) -> dict[str, int | float]:
        """Sequence ``i``'s field values: name -> number."""
        return {name: values[i] for name, values in (self.fields or {}).items()}

    @property
    def position_names(self) -> tuple[str, ...]:
        """The named positions, in the order the first sequence gives them (empty without)."""
        return tuple(self.named_positions[0]) if self.named_positions else ()

    # --- checks ------------------------------------------------------------------------------

    def _checked_fields(self) -> dict[str, tuple[int | float, ...]] | None:
        if self.fields is None:
            return None
        if not isinstance(self.fields, Mapping):
            raise ConfigError(
                f"task {self.name!r}: fields must map a name to one number per sequence, got "
                f"{type(self.fields).__name__}"
            )
        out = {}
        for name, values in self.fields.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise ConfigError(
                    f"task {self.name!r}: field name {name!r} must be a Python identifier (the metric "
                    f"receives it as a keyword argument)"
                )
            values = (
                values.tolist() if hasattr(values, "tolist") else values
            )  # a numpy array or a tensor
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
                raise ConfigError(
                    f"task {self.name!r}: field {name!r} must hold one number per sequence, got "
                    f"{type(values).__name__}"
                )
            if len(values) != len(self.sequences):
                raise ConfigError(
                    f"task {self.name!r}: field {name!r} has {len(values)} values for "
                    f"{len(self.sequences)} sequences; give one per sequence"
                )
            out[name] = _numbers(self.name, name, values)
        return out

    def _checked_names(self) -> tuple[dict[str, int], ...] | None:
        if self.named_positions is None:
            return None
        maps = tuple(self.named_positions)
        if len(maps) != len(self.sequences):
            raise ConfigError(
                f"task {self.name!r} has {len(maps)} named-position maps for {len(self.sequences)} "
                f"sequences; give one per sequence"
            )
        out: list[dict[str, int]] = []
        for i, names in enumerate(maps):
            if not isinstance(names, Mapping) or not names:
                raise ConfigError(
                    f"task {self.name!r}, sequence {i}: named positions must be a non-empty "
                    f"mapping from names to token positions, got {names!r}"
                )
            for key, pos in names.items():
                if not isinstance(key, str) or not key:
                    raise ConfigError(
                        f"task {self.name!r}, sequence {i}: position names must be non-empty strings, "
                        f"got {key!r}"
                    )
                if isinstance(pos, bool) or not isinstance(pos, numbers.Integral) or pos < 0:
                    raise ConfigError(
                        f"task {self.name!r}, sequence {i}: named position {key!r} = {pos!r} must be a "
                        f"whole number >= 0 (a token position, counted as positions are)"
                    )
            if i and set(names) != set(out[0]):
                raise ConfigError(
                    f"task {self.name!r}, sequence {i} names positions {', '.join(names)} where "
                    f"sequence 0 names {', '.join(out[0])}; name the same positions in every sequence"
                )
            out.append({key: int(pos) for key, pos in names.items()})
        return tuple(out)

    def _check_metric_takes_fields(self) -> None:
        names = tuple(self.fields or ())
        if not names:
            return
        if self.metric is None:
            raise ConfigError(
                f"task {self.name!r}: fields go to the metric, and the default metric (the next-token "
                f"loss) takes none; give metric(logits, tokens, {', '.join(names)})"
            )
        try:
            signature = inspect.signature(self.metric)
        except (
            TypeError,
            ValueError,
        ):  # a builtin or an extension type: it will say so when called
            return
        takes_any = any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()
        )
        unknown = [n for n in names if n not in signature.parameters and not takes_any]
        if unknown:
            raise ConfigError(
                f"task {self.name!r}: its metric takes no argument {unknown[0]!r}; write it as "
                f"metric(logits, tokens, {', '.join(names)})"
            )
        try:
            signature.bind(None, None, **dict.fromkeys(names))
        except TypeError as exc:
            raise ConfigError(
                f"task {self.name!r}: its metric cannot take the fields ({exc}); write it as "
                f"metric(logits, tokens, {', '.join(names)})"
            ) from None


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _numbers(task: str, field: str, values: Sequence[Any]) -> tuple[int | float, ...]:
    """The values as Python numbers: whole numbers stay ints (a long tensor: token ids), any
    other real number makes the whole field float. A value the metric could not take as it is is
    refused here, naming the field and the sequence: NaN or infinite (the metric would turn it into
    a NaN effect, read as the model's fault), a whole number beyond int64 (the field's tensor)."""
    for i, v in enumerate(values):
        if not isinstance(v, numbers.Real):
            raise ConfigError(
                f"task {task!r}: field {field!r}, sequence {i}: {v!r} is not a number; a field holds one "
                f"number per sequence (a token id, a count, a weight)"
            )
        if isinstance(v, numbers.Integral) and not INT64_MIN <= int(v) <= INT64_MAX:
            raise ConfigError(
                f"task {task!r}: field {field!r}, sequence {i}: {int(v)} does not fit a 64-bit integer "
                f"(a field of whole numbers becomes one); give a smaller number"
            )
        if not isinstance(v, numbers.Integral) and not math.isfinite(float(v)):
            raise ConfigError(
                f"task {task!r}: field {field!r}, sequence {i}: {float(v)} is not a finite number; "
                f"give every sequence a finite value"
            )
    if all(isinstance(v, numbers.Integral) for v in values):
        return tuple(int(v) for v in values)
    return tuple(float(v) for v in values)


def names(tasks: Sequence[Task]) -> tuple[str, ...]:
    return tuple(t.name for t in tasks)

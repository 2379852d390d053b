"""A planted indirect-object circuit: an inhibitor that composes into a mover and a negative mover.

Ground truth for the task roles (interp.roles): a planted model (interp.synthetic.planted) whose
heads do one job each on prompts shaped like indirect object identification,
``<bos> A and B , S likes IO`` (S the name said twice, IO the other one), and the
:class:`interp.Task` that names the prompts' positions IO, S1, S2 and END and scores how much
more the model predicts S than IO after END (higher = worse, like every metric).

======  ==============================  =============================================================
head    planted                         what it does on the task
======  ==============================  =============================================================
L0H0    previous_token, writes INHIB    *inhibitor*: at END it looks at S2 and writes S's name where
                                        the movers' queries read it (Q-composition)
L0H1    first_token, writes a constant  looks at the first token; no token in or out
L0H2    current_token, writes nothing   *inactive*: looks at itself and writes nothing
L1H0    name, copies (x3)               *mover*: at END it looks at the one name not marked, IO, and
                                        copies it: the IO logit rises
L1H1    name, suppresses (x1)           *negative mover*: looks where the mover looks and writes
                                        against IO: removing it helps the task
L1H2    previous_token, copies          looks at S2 from END and copies S: it works against the task,
                                        but neither looks at IO nor composes (no task role)
L0H3,   unplanned                       attend uniformly and write nothing: *inactive*
L1H3
======  ==============================  =============================================================

The mover writes three times what the negative mover and the S copier write against it, so
the model predicts IO: the task metric is negative, and ablating the mover or the inhibitor
raises it (a positive effect).

:func:`random_circuit` draws variants of it, for measuring the task roles on circuits their
thresholds were not set on: how many heads, where each one sits, how strongly the movers write,
how much of their attention movers and negative movers park on the first token (up to 0.6),
and decoys that share one part of a role but not the rest: a
head that looks at IO and writes nothing about tokens, an S copier, a copier that parks 96-99%
of its attention on the first token, a layer-0 head that looks at S2 and writes a constant.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from interp.ablate.tasks import Task
from interp.model.load import LoadedModel
from interp.synthetic.planted import NAMES, Planted, planted_model

PLAN: dict[tuple[int, int], str | Planted] = {
    (0, 0): Planted("previous_token", "inhibit"),
    (0, 1): "first_token",
    (0, 2): Planted("current_token", "zero"),
    (1, 0): Planted("name", "copy", 3.0),
    (1, 1): Planted("name", "suppress", 1.0),
    (1, 2): Planted("previous_token", "copy", 1.0),
}
TASK_ROLES = {(0, 0): "inhibitor", (1, 0): "mover", (1, 1): "negative_mover"}
# as written, after <bos>: A and B , S2 likes IO
POSITIONS = {"A": 1, "B": 3, "S2": 5, "END": 6}


@dataclass
class Circuit:
    """The planted model, its task, and the heads' known task roles (every other head has none)."""

    model: LoadedModel
    task: Task
    task_roles: dict[tuple[int, int], str]


def circuit_task(model: LoadedModel, name: str = "ioi", n_prompts: int | None = None) -> Task:
    """The indirect-object task on the planted vocabulary: every ordered pair of names in both
    orders (ABBA: IO first; BABA: S first), as token ids used as given (position p is token p),
    ``n_prompts`` of them (None: all 112)."""
    ids = {
        w: model.tokenizer.convert_tokens_to_ids(w) for w in (*NAMES, "<bos>", "and", ",", "likes")
    }
    sequences, names, s_ids = [], [], []
    for io, s in itertools.permutations(NAMES, 2):
        for io_first in (True, False):
            a, b = (io, s) if io_first else (s, io)
            sequences.append(
                [ids["<bos>"], ids[a], ids["and"], ids[b], ids[","], ids[s], ids["likes"], ids[io]]
            )
            where_io, where_s1 = (POSITIONS["A"], POSITIONS["B"])[:: 1 if io_first else -1]
            names.append(
                {"IO": where_io, "S1": where_s1, "S2": POSITIONS["S2"], "END": POSITIONS["END"]}
            )
            s_ids.append(ids[s])
    keep = slice(None) if n_prompts is None else slice(n_prompts)
    return Task(
        name,
        tuple(tuple(seq) for seq in sequences[keep]),
        positions=((POSITIONS["END"],),) * len(sequences[keep]),
        metric=s_over_io,
        fields={"s": s_ids[keep]},
        named_positions=tuple(names[keep]),
    )


def s_over_io(logits, tokens, s):  # tokens: the IO name after END; s: the prompt's S name
    """How much more the model predicts S than IO (higher = worse)."""
    return logits.gather(1, s[:, None])[:, 0] - logits.gather(1, tokens[:, None])[:, 0]


def planted_circuit(n_prompts: int | None = None) -> Circuit:
    """The planted circuit of the module docstring: 2 layers x 4 heads, with its task."""
    model = planted_model(PLAN, n_layers=2, n_heads=4)
    return Circuit(model, circuit_task(model, n_prompts=n_prompts), dict(TASK_ROLES))


def random_circuit(seed: int, n_prompts: int | None = None) -> Circuit:
    """A variant of the planted circuit (see the module docstring), with its task and the task
    roles of its heads by construction (every head not listed has none)."""
    rng = random.Random(seed)
    n_heads = rng.choice((4, 5, 6))
    slots = {layer: rng.sample(range(n_heads), n_heads) for layer in (0, 1)}
    plan: dict[tuple[int, int], str | Planted] = {}
    roles: dict[tuple[int, int], str] = {}

    def put(layer: int, what: str | Planted, role: str | None = None) -> None:
        head = slots[layer].pop()
        plan[(layer, head)] = what
        if role:
            roles[(layer, head)] = role

    put(0, Planted("previous_token", "inhibit"), "inhibitor")  # it writes one token: no sink
    for _ in range(rng.choice((1, 2))):
        strength = rng.uniform(1.5, 4.0)
        put(1, Planted("name", "copy", strength, sink=rng.uniform(0.0, 0.6)), "mover")
    if rng.random() < 0.7:
        strength = rng.uniform(0.3, 1.2)
        put(1, Planted("name", "suppress", strength, sink=rng.uniform(0.0, 0.6)), "negative_mover")
    decoys: list[tuple[int, str | Planted]] = [
        (1, Planted("name", "constant")),
        (1, Planted("previous_token", "copy", rng.uniform(0.3, 1.0))),
        (1, Planted("name", "copy", 2.0, sink=rng.uniform(0.96, 0.99))),
        (0, Planted("previous_token", "constant")),
        (0, "first_token"),
    ]
    for layer, what in rng.sample(decoys, len(decoys)):
        if slots[layer] and rng.random() < 0.7:
            put(layer, what)
    model = planted_model(plan, n_layers=2, n_heads=n_heads, seed=seed)
    return Circuit(model, circuit_task(model, n_prompts=n_prompts), roles)

"""Planted frequent-token heads: the frequent-token rule measured on heads whose truth is known.

Each planted head puts a known share ``f`` of its non-sink attention on the frequent types of the
synthetic probes (interp.classify.reference.patterns.frequent: each type weighted by the head's own
log-normal taste), and the rest on one other behaviour the bank's sampler draws: a diffuse
background, a null behaviour (random, a token class, a shuffled archetype...) or an archetype; a
BOS sink beside it in 40% of heads. Two templates: ``frequent`` (``f`` ~ U(0.2, 1): the role holds)
and ``near`` (``f`` ~ U(0, 0.15): it does not; the gap between is left empty, as in the bank).
Beside them, the bank's own heads (every archetype, null heads, blends of several roles; the
sampler's seed the caller's) hold no frequent component.

Every head is scored by the real feature code and labelled by the real classify stage
(:func:`interp.classify.stage.classify`: the shipped classifier, the sink rule, the blends, then
the frequent-token rule). Two truths:

- ``true_lift``: the frequent-token lift of the head's *planned* attention: its components at
  their exact weights, without the BOS sink, without the per-query wobble and the jitter that
  make a planted head vary as real heads do. Other behaviours can aim at frequent tokens too (a
  token class that holds ``the``, a determiner relation, punctuation): this truth counts them.
  The role holds (``holds``) where it is at least ``FREQUENT_MIN``.
- ``planted``: the weight of the frequent component itself among the non-sink components: what the
  head was built to do, nothing else counted.
"""

from __future__ import annotations

import random

import numpy as np
import pandas as pd

from interp.classify.frequent import FREQUENT, FREQUENT_MIN, OPEN
from interp.classify.reference import bank as B
from interp.roles import UNEXPLAINED

TEMPLATES = {"frequent": (FREQUENT_MIN, 1.0), "near": (0.0, 0.15)}
SINK_SHARE = 0.4


def _rest(s: B.Sampler, rng: random.Random) -> tuple[str, tuple]:
    """What the rest of a planted head does: a background, a null behaviour or an archetype."""
    pick = rng.random()
    if pick < 1 / 3:
        return s.diffuse()
    if pick < 2 / 3:
        return s.null()
    return s.role(rng.choice([r for r in s.roles if r != "syntactic"]))


def planted_spec(s: B.Sampler, rng: random.Random, template: str) -> B.HeadSpec:
    low, high = TEMPLATES[template]
    share = rng.uniform(low, high)
    taste = ("frequent", (round(rng.uniform(0.0, 1.5), 2), rng.randrange(2**31), "bos"))
    comps, weights = [taste, _rest(s, rng)], [share, 1.0 - share]
    if rng.random() < SINK_SHARE:
        sink = rng.uniform(0.05, 0.9)
        comps.append(("first", ()))
        weights.append(sink / (1 - sink))
    return B.make_spec(
        s, comps, weights, FREQUENT if share >= FREQUENT_MIN else UNEXPLAINED, None, template
    )


def planted_share(spec: B.HeadSpec) -> float:
    """The weight of the frequent component among the non-sink components."""
    kept = [(k, w) for (k, _), w in zip(spec.components, spec.weights) if k != "first"]
    total = sum(w for _, w in kept)
    return sum(w for k, w in kept if k == "frequent") / total if total > 0 else 0.0


def planned(spec: B.HeadSpec) -> B.HeadSpec:
    """The head as planned: its non-sink components at their exact weights, no wobble, no jitter."""
    kept = [(c, w) for c, w in zip(spec.components, spec.weights) if c[0] != "first"]
    total = sum(w for _, w in kept)
    return B.HeadSpec(
        tuple(c for c, _ in kept),
        tuple(w / total for _, w in kept),
        None,
        0.0,
        spec.label,
        spec.second,
        spec.template,
    )


def _keys(n: int) -> list[tuple[int, int]]:
    return [(i // B.CHUNK, i % B.CHUNK) for i in range(n)]


def _lifts(table: pd.DataFrame, n: int) -> np.ndarray:
    """The frequent_token lift of the first ``n`` heads of a features table."""
    mine = table[table["feature"] == FREQUENT].set_index(["layer", "head"])
    lift = (mine["value"] - mine["baseline"]) / (1.0 - mine["baseline"])
    return lift.reindex(_keys(n)).to_numpy()


def measure(seed: int, per_template: int = 150, bank_per_role: int = 10) -> pd.DataFrame:
    """One row per head (planted, then the bank's), both masks: mask, template, spec, planted,
    true_lift, holds (``true_lift`` >= FREQUENT_MIN), measured_lift, role
    (what the classify stage says)."""
    from interp.classify.stage import classify

    frames = []
    for m, mask in enumerate(B.MASKS):
        causal = mask == "causal"
        rng = random.Random(seed * 1000 + 700 + m)  # apart from the bank's and the blends' streams
        slots = B.syntax_slots(causal, seed)
        s = B.Sampler(rng, causal, slots)
        specs = [planted_spec(s, rng, t) for t in TEMPLATES for _ in range(per_template)]
        specs += B.sample_specs(rng, causal, slots, bank_per_role)
        table = B.score_table(specs, causal, seed)
        roles = classify(table, causal=causal).roles.set_index(["layer", "head"])["role"]
        at = _keys(len(specs))
        plan = B.score_table([planned(spec) for spec in specs], causal, seed)
        frames.append(
            pd.DataFrame(
                {
                    "mask": mask,
                    "template": [spec.template for spec in specs],
                    "spec": [spec.describe() for spec in specs],
                    "planted": [planted_share(spec) for spec in specs],
                    "true_lift": _lifts(plan, len(specs)),
                    "holds": _lifts(plan, len(specs)) >= FREQUENT_MIN,
                    "measured_lift": _lifts(table, len(specs)),
                    "role": roles.reindex(at).to_numpy(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True).assign(seed=seed)


def figures(heads: pd.DataFrame) -> dict[str, float]:
    """Precision of the frequent_token claims; recall over the heads where the role holds and no
    earlier step named another (they are ``unexplained`` or ``broad``) (the rule speaks only where they are silent); how many such heads
    an earlier step named instead."""
    claimed = heads["role"] == FREQUENT
    open_ = heads["holds"] & heads["role"].isin([FREQUENT, *OPEN])
    right = claimed & heads["holds"]
    return {
        "heads": int(len(heads)),
        "hold": int(heads["holds"].sum()),
        "claims": int(claimed.sum()),
        "right": int(right.sum()),
        "precision": float(right.sum() / claimed.sum()) if claimed.any() else float("nan"),
        "left_to_the_rule": int(open_.sum()),
        "recall": float((open_ & claimed).sum() / open_.sum()) if open_.any() else float("nan"),
        "named_by_earlier_steps": int((heads["holds"] & ~open_).sum()),
    }

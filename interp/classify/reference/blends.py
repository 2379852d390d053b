"""Planted blends: synthetic heads whose attention is a known mix of archetypes.

They are what the mixture basis (interp.classify.mixture) is fitted on and what its claims are
measured against. Each head draws two to four roles other than syntactic (the bank's sampler
gives their variants), Dirichlet(1.5) shares of them, a diffuse background of 0-0.7 of the
attention in 70% of heads, and a BOS sink beside all of that in 40% (renormalised away by the
features, as in the bank). A current_token share is never drawn beside a copy role: by the bank's
pair rule the two are one copy head. Heads are scored by the bank's feature code
(:func:`interp.classify.reference.bank.score_specs`), so a blend's features mean what a real
head's do. ``share:<component>`` columns hold the true shares of the non-sink attention.

:func:`spec_shares` reads the same shares out of a bank head's description, so the bank's own
heads (null heads, ``several`` mixtures) can be scored too.
"""

from __future__ import annotations

import random
import re

import numpy as np
import pandas as pd

from interp.classify.mixture import BACKGROUND, BLEND_ROLES, COMPONENTS
from interp.classify.reference import bank as B

BLEND_SIZES = (2, 2, 3, 3, 4)
OFFSET_ROLES = {-1: "previous_token", 0: "current_token", 1: "next_token"}
KIND_ROLES = {
    "delimiter": "delimiter",
    "same_token": "duplicate_token",
    "duplicate": "duplicate_token",
    "induction": "induction",
    "local": "local",
    "position": "positional",
    "broad": BACKGROUND,
    "random_logits": BACKGROUND,
}


def _blend(s: B.Sampler, rng: random.Random) -> tuple[B.HeadSpec, dict[str, float]]:
    roles = [r for r in s.roles if r in BLEND_ROLES]
    k = rng.choice(BLEND_SIZES)
    picked = rng.sample(roles, k)
    while "current_token" in picked and set(picked) & set(B.COPY_ROLES):
        picked = rng.sample(roles, k)
    mix = np.random.default_rng(rng.randrange(2**31)).dirichlet([1.5] * k)
    rest = rng.uniform(0.0, 0.7) if rng.random() < 0.7 else 0.0
    comps, weights = [s.role(r) for r in picked], list(mix * (1 - rest))
    truth = dict(zip(picked, (float(w) for w in weights)))
    if rest > 0:
        comps.append(s.diffuse())
        weights.append(rest)
        truth[BACKGROUND] = rest
    if rng.random() < 0.4:
        sink = rng.uniform(0.05, 0.9)
        comps.append(("first", ()))
        weights.append(sink / (1 - sink))
    return B.make_spec(s, comps, weights, "blend", None, "blend"), truth


def build_blends(seed: int, per_mask: int = 300) -> pd.DataFrame:
    """``per_mask`` planted blends per mask (causal, encoder): the bank's feature columns,
    sink_mass, ``share:<component>`` (true shares), mask, seed, spec. Deterministic in ``seed``."""
    frames = []
    for m, mask in enumerate(B.MASKS):
        causal = mask == "causal"
        rng = random.Random(seed * 1000 + 500 + m)  # apart from the bank's own streams
        s = B.Sampler(rng, causal, B.syntax_slots(causal, seed))
        drawn = [_blend(s, rng) for _ in range(per_mask)]
        specs = [spec for spec, _ in drawn]
        scored = B.score_specs(specs, causal, seed).reset_index(drop=True)
        truth = pd.DataFrame([t for _, t in drawn]).reindex(columns=list(COMPONENTS)).fillna(0.0)
        frames.append(
            pd.concat([scored, truth.add_prefix("share:")], axis=1).assign(
                mask=mask, seed=seed, spec=[spec.describe() for spec in specs]
            )
        )
    return pd.concat(frames, ignore_index=True)


def spec_shares(spec: str) -> dict[str, float]:
    """The shares of a bank head's non-sink attention per component, from its description
    ("0.62 offset[-1, 'self'] + 0.38 broad[False]"); off-catalogue parts count as ``other``."""
    shares: dict[str, float] = {}
    for part in spec.split(" + "):
        match = re.match(r"([\d.]+) (\w+)(.*)", part)
        if match is None:
            raise ValueError(f"not a bank head description: {spec!r}")
        weight, kind, args = float(match[1]), match[2], match[3]
        if kind == "first":
            continue
        if kind == "offset":
            role = OFFSET_ROLES[int(args.strip("[]").split(",")[0])]
        else:
            role = KIND_ROLES.get(kind, "other")
        shares[role] = shares.get(role, 0.0) + weight
    total = sum(shares.values())
    return {role: w / total for role, w in shares.items()}


def true_shares(frame: pd.DataFrame) -> np.ndarray:
    """float [head, COMPONENTS] true shares: ``share:`` columns of blends, or parsed specs."""
    if f"share:{COMPONENTS[0]}" in frame.columns:
        return frame[[f"share:{c}" for c in COMPONENTS]].to_numpy(dtype=float)
    parsed = [spec_shares(s) for s in frame["spec"]]
    return np.array([[p.get(c, 0.0) for c in COMPONENTS] for p in parsed])

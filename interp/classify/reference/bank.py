# Over 400 lines: sampler, labels and scoring: a label describes its pattern.
"""The reference bank: labelled example heads the classifier is fitted on.

Every bank head is a synthetic attention pattern, a per-query mixture of archetype and null
behaviours (interp.classify.reference.patterns), scored on synthetic probes of all three kinds
(interp.classify.reference.probes) by the *same* feature code as real heads
(``FeatureAccumulator.start_batch / add_layer / table`` and :func:`head_matrix`), so a bank
feature means exactly what a real feature means. It is built for causal and encoder masks.

The classifier names what a head does with its attention *off the sink* (every feature is
renormalised over the non-sink keys; interp.classify.primary decides ``first_token``), so
bank heads are labelled by their non-sink components: a BOS sink beside a role changes the role's
features only through how its weight varies from query to query.

Templates (``n`` = ``per_role`` heads per role and mask; ``s`` = the role's mean weight):

- ``diffuse`` (n per role, 2n broad): one role (s ~ U(0.2, 1)) over a diffuse background
  (uniform or near-uniform random logits): weak and strong heads, labelled with the role.
  Uniform mass is *no* behaviour, so it never outvotes a role; ``broad`` heads are the background
  alone (plus at most 0.15 of a role).
- ``sink`` (n per role, plus n/2): a role beside a BOS sink of weight U(0.1, 0.95) (and at most
  0.15 of uniform mass in the rest): labelled with the role; plus sinks whose leftover attention
  meets syntax by chance: ``unexplained``.
- ``pair`` (n/2 per role): two roles, the first with s ~ U(0.5, 0.85): labelled with the first,
  except that current_token beside duplicate_token or induction is the copy role (a copy head
  that also attends to the query itself, see :func:`_pair_labels`).
- ``noisy`` (n/2 per role): a role (s ~ U(0.5, 1)) plus a null behaviour: labelled with the role.
- ``null_head`` (7n): behaviours no archetype describes -- peaked Dirichlet attention, random
  logits as in randomly initialised heads with large weights, a fixed distance beyond the local
  window, an arbitrary token class, an archetype's pattern with its keys shuffled -- possibly
  plus a BOS sink, a weak role (<= 0.25 of the rest), uniform mass or chance-level syntax:
  labelled ``unexplained``.
- ``several`` (2n): three or four roles with no dominant one (max weight <= 0.42): ``unexplained``.

A synthetic duplicate-token head is, in equal shares: on earlier copies only (falling back where
there are none); on copies with a fixed 20-60% kept on the query itself; or a same-token matcher,
uniform over the query and its earlier copies (``same_token``: a token matches itself as well as
any copy, so its share on q falls as copies accumulate, and a first sighting attends to itself).
The last is how the duplicate-token heads of models trained to spot repeats look (on the
development seeds of benchmarks/trained_validation.py: on queries with a copy 25-40% on q, 25-47%
on the copies, 7-12% on the sink, the rest diffuse; 50-80% on q where there is no copy), and
without it the weaker ones (copy lift ~0.3 beside a current-token lift ~0.35 and a diffuse rest)
sat in a thin part of the bank (8-11 bank heads within one standard deviation, 15-17 with it),
where the linear model's ``unexplained`` won (0.64-0.73). The duplicate_token
feature sets q aside, so all three read as copies; they differ in current_token. For the same
reason a ``several`` head never mixes current_token with a copy role: by the pair rule those two
are one copy head, and labelling such a mixture ``unexplained`` contradicted it. Measured on the
development split (duplicate-token heads right of 12; expected calibration error over all heads):
before 10, 0.058; the ``several`` rule alone 12, 0.041; the matcher alone 11, 0.025; both 12, 0.035.

A synthetic syntactic head links the queries of one or two relation slots (those with at least
MIN_ARCS arcs and a fixed-rule baseline -- best word offset, position or form -- of at most 0.8) to
their gold partner, missing a share of arcs by one word (real heads' error), with a hit rate at
least 0.3 above that baseline.
Clark's score is an argmax over words, so a few percent on the partner over a uniform or BOS
background already wins it: such syntax never appears as a minor ingredient of another label,
and beside a sink it is the label whatever the weights. *Chance-level* syntax (a hit rate within
-0.1 .. +0.12 of the baseline: a head that merely looks at related words) does appear in null
heads, beside sinks and in broad remnants, labelled by the rest of the head, so that ordinary
heads' syntactic scores sit near 0 as in real models, not at the floor.

Each query scales the weights by its own log-normal factors (``wobble``) and renormalises, so
mixtures vary across positions as real heads do; every entry then gets a little log-normal
``jitter`` (no real head is exactly uniform, and exact ties would decide argmax-based scores).
The gaps between templates (weak role 0.15-0.2 over uniform, role 0.25-0.5 beside a null) are
deliberately left empty: labels there would be coin flips. (The first was 0.15-0.3 until trained
duplicate-token heads, which the task needs and which put 25-30% of their attention on copies
over a diffuse rest, turned out to live in it: benchmarks/trained_validation.py, development seeds.) Every non-syntactic head appears a
second time as a run without syntax probes would score it (:func:`without_syntax`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from interp.classify.matrix import COLUMNS, MIN_ARCS, SINK_MASS, SINK_ROLE, head_frames
from interp.classify.reference import patterns as P
from interp.classify.reference.probes import PAD, synthetic_sequences
from interp.collect.accumulator import FeatureAccumulator
from interp.collect.features import FROM_END, POSITIONS, context
from interp.collect.syntax import best_rule_share, fixed_rule_counts
from interp.probes.batch import bucket, make_batch
from interp.roles import LOOKS, UNEXPLAINED

MASKS = ("causal", "encoder")
CHUNK = 48  # heads scored per accumulator "layer"


@dataclass(frozen=True)
class HeadSpec:
    """A bank head: components (kind, args), their mean weights, how much they wobble, its labels."""

    components: tuple[tuple[str, tuple], ...]
    weights: tuple[float, ...]
    wobble: float | None
    jitter: float
    label: str
    second: str | None
    template: str

    def describe(self) -> str:
        return " + ".join(
            f"{w:.2f} {k}{list(a) if a else ''}" for (k, a), w in zip(self.components, self.weights)
        )


class Sampler:
    """Draws component variants for one mask; the syntax slots are those with enough arcs."""

    def __init__(self, rng: random.Random, causal: bool, slots: dict[int, float]):
        self.rng, self.causal, self.slots = rng, causal, slots
        # the classifier names non-sink attention: first_token is the sink rule's, not a class
        self.roles = [r for r in LOOKS if r != SINK_ROLE and not (causal and r == "next_token")]
        if not slots:
            self.roles.remove("syntactic")

    def role(self, name: str) -> tuple[str, tuple]:
        rng, fb = self.rng, self.rng.choice(P.FALLBACKS)
        if name in ("previous_token", "current_token", "next_token"):
            return "offset", (
                {"previous_token": -1, "current_token": 0, "next_token": 1}[name],
                "self",
            )
        if name == "delimiter":
            return "delimiter", (
                rng.choice(["all", "nearest"] + ([] if self.causal else ["sep", "sep"])),
                fb,
            )
        if (
            name == "duplicate_token"
        ):  # copies only; copies and a fixed share on q; q and copies alike
            kind = rng.random()
            if kind < 1 / 3:
                return "same_token", ()
            return "duplicate", (fb, round(rng.uniform(0.2, 0.6), 2) if kind < 2 / 3 else 0.0)
        if name == "induction":
            return "induction", (fb,)
        if name == "local":
            return "local", (rng.choice([2, 3, 3, 4]), rng.choice([1.0, 0.7, 0.5]))
        if name == "broad":
            return "broad", (rng.random() < 0.3,)
        if name == "positional":
            if not self.causal and rng.random() < 0.4:
                return "position", (None, rng.choice(FROM_END), fb)
            return "position", (rng.choice(POSITIONS), None, fb)
        if name == "syntactic":
            # hits well above the easiest chosen slot's fixed-rule baseline, so the head beats it
            chosen = tuple(
                sorted(rng.sample(sorted(self.slots), min(len(self.slots), rng.choice([1, 1, 2]))))
            )
            floor = min(1.0, min(self.slots[c] for c in chosen) + 0.3)
            return "syntactic", (
                chosen,
                fb,
                round(rng.uniform(floor, 1.0), 3),
                rng.randrange(2**31),
            )
        raise ValueError(name)

    def chance_syntax(self) -> tuple[str, tuple]:
        """Attention to syntactic partners no better than the fixed-rule baseline: what heads
        that merely look at related words show. It makes no syntactic head."""
        rng = self.rng
        slot = rng.choice(sorted(self.slots))
        b = self.slots[slot]
        hit = rng.uniform(max(0.0, b - 0.1), min(1.0, b + 0.12))
        return "syntactic", ((slot,), rng.choice(P.FALLBACKS), round(hit, 3), rng.randrange(2**31))

    def diffuse(self) -> tuple[str, tuple]:
        if self.rng.random() < 0.5:
            return "broad", (self.rng.random() < 0.3,)
        return "random_logits", (round(self.rng.uniform(0.0, 1.2), 3),)

    def null(self) -> tuple[str, tuple]:
        rng, fb = self.rng, self.rng.choice(P.FALLBACKS)
        kind = rng.choice(
            ["dirichlet", "random_logits", "far_offset", "token_class", "shuffled", "shuffled"]
        )
        if kind == "dirichlet":
            return kind, (round(rng.uniform(0.05, 0.3), 3),)
        if kind == "random_logits":
            return kind, (round(rng.uniform(3.0, 6.0), 3),)
        if kind == "far_offset":
            d = rng.randint(4, 12)
            return kind, (
                d if self.causal or rng.random() < 0.5 else -d,
                rng.choice(("bos", "uniform")),
            )
        if kind == "token_class":
            m = rng.randint(3, 9)
            return kind, (m, rng.randrange(m), fb)
        inner = rng.choice([r for r in self.roles if r != "broad"])
        return kind, self.role(inner)

    def wobble(self) -> float | None:
        return None if self.rng.random() < 0.2 else round(self.rng.uniform(0.1, 0.8), 2)


COPY_ROLES = ("duplicate_token", "induction")


def _pair_labels(first: str, other: str) -> tuple[str, str]:
    """(label, second role) of a head mixing two roles, the first weighing more: the first, except
    that a copy head keeping mass on the query itself is the copy head (a token matches itself:
    self-attention says nothing about copies, and duplicate_token / induction set it aside)."""
    if first == "current_token" and other in COPY_ROLES:
        return other, first
    return first, other


def make_spec(
    s: Sampler, comps: list, weights: list[float], label: str, second: str | None, template: str
) -> HeadSpec:
    """A head of components ``comps`` (the sampler's variants) with mean ``weights`` (normalised),
    the sampler's per-query wobble and entry jitter, and its labels."""
    total = sum(weights)
    return HeadSpec(
        tuple(comps),
        tuple(round(w / total, 4) for w in weights),
        s.wobble(),
        round(s.rng.uniform(0.02, 0.3), 3),
        label,
        second,
        template,
    )


def sample_specs(
    rng: random.Random, causal: bool, slots: dict[int, float], per_role: int = 40
) -> list[HeadSpec]:
    """The bank's head specs for one mask (see the module docstring for the templates)."""
    s = Sampler(rng, causal, slots)
    specs: list[HeadSpec] = []
    roles = [r for r in s.roles if r != "broad"]
    # Clark's syntactic score is an argmax: see the module docstring on syntax.
    minor = [r for r in roles if r != "syntactic"]
    for r in roles:
        for _ in range(per_role):
            w = rng.uniform(0.2, 1.0)
            specs.append(make_spec(s, [s.role(r), s.diffuse()], [w, 1 - w], r, None, "diffuse"))
    for _ in range(per_role * 2):
        comps, weights = [s.diffuse()], [1.0]
        if rng.random() < 0.6:
            comps.append(
                s.role(rng.choice(minor)) if rng.random() < 0.85 or not slots else s.chance_syntax()
            )
            weights.append(rng.uniform(0.0, 0.15))
        specs.append(make_spec(s, comps, weights, "broad", None, "diffuse"))
    for r in roles:
        for _ in range(per_role):
            # the role beside a BOS sink of any weight: renormalised away, so the label is the role
            w = rng.uniform(0.05, 0.9)
            u = rng.uniform(0.0, 0.15) if rng.random() < 0.4 else 0.0
            specs.append(
                make_spec(
                    s,
                    [s.role(r), ("first", ()), s.role("broad")],
                    [w * (1 - u), 1 - w, w * u],
                    r,
                    None,
                    "sink",
                )
            )
    for _ in range(
        per_role // 2 if slots else 0
    ):  # sinks whose leftover attention meets syntax by chance
        w = rng.uniform(0.5, 0.95)
        specs.append(
            make_spec(s, [("first", ()), s.chance_syntax()], [w, 1 - w], UNEXPLAINED, None, "sink")
        )
    for r in roles:
        for _ in range(per_role // 2):
            r2 = rng.choice([x for x in roles if x != r])
            w = rng.uniform(0.5, 0.85)
            label, second = _pair_labels(r, r2)
            specs.append(
                make_spec(
                    s,
                    [s.role(r), s.role(r2)],
                    [w, 1 - w],
                    label,
                    second if 1 - w >= 0.2 else None,
                    "pair",
                )
            )
        for _ in range(per_role // 2):
            w = rng.uniform(0.5, 1.0)
            specs.append(make_spec(s, [s.role(r), s.null()], [w, 1 - w], r, None, "noisy"))
    for _ in range(per_role * 7):
        comps, weights = [s.null()], [1.0]
        if rng.random() < 0.3:
            comps.append(s.null())
            weights.append(rng.uniform(0.2, 1.0))
        extra = rng.random()
        if extra < 0.3:
            comps.append(("first", ()))
            weights.append(rng.uniform(0.05, 0.9) * sum(weights))
        elif extra < 0.55:
            comps.append(s.role(rng.choice(minor)))
            weights.append(rng.uniform(0.0, 0.33) * sum(weights))
        elif extra < 0.7:
            comps.append(s.role("broad"))
            weights.append(rng.uniform(0.0, 0.4) * sum(weights))
        elif extra < 0.85 and slots:
            comps.append(s.chance_syntax())
            weights.append(rng.uniform(0.2, 1.0) * sum(weights))
        specs.append(make_spec(s, comps, weights, UNEXPLAINED, None, "null_head"))
    for _ in range(per_role * 2):
        k = rng.choice([3, 3, 4])
        while True:
            mix = np.random.default_rng(rng.randrange(2**31)).dirichlet([1.5] * k)
            if mix.max() <= 0.42:
                break
        picked = rng.sample(minor, k)
        while "current_token" in picked and set(picked) & set(
            COPY_ROLES
        ):  # that pair is one copy head
            picked = rng.sample(minor, k)
        specs.append(
            make_spec(s, [s.role(r) for r in picked], list(mix), UNEXPLAINED, None, "several")
        )
    return specs


def _head_pattern(spec: HeadSpec, ctx, gen: torch.Generator, cache: dict) -> torch.Tensor:
    comps = [P.build(ctx, kind, args, gen, cache) for kind, args in spec.components]
    return P.mix(comps, torch.tensor(spec.weights), spec.wobble, ctx, gen, spec.jitter)


def score_specs(specs: list[HeadSpec], causal: bool, seed: int = 0, **corpus) -> pd.DataFrame:
    """The feature matrix (and sink mass) of synthetic heads, one row per spec, in order, through the
    real feature code."""
    matrix, sinks = head_frames(score_table(specs, causal, seed, **corpus))
    return matrix.join(sinks[[SINK_MASS]]).reset_index(drop=True).iloc[: len(specs)]


def score_table(specs: list[HeadSpec], causal: bool, seed: int = 0, **corpus) -> pd.DataFrame:
    """The features table of synthetic heads (no bootstrap intervals): spec ``i`` is layer
    ``i // CHUNK``, head ``i % CHUNK``; the last layer is padded with broad heads."""
    seqs, relations = synthetic_sequences(causal, seed, **corpus)
    ctxs = []
    for group in bucket(seqs, 2048):
        batch = make_batch([seqs[i] for i in group], group, causal, PAD)
        ctxs.append(context(batch, relations))
    n_chunks = -(-len(specs) // CHUNK)
    # n_bootstrap=0: the bank needs values, not intervals (and table() then skips the quantiles)
    acc = FeatureAccumulator(n_chunks, CHUNK, relations, n_bootstrap=0, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    filler = HeadSpec((("broad", (False,)),), (1.0,), None, 0.0, "broad", None, "filler")
    padded = specs + [filler] * (n_chunks * CHUNK - len(specs))
    for ctx in ctxs:
        acc.start_batch(ctx)
        cache: dict = {}
        for c in range(n_chunks):
            chunk = padded[c * CHUNK : (c + 1) * CHUNK]
            acc.add_layer(
                c, torch.stack([_head_pattern(s, ctx, gen, cache) for s in chunk], 1), ctx
            )
    return acc.table()


def syntax_slots(
    causal: bool, seed: int = 0, max_baseline: float = 0.8, **corpus
) -> dict[int, float]:
    """Syntactic feature slots a synthetic syntactic head can show itself on, with their
    fixed-rule baselines: at least MIN_ARCS eligible arcs, and a baseline of at most
    ``max_baseline`` (where "always attend to the word d away" is right for, say, every
    adjective, no head can beat it)."""
    seqs, relations = synthetic_sequences(causal, seed, **corpus)
    ctx = context(make_batch(seqs, list(range(len(seqs))), causal, PAD), relations)
    counts = np.bincount(ctx.arc_slot.numpy(), minlength=2 * len(relations))
    baseline = best_rule_share(fixed_rule_counts(ctx), counts)
    return {
        int(i): float(baseline[i])
        for i in np.flatnonzero((counts >= MIN_ARCS) & (baseline <= max_baseline))
    }


def build_bank(seed: int = 0, per_role: int = 40, masks: tuple[str, ...] = MASKS) -> pd.DataFrame:
    """The labelled reference bank: one row per synthetic head, columns COLUMNS + sink_mass + label,
    second, template, mask, seed, spec, head_id (the head's mask and index, shared by its twin),
    followed by the same heads without syntax probes
    (:func:`without_syntax`). Deterministic in ``seed``; about a minute on two CPU cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(
        1
    )  # many small tensor ops: one thread is several times faster on a busy CPU
    try:
        frames = [_bank_mask(seed, per_role, m, mask) for m, mask in enumerate(masks)]
    finally:
        torch.set_num_threads(threads)
    bank = pd.concat(frames, ignore_index=True)
    bank = pd.concat([bank, without_syntax(bank)], ignore_index=True)
    bank["second"] = bank["second"].astype(object).where(bank["second"].notna(), np.nan)
    return bank


def without_syntax(bank: pd.DataFrame) -> pd.DataFrame:
    """The bank's heads as a run without syntax probes sees them (a user corpus with no gold
    arcs, a toy model's own vocabulary): the syntactic column imputed 0 (matrix.py), where heads
    scored against the grammar mostly sit well below 0. Syntactic heads cannot show themselves
    there and are left out; templates are marked ``<template>:no-syntax``."""
    out = bank[bank["label"] != "syntactic"].copy()
    out["syntactic"] = 0.0
    out["template"] = out["template"] + ":no-syntax"
    return out


def _bank_mask(seed: int, per_role: int, m: int, mask: str) -> pd.DataFrame:
    if mask not in MASKS:
        raise ValueError(f"mask must be one of {MASKS}, got {mask!r}")
    causal = mask == "causal"
    rng = random.Random(seed * 1000 + m)
    specs = sample_specs(rng, causal, syntax_slots(causal, seed), per_role)
    matrix = score_specs(specs, causal, seed)
    meta = pd.DataFrame(
        {
            "label": [s.label for s in specs],
            "second": [s.second for s in specs],
            "template": [s.template for s in specs],
            "mask": mask,
            "seed": seed,
            "spec": [s.describe() for s in specs],
            "head_id": [f"{mask}:{i}" for i in range(len(specs))],
        }
    )
    return pd.concat([matrix[list(COLUMNS) + [SINK_MASS]], meta], axis=1)

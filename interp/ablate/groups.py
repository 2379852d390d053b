"""Group ablations: several heads removed together, and a role's heads against random heads.

The causal check of a role label: if the heads the classifier calls ``induction`` do the
copying, ablating them together should hurt the repeated-half loss far more than ablating as
many heads drawn at random from the heads with none of the compared labels.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pandas as pd
import torch

from interp.ablate.batches import EvalCorpus
from interp.ablate.catalogue import ORIENTATION
from interp.ablate.forward import Ablator
from interp.ablate.metrics import batch_metrics
from interp.ablate.values import edits_for

Head = tuple[int, int]


def group_value(
    ablator: Ablator,
    corpus: EvalCorpus,
    metric: str,
    heads: list[Head],
    kind: str = "zero",
    means: torch.Tensor | None = None,
) -> float:
    """``metric`` over the corpus with every head of ``heads`` ablated together (none: intact)."""
    num = den = 0.0
    for batch in corpus.batches:
        clean = ablator.clean(
            batch,
            keep_resid=bool(heads),
            keep_z=bool(heads) and kind == "resample",
            keep_sink=bool(heads) and kind == "sink",
        )
        if heads:
            start = min(layer for layer, _ in heads)
            edits = edits_for(
                kind, heads, batch, clean.z or None, means, sink_v=clean.sink_v or None
            )
            out = ablator.run(
                batch, edits, start_layer=start, resid=clean.resid_pre[start] if start else None
            )
        else:
            out = clean.readout
        per = batch_metrics(out, batch, clean.readout).get(metric)
        if per is not None:
            num, den = num + float(per.num.sum()), den + float(per.den.sum())
    if den == 0:
        raise ValueError(f"the corpus has no sequence for metric {metric!r}")
    return num / den


@dataclass(frozen=True)
class GroupCheck:
    role: str
    heads: list[Head]
    rise: float  # how much worse the metric gets with the role's heads ablated (positive = worse)
    random_rises: list[float]  # the same for each random group of as many other heads

    @property
    def random_mean(self) -> float:
        return sum(self.random_rises) / len(self.random_rises)

    @property
    def ratio(self) -> float:
        return self.rise / self.random_mean if self.random_mean > 0 else float("inf")


def labelled(roles: pd.DataFrame, role: str) -> list[Head]:
    """The heads whose primary role is ``role``."""
    rows = roles[roles["role"] == role]
    return [(int(layer), int(head)) for layer, head in zip(rows["layer"], rows["head"])]


def role_vs_random(
    ablator: Ablator,
    corpus: EvalCorpus,
    roles: pd.DataFrame,
    role: str,
    metric: str,
    exclude: tuple[str, ...] = (),
    n_draws: int = 10,
    seed: int = 0,
) -> GroupCheck:
    """Ablate ``role``'s heads together and ``n_draws`` random groups of as many heads drawn from
    the heads whose role is neither ``role`` nor in ``exclude``; rises oriented so positive = worse."""
    heads = labelled(roles, role)
    if not heads:
        raise ValueError(f"no head is labelled {role!r}")
    skip = {h for r in (role, *exclude) for h in labelled(roles, r)}
    others = [
        (int(l), int(h))
        for l, h in zip(roles["layer"], roles["head"])
        if (int(l), int(h)) not in skip
    ]
    sign = ORIENTATION.get(metric, 1)
    base = group_value(ablator, corpus, metric, [])
    rise = sign * (group_value(ablator, corpus, metric, heads) - base)
    rng = random.Random(seed)
    draws = [
        sign * (group_value(ablator, corpus, metric, rng.sample(others, len(heads))) - base)
        for _ in range(n_draws)
    ]
    return GroupCheck(role, heads, rise, draws)

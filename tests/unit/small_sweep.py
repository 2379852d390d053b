"""The small exact sweep the sequential-sweep and ``--precise`` tests share: zero ablation on a
few short sequences of each built-in eval set, one thread, no estimate, no pruning."""

from __future__ import annotations

from interp.ablate.config import AblateConfig

SMALL_SWEEP = AblateConfig(
    ablations=("zero",),
    n_prose=3,
    n_repeated=3,
    repeated_lengths=(6,),
    n_syntax=4,
    n_bootstrap=100,
    threads=1,
    attribution=False,
    prune=False,
)

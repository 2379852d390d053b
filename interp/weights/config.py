"""The weights stage's config: how many tokens the OV circuits are read on, the null, and the
small forward pass that measures how much each head writes."""

from __future__ import annotations

from typing import Any

from interp.config import MAX_INT, StageConfig, config, option


@config
class WeightsConfig(StageConfig):
    """What a head writes and whom it works with, read from its weights."""

    n_tokens: int = option(default=1024, ge=16, le=MAX_INT)
    """ordinary tokens sampled from the vocabulary: the rows and columns of every OV circuit
    (copying and its top-k rates are read on them; all of them where the vocabulary is smaller)"""
    top_k: int = option(default=10, ge=1, le=MAX_INT)
    """a token counts as copied (suppressed) when its own logit is among the k highest (lowest)
    of its row over the sampled tokens"""
    n_null: int = option(default=100, ge=10, le=MAX_INT)
    """random heads (i.i.d. Gaussian weights of the same shape) in the null of every score"""
    n_bootstrap: int = option(default=50, ge=10, le=MAX_INT)
    """bootstrap replicates over sampled tokens, ordinal pairs and probe sequences (intervals)"""
    n_prose: int = option(default=32, ge=0, le=MAX_INT)
    """prose sentences of the forward pass that measures each head's output size"""
    n_repeated: int = option(default=16, ge=0, le=MAX_INT)
    """repeated-random-token sequences of that forward pass"""
    repeated_length: int = option(default=24, ge=2, le=MAX_INT)
    """length of the random half of each repeated-token sequence"""
    seed: int = option(default=0, ge=0, le=MAX_INT)
    """seed of the token sample, the null's random heads, the probes and the bootstrap"""

    def for_quick(self, keep: tuple[str, ...] = ()) -> WeightsConfig:
        """Smaller samples for --quick: the same scores, wider intervals. Fields named in
        ``keep`` (the ones a user set explicitly) stay as they are: a flag wins over --quick."""
        smaller = {
            "n_tokens": min(self.n_tokens, 512),
            "n_null": min(self.n_null, 50),
            "n_bootstrap": min(self.n_bootstrap, 20),
            "n_prose": min(self.n_prose, 16),
            "n_repeated": min(self.n_repeated, 8),
        }
        return self.replaced(smaller, keep)

    @classmethod
    def run_wide(cls, seed: int | None, builtin: bool) -> dict[str, Any]:
        """``--seed`` seeds the token sample, the null, the probes and the bootstrap;
        ``--no-builtin`` measures output sizes on repeated random tokens alone (no shipped prose)."""
        return {
            **({"seed": seed} if seed is not None else {}),
            **({} if builtin else {"n_prose": 0}),
        }

    @property
    def random_seed(self) -> int:
        return self.seed

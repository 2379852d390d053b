"""The toy stage's config."""

from __future__ import annotations

from interp.config import StageConfig, config, option


@config
class ToyConfig(StageConfig):
    """How the toy stage counts."""

    scale: int = option(default=1, ge=1, le=1000)
    """multiply every head's feature count by this"""

"""The report stage's config."""

from __future__ import annotations

from interp.config import StageConfig, config, option


@config
class ReportConfig(StageConfig):
    """What the report stage writes: report.html always, report.pdf unless ``pdf`` is off."""

    pdf: bool = option(default=True)
    """also write report.pdf (the same content, typeset)"""

"""The report stage's config."""

from __future__ import annotations

from interp.config import StageConfig, config, option


@config
class ReportConfig(StageConfig):
    """What the report stage writes: report.html always, report.pdf unless ``pdf`` is off; and
    how many processes draw its figures."""

    pdf: bool = option(default=True)
    """also write report.pdf (the same content, typeset)"""
    processes: int | None = option(default=None, ge=1, le=256, placement=True)
    """sections drawn at once, each in a process of its own (Linux); default: the CPUs this process may
    use that other processes leave free; 1 draws them here. The files are the same for any count"""

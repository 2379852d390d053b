"""A value as the report writes it: one rule for a cell and for a share, shared by the HTML page and
the PDF (through the content model), so the two print the same text."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd


def fmt(value: Any) -> str:
    """A cell's text: '' for missing, integers as is, floats to 3 significant digits."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) or (
        isinstance(value, float) and value.is_integer() and abs(value) < 1e6
    ):
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) >= 1e-3 else f"{value:.2e}"
    return str(value)


def small_percent(value: float | None) -> str:
    """A share that may be a single head of hundreds: one decimal below 1% (0.4%, not 0%)."""
    if isinstance(value, float) and 0 < value < 0.01:
        return f"{value:.1%}"
    return percent(value)


def percent(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    text = f"{value:.0%}"
    return "0%" if text == "-0%" else text  # a change that rounds to nothing has no sign

"""Where interp keeps what it makes once and reuses: dequantized GGUF models, trained models.

``$INTERP_CACHE`` when it is set and not empty (an empty value never means the current folder),
else the platform's cache folder for interp (``platformdirs``: ``~/.cache/interp`` on Linux,
``$XDG_CACHE_HOME/interp`` when that is set, ``~/Library/Caches/interp`` on macOS,
``%LOCALAPPDATA%\\interp\\Cache`` on Windows).
"""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_cache_dir


def cache_root() -> Path:
    """The folder interp's caches live under (read each time: a test or a script may set
    ``$INTERP_CACHE`` while running)."""
    given = os.environ.get("INTERP_CACHE", "").strip()
    return Path(given).expanduser() if given else Path(user_cache_dir("interp", appauthor=False))

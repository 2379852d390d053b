"""The analyses that run as scripts (``python analyses/NAME.py``) import as a script does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# the scripts that reach their helpers through the script's own folder on the path, not as a package
SCRIPTS = ("packaged", "relabelled", "sinks", "division_of_labour")


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_script_imports_with_only_its_own_folder_on_the_path(name):
    """Python puts a script's folder first on the path and nothing else of the checkout: an import
    of benchmarks/' helpers before _runs puts that folder on the path fails there, not under
    pytest's wider path."""
    code = f"import sys; sys.path[0] = {str(ROOT / 'analyses')!r}; import {name}"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]

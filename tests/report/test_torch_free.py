"""The report stage reads tables only: building a report from a stored run never imports torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_python(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_report_stage_and_cli_never_import_torch(make_fake_run, tmp_path):
    run_dir = make_fake_run(tmp_path)  # with exemplars.npz: the exemplar figures are drawn too
    out = run_python(f"""
import sys
from interp.pipeline.stages import stage
report = stage("report")
report.run({str(run_dir)!r}, None, report.config(), progress=False)
from interp.cli import main
try:
    main(["report", {str(run_dir)!r}], standalone_mode=False)
except SystemExit as exit:
    assert not exit.code, exit.code
leaked = sorted(name for name in sys.modules if name == "torch" or name.startswith("torch."))
print("torch" in sys.modules, leaked[:5])
""")
    assert out.splitlines()[-1] == "False []"
    assert (run_dir / "figures" / "exemplar_induction.png").exists() and (
        run_dir / "report.pdf"
    ).exists()


def test_reading_stored_exemplars_needs_no_torch(make_fake_run, tmp_path):
    run_dir = make_fake_run(tmp_path, tables=(), clusters=False)
    out = run_python(f"""
import sys
from interp.collect.exemplars import read_exemplars
probes = read_exemplars({str(run_dir)!r}).probes
print(len(probes), probes[1].pattern(0, 2).shape, "torch" in sys.modules)
""")
    assert out.split() == ["3", "(9,", "9)", "False"]

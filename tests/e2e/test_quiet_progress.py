"""With the progress bars off (-q), a long stage still says what it finished: one line per phase."""

from __future__ import annotations

import re

from click.testing import CliRunner

from interp.cli import main
from interp.model.tiny import build_tiny


def test_quiet_runs_print_one_line_per_finished_ablate_phase(tmp_path):
    model = build_tiny("llama", tmp_path / "tiny-llama", n_kv_heads=2)
    result = CliRunner().invoke(
        main,
        [
            "run",
            "--model",
            str(model),
            "--out",
            str(tmp_path / "runs"),
            "--name",
            "q",
            "--quick",
            "--skip",
            "report",
            "-q",
        ],
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("ablate: ")]
    rounds = [line for line in lines if line.startswith("ablate: round ")]
    assert rounds and all(re.match(r"ablate: round \d+ after \d+ s: ", r) for r in rounds)
    lines = [line for line in lines if line not in rounds]  # one line per round, then the phases
    assert all(re.fullmatch(r"ablate: .+ done in \d+ s", line) for line in lines), lines
    phases = [re.sub(r" done in \d+ s$", "", line) for line in lines]
    assert phases[0].startswith("ablate: evaluation corpus ") and phases[1].startswith(
        "ablate: thread count ("
    )
    assert (
        "ablate: attribution estimate" in phases and "ablate: integrated estimate" in phases
    )  # --quick: both
    assert any(re.fullmatch(r"ablate: exact sweep \d+ heads", p) for p in phases)
    assert phases[-1].startswith("ablate: pruning ")
    assert "%|" not in result.stderr  # no progress bar
    collected = [line for line in result.stderr.splitlines() if line.startswith("collect: ")]
    assert len(collected) == 1 and re.fullmatch(
        r"collect: \d+ sequences in 1 shard\(s\) on local, \d+ threads?, .+ done in \d+ s",
        collected[0],
    ), collected

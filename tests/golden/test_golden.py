"""The default run's tables on two tiny models are the ones recorded in tests/golden/.

A refactor must not change what the toolkit measures. The comparison (compare.py) is exact for
keys, counts and labels, allows float32 rounding in floats (which differs between processes and
library versions), and lets heads whose effects tie within that rounding swap places in a pruning
curve. A change that means to alter the tables (a new features version, another default
ablation) regenerates the files with make_golden.py and says so. The library versions the golden
files were made with are in each folder's versions.json; a failure prints them beside today's.
"""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from compare import differences, read_table, report
from make_golden import HERE, TABLES, golden_run

from interp.pipeline.provenance import package_versions


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-bert"])
def test_default_run_tables_match_the_golden_files(name, tmp_path):
    run_dir = golden_run(name, tmp_path)
    golden = {table: read_table(HERE / name / f"{table}.csv") for table in TABLES}
    now = {
        table: read_table(_as_csv(pd.read_parquet(run_dir / f"{table}.parquet")))
        for table in TABLES
    }
    diff = differences(now, golden)
    if len(diff):
        recorded = HERE / name / "versions.json"
        versions = json.loads(recorded.read_text()) if recorded.exists() else {}
        pytest.fail(f"{name}: " + report(diff, versions, package_versions()), pytrace=False)


def _as_csv(frame: pd.DataFrame) -> io.StringIO:
    """The table written as the golden files are, so that both sides parse alike."""
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False)
    buffer.seek(0)
    return buffer

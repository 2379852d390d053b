"""The default run's tables on two tiny models are the ones recorded in tests/golden/.

A refactor must not change what the toolkit measures (up to float32 rounding, which differs
between processes by about 1e-7); a change that means to (a new features
version, another default ablation) regenerates the files with make_golden.py and says so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from make_golden import HERE, TABLES, golden_run


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-bert"])
def test_default_run_tables_match_the_golden_files(name, tmp_path):
    run_dir = golden_run(name, tmp_path)
    for table in TABLES:
        expected = pd.read_csv(HERE / name / f"{table}.csv", keep_default_na=False, na_values=[""])
        got = pd.read_csv(_roundtrip(pd.read_parquet(run_dir / f"{table}.parquet")), keep_default_na=False, na_values=[""])
        assert list(got.columns) == list(expected.columns), table
        assert len(got) == len(expected), table
        for column in expected.columns:
            a, b = got[column], expected[column]
            if a.dtype.kind in "fc" or b.dtype.kind in "fc":
                np.testing.assert_allclose(a.to_numpy(float), b.to_numpy(float), rtol=1e-5, atol=1e-6,
                                           equal_nan=True, err_msg=f"{name} {table}.{column}")
            else:
                assert a.astype(str).tolist() == b.astype(str).tolist(), f"{name} {table}.{column}"


def _roundtrip(frame: pd.DataFrame):
    """The table as the golden files hold it (csv), so that both sides parse alike."""
    import io

    buffer = io.StringIO()
    frame.to_csv(buffer, index=False)
    buffer.seek(0)
    return buffer

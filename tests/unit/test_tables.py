"""Table schemas are enforced when a table is written and when it is read."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from interp.errors import RunError
from interp.pipeline import rundir
from interp.pipeline.tables import PRUNING, ROLES_TABLE


def _pruning(**changes) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "fraction_removed": [0.0, 0.5],
            "heads_removed": [0, 2],
            "metric": ["loss_prose"] * 2,
            "value": [2.5, 2.7],
            "last_removed": [np.nan, "L0H1 L1H0"],
        }
    )
    return frame.assign(**changes)


def test_validate_casts_to_the_declared_dtypes_and_orders_columns():
    frame = _pruning(heads_removed=[0.0, 2.0], value=["2.5", "2.7"], extra=[1, 2])
    out = PRUNING.validate(frame[["extra", *frame.columns[:-1]]])
    assert list(out.columns) == [c.name for c in PRUNING.columns if not c.optional] + ["extra"]
    assert out["heads_removed"].dtype == np.int64 and out["heads_removed"].tolist() == [0, 2]
    assert out["value"].dtype == np.float64 and out["value"].tolist() == [2.5, 2.7]
    assert out["last_removed"].isna().tolist() == [True, False]


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"heads_removed": [0, np.nan]}, "heads_removed' must be int"),
        ({"heads_removed": [0, 1.5]}, "heads_removed' must be int"),
        ({"value": ["2.5", "much"]}, "value' must be float"),
    ],
)
def test_validate_refuses_values_of_another_type(changes, message):
    with pytest.raises(ValueError, match=message):
        PRUNING.validate(_pruning(**changes))


def test_validate_refuses_a_missing_column():
    with pytest.raises(ValueError, match="lacks columns"):
        PRUNING.validate(_pruning().drop(columns="metric"))


def test_sink_mass_may_be_absent_and_is_a_float_when_present():
    """A run from before features version 3 has no sink_mass; it is still read, and cast when there."""
    old = pd.DataFrame(
        {
            "layer": [0],
            "head": [1],
            "role": ["first_token"],
            "confidence": [0.9],
            "second_role": [np.nan],
            "stability": [1.0],
        }
    )
    assert "sink_mass" not in ROLES_TABLE.validate(old).columns
    new = ROLES_TABLE.validate(old.assign(sink_mass=["0.6"]))
    assert new["sink_mass"].dtype == np.float64 and new["sink_mass"].tolist() == [0.6]
    assert list(new.columns[:6]) == [
        "layer",
        "head",
        "role",
        "confidence",
        "second_role",
        "sink_mass",
    ]
    with pytest.raises(ValueError, match="'sink_mass' must be float"):
        ROLES_TABLE.validate(old.assign(sink_mass=["much"]))


def test_text_columns_hold_text_or_nan():
    out = PRUNING.validate(_pruning(metric=[1, 2]))
    assert out["metric"].tolist() == ["1", "2"]


def test_read_table_checks_the_schema(tmp_path):
    rundir.write_table(tmp_path, "pruning", _pruning())
    assert rundir.read_table(tmp_path, "pruning")["heads_removed"].dtype == np.int64
    _pruning().drop(columns="value").to_parquet(tmp_path / "pruning.parquet")
    with pytest.raises(RunError, match="pruning.parquet is unreadable or malformed"):
        rundir.read_table(tmp_path, "pruning")
    (tmp_path / "pruning.parquet").write_bytes(b"not parquet")
    with pytest.raises(RunError, match="pruning.parquet"):
        rundir.read_table(tmp_path, "pruning")
    assert rundir.read_table(tmp_path, "roles") is None

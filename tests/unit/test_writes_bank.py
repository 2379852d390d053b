"""The write classifier: its bank of synthetic OV circuits (scored by the weights stage's own code)
and the shipped model, on bank heads of an unseen seed and on hand-built weights tables."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from interp.classify.reference import REFERENCE_VERSION, WRITES_MODEL_FILE
from interp.classify.reference.fit import default_writer, fit_write_bank, reference_dir
from interp.classify.reference.writes_bank import build_write_bank
from interp.classify.writes import WRITE_COLUMNS, write_labels


@pytest.fixture(scope="module")
def bank():
    return build_write_bank(seed=7, n_models=2, per_role=2)


def test_bank_heads_are_scored_into_the_write_columns(bank):
    assert set(WRITE_COLUMNS) <= set(bank.columns) and bank[list(WRITE_COLUMNS)].notna().all().all()
    assert set(bank["label"]) == {"copying", "copy_suppression", "successor", "none"}
    assert bank["group"].nunique() == 2
    strong = bank[bank["template"] == "copying"]
    assert (strong["copy_rate"] > 0).mean() >= 0.75  # they copy beyond what random heads do
    constant = bank[bank["template"] == "constant"]
    # a rank-one writer's eigenvalue score is +-1, its own-token ranks are chance
    assert (constant[["copying", "copy_suppression"]].max(axis=1) > 0.5).all()
    assert (constant["copy_rate"] <= 0.05).all() and (constant["suppression_rate"] <= 0.05).all()


def test_the_shipped_writer_names_bank_heads_of_an_unseen_seed(bank):
    clf = default_writer()
    said = clf.predict(bank[list(WRITE_COLUMNS)])
    strong = bank["template"].isin(
        ["copying", "copy_suppression", "successor", "gaussian", "constant"]
    )
    assert (said[strong] == bank["label"][strong]).mean() >= 0.9
    meta = json.loads((reference_dir() / WRITES_MODEL_FILE).read_text())
    assert meta["version"] == REFERENCE_VERSION and meta["n_bank"] > 500
    assert meta["held_out"]["accuracy"] >= 0.95 and meta["held_out"]["ece"] <= 0.05


def test_fitting_keeps_a_vocabulary_in_one_fold(bank):
    clf = fit_write_bank(bank)
    assert list(clf.feature_names_in_) == list(WRITE_COLUMNS)
    assert set(clf.classes_) == set(bank["label"])


def table(rows: dict[tuple[int, int], dict[str, float]]) -> pd.DataFrame:
    null = {
        "copying": (-0.5, 0.5),
        "copy_rate": (0.004, 0.016),
        "suppression_rate": (0.004, 0.016),
        "successor": (0.04, 0.1),
        "output_size": (np.nan, np.nan),
    }
    return pd.DataFrame(
        [
            dict(
                layer=l,
                head=h,
                score=k,
                value=v,
                baseline=np.nan,
                null_low=null[k][0],
                null_high=null[k][1],
                ci_low=v,
                ci_high=v,
                n=100,
            )
            for (l, h), scores in rows.items()
            for k, v in scores.items()
        ]
    )


def test_write_labels_of_hand_built_heads():
    size = {"output_size": 0.2}
    rows = {
        (0, 0): dict(copying=1.0, copy_rate=1.0, suppression_rate=0.0, successor=0.0, **size),
        (0, 1): dict(copying=-1.0, copy_rate=0.0, suppression_rate=1.0, successor=0.0, **size),
        (0, 2): dict(copying=0.0, copy_rate=0.0, suppression_rate=0.0, successor=1.0, **size),
        (0, 3): dict(copying=1.0, copy_rate=0.01, suppression_rate=0.01, successor=0.05, **size),
        (1, 0): dict(
            copying=1.0, copy_rate=1.0, suppression_rate=0.0, successor=0.0, output_size=0.0
        ),
        (1, 1): dict(
            copying=np.nan, copy_rate=np.nan, suppression_rate=np.nan, successor=np.nan, **size
        ),
    }
    out = write_labels(default_writer(), table(rows))
    writes = out["writes"]
    assert writes.iloc[:3].tolist() == ["copying", "copy_suppression", "successor"]
    assert out["writes_confidence"].iloc[:3].min() > 0.9
    assert pd.isna(writes.iloc[3])  # eigenvalue score +1 with chance ranks: a rank-one writer
    assert writes.iloc[4] == "inactive"  # copies, but writes nothing
    assert pd.isna(out["writes"].iloc[5]) and pd.isna(out["writes_confidence"].iloc[5])
    assert out["writes_unmeasured"].iloc[5] == "copying copy_rate suppression_rate successor"
    assert out["output_size"].iloc[4] == 0.0 and out["writes_confidence"].iloc[4] == 1.0

"""Write roles, task roles and how they combine with where a head looks: exact answers on
hand-built tables (interp.classify.writes, .tasks, .combine)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from interp.classify.combine import combine
from interp.classify.tasks import looked_at, task_roles
from interp.classify.writes import inactive, write_frames

NULL = {"copying": (-0.1, 0.0, 0.1), "copy_rate": (0.0, 0.005, 0.02)}


def weights_table(rows: dict[tuple[int, int], dict[str, float]]) -> pd.DataFrame:
    """A weights table: per head, score -> value; nulls as NULL (suppression_rate like
    copy_rate, successor (0, 0.1, 0.3)), bootstrap interval value +- 0.01."""
    null = {**NULL, "suppression_rate": NULL["copy_rate"], "successor": (0.0, 0.1, 0.3)}
    out = []
    for (layer, head), scores in rows.items():
        for score, value in scores.items():
            low, base, high = null.get(score, (np.nan, np.nan, np.nan))
            out.append(
                dict(
                    layer=layer,
                    head=head,
                    score=score,
                    value=value,
                    baseline=base,
                    null_low=low,
                    null_high=high,
                    ci_low=value - 0.01,
                    ci_high=value + 0.01,
                    n=100,
                )
            )
    return pd.DataFrame(out)


def test_write_matrix_reads_each_score_as_its_excess_over_the_null():
    table = weights_table(
        {
            (0, 0): dict(copying=1.0, copy_rate=1.0, suppression_rate=0.0, successor=0.3),
            (0, 1): dict(copying=-0.55, copy_rate=0.02, suppression_rate=0.51, output_size=0.4),
        }
    )
    matrix, sizes = write_frames(table)
    assert matrix.loc[(0, 0)].to_dict() == pytest.approx(
        dict(
            copying=1.0,
            copy_suppression=-1.0,
            copy_rate=1.0,
            suppression_rate=-0.02 / 0.98,
            successor=0.0,
        )
    )
    assert matrix.loc[(0, 1), "copy_suppression"] == pytest.approx(0.5)  # (-0.1 + 0.55) / 0.9
    assert matrix.loc[(0, 1), "suppression_rate"] == pytest.approx(0.5)
    assert np.isnan(matrix.loc[(0, 1), "successor"])
    assert sizes.loc[(0, 1), "output_size"] == 0.4
    assert sizes.loc[(0, 0), "writes_unmeasured"] == "output_size"
    assert sizes.loc[(0, 1), "writes_unmeasured"] == "successor"


def test_inactive_is_a_tiny_output_beside_the_median_head_to_the_top_of_its_interval():
    sizes = pd.DataFrame(
        {
            "output_size": [0.0, 0.0005, 0.0005, 0.3, np.nan],
            "output_high": [0.0, 0.0009, 0.002, 0.4, np.nan],
            "output_typical": 0.1,
        }
    )
    assert inactive(sizes).tolist() == [True, True, False, False, False]
    # without the table's median, the median of the sizes given: 0.0005 here
    assert inactive(sizes.assign(output_typical=np.nan)).tolist() == [
        True,
        False,
        False,
        False,
        False,
    ]


# --- task roles -----------------------------------------------------------------------------------


def attention_rows(weights: dict[tuple[int, int, str], float], n_heads: int = 4) -> pd.DataFrame:
    """task_attention of task "t" from the scored query END to IO, S1, S2 (baseline 0.1);
    unlisted heads put 0.1 everywhere; intervals +- 0.05."""
    rows = []
    for layer in range(2):
        for head in range(n_heads):
            for key in ("IO", "S1", "S2"):
                a = weights.get((layer, head, key), 0.1)
                rows.append(
                    dict(
                        task="t",
                        layer=layer,
                        head=head,
                        query="END",
                        key=key,
                        attention=a,
                        ci_low=a - 0.05,
                        ci_high=a + 0.05,
                        n=20,
                        baseline=0.1,
                        scored=1,
                    )
                )
    return pd.DataFrame(rows)


def effect_rows(deltas: dict[tuple[int, int], tuple[float, float, float]]) -> pd.DataFrame:
    rows = [
        dict(
            layer=l,
            head=h,
            ablation="mean",
            metric="t",
            delta=d,
            ci_low=lo,
            ci_high=hi,
            estimator="exact",
        )
        for (l, h), (d, lo, hi) in deltas.items()
    ]
    return pd.DataFrame(rows)


def test_a_head_attends_to_the_named_key_it_lifts_most():
    table = attention_rows(
        {(1, 0): 0.7, (1, 1): 0.2, (1, 2): 0.25}
    )  # keys default IO? no: see below
    table.loc[
        (table["layer"] == 1) & (table["head"] == 0) & (table["key"] == "IO"),
        ["attention", "ci_low"],
    ] = [0.7, 0.6]
    seen = looked_at(table).set_index(["layer", "head"])
    assert seen.loc[(1, 0), "key"] == "IO" and seen.loc[(1, 0), "attention"] == 0.7
    assert (0, 0) not in seen.index  # uniform: no lift
    # lift (0.25 - 0.1) / 0.9 < 0.2: not attending; 0.3 lifts 0.22
    table.loc[
        (table["layer"] == 0) & (table["head"] == 1) & (table["key"] == "S2"),
        ["attention", "ci_low"],
    ] = [0.3, 0.2]
    table.loc[
        (table["layer"] == 0) & (table["head"] == 2) & (table["key"] == "S2"),
        ["attention", "ci_low"],
    ] = [0.25, 0.15]
    seen = looked_at(table).set_index(["layer", "head"])
    assert seen.loc[(0, 1), "key"] == "S2" and (0, 2) not in seen.index
    assert looked_at(table.drop(columns="scored")).empty  # an older table: nothing to read


CIRCUIT_ATTENTION = {
    (0, 0, "S2"): 0.9,  # inhibitor
    (1, 0, "IO"): 0.8,  # mover
    (1, 1, "IO"): 0.8,  # negative mover
    (1, 2, "S2"): 0.9,  # copies S: works against the task, no task role
    (1, 3, "IO"): 0.8,  # looks at IO, writes nothing of tokens
}
CIRCUIT_EFFECTS = {
    (0, 0): (2.0, 1.5, 2.5),
    (0, 1): (0.0, -0.1, 0.1),
    (1, 0): (3.0, 2.0, 4.0),
    (1, 1): (-1.0, -1.5, -0.5),
    (1, 2): (-1.0, -1.5, -0.5),
    (1, 3): (0.5, 0.2, 0.8),
}
CIRCUIT_WRITES = pd.Series(
    {
        (0, 0): np.nan,
        (1, 0): "copying",
        (1, 1): "copy_suppression",
        (1, 2): "copying",
        (1, 3): np.nan,
    }
)


def composition_rows(pairs: dict[tuple[int, int, int, int], float]) -> pd.DataFrame:
    """q-composition (reader layer, head, writer layer, head) -> value; null_high 0.2."""
    rows = [
        dict(
            kind="q",
            layer=l,
            head=h,
            writer_layer=wl,
            writer_head=wh,
            value=v,
            baseline=0.1,
            null_low=0.05,
            null_high=0.2,
            rank=1,
        )
        for (l, h, wl, wh), v in pairs.items()
    ]
    return pd.DataFrame(rows)


def test_task_roles_of_a_hand_built_circuit():
    comp = composition_rows({(1, 0, 0, 0): 0.5, (1, 1, 0, 0): 0.6, (1, 0, 0, 1): 0.1})
    found = task_roles(
        attention_rows(CIRCUIT_ATTENTION),
        effect_rows(CIRCUIT_EFFECTS),
        CIRCUIT_WRITES,
        comp,
    ).set_index(["layer", "head"])
    assert found["task_role"].to_dict() == {
        (0, 0): "inhibitor",
        (1, 0): "mover",
        (1, 1): "negative_mover",
    }
    assert found.loc[(0, 0), "partner"] == "L1H1"  # composes into the negative mover most
    assert found.loc[(1, 0), "key"] == "IO" and found.loc[(1, 0), "effect"] == 3.0
    # without composition above the null there is no inhibitor; without effects no role
    weak = composition_rows({(1, 0, 0, 0): 0.15})
    found = task_roles(
        attention_rows(CIRCUIT_ATTENTION), effect_rows(CIRCUIT_EFFECTS), CIRCUIT_WRITES, weak
    )
    assert "inhibitor" not in set(found["task_role"])
    assert task_roles(attention_rows(CIRCUIT_ATTENTION), None, CIRCUIT_WRITES, comp).empty


def test_a_mover_needs_a_positive_exact_effect():
    effects = dict(CIRCUIT_EFFECTS)
    effects[(1, 0)] = (0.3, -0.1, 0.7)  # not resolved
    found = task_roles(
        attention_rows(CIRCUIT_ATTENTION), effect_rows(effects), CIRCUIT_WRITES, None
    )
    assert "mover" not in set(found["task_role"])
    estimated = effect_rows(CIRCUIT_EFFECTS).assign(estimator="attribution")
    assert task_roles(attention_rows(CIRCUIT_ATTENTION), estimated, CIRCUIT_WRITES, None).empty


# --- combining ------------------------------------------------------------------------------------


def roles_rows(looks: dict[tuple[int, int], tuple[str, float, object]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            dict(layer=l, head=h, role=r, confidence=c, second_role=s)
            for (l, h), (r, c, s) in looks.items()
        ]
    )


def test_primary_and_second_roles_combine_as_documented():
    looks = roles_rows(
        {
            (0, 0): ("previous_token", 0.9, "first_token"),  # looks at q-1 and copies
            (0, 1): ("unexplained", 0.6, "first_token"),  # attention says nothing; suppresses
            (0, 2): ("broad", 0.8, np.nan),  # averages and copies
            (0, 3): ("broad", 0.9, np.nan),  # attends uniformly and writes nothing
            (1, 0): ("first_token", 1.0, np.nan),  # a sink whose circuit copies
            (1, 1): ("induction", 0.95, np.nan),  # and a mover on the task
            (1, 2): ("unexplained", 0.7, np.nan),  # nothing anywhere
            (1, 3): ("broad", 0.7, np.nan),
        }
    )
    writes = pd.DataFrame(
        {
            "writes": [
                "copying",
                "copy_suppression",
                "copying",
                "inactive",
                "copying",
                "copying",
                np.nan,
                np.nan,
            ],
            "writes_confidence": [0.97, 0.9, 0.8, 1.0, 0.99, 0.96, 0.7, 0.6],
            "output_size": [0.3, 0.2, 0.3, 0.0, 0.1, 0.5, 0.2, 0.2],
        },
        index=pd.MultiIndex.from_tuples(
            [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3)],
            names=["layer", "head"],
        ),
    )
    tasks = pd.DataFrame(
        [
            dict(
                task="t",
                layer=1,
                head=1,
                task_role="mover",
                key="IO",
                attention=0.8,
                effect=2.0,
                effect_low=1.0,
                effect_high=3.0,
                partner=np.nan,
            )
        ]
    )
    out = combine(looks, writes, tasks).set_index(["layer", "head"])
    expect = {
        (0, 0): ("previous_token", 0.9, "copying", "attention"),
        (0, 1): ("copy_suppression", 0.9, "first_token", "weights"),
        (0, 2): ("copying", 0.8, "broad", "weights"),
        (0, 3): ("inactive", 1.0, "broad", "output"),
        (1, 0): ("first_token", 1.0, "copying", "attention"),
        (1, 1): ("mover", 0.96, "induction", "task"),
        (1, 3): ("broad", 0.7, np.nan, "attention"),
    }
    for head, (role, conf, second, evidence) in expect.items():
        row = out.loc[head]
        assert (row["role"], row["confidence"], row["evidence"]) == (role, conf, evidence), head
        assert row["second_role"] == second or (pd.isna(second) and pd.isna(row["second_role"])), (
            head
        )
    assert out.loc[(1, 2), "role"] == "unexplained" and pd.isna(out.loc[(1, 2), "evidence"])
    assert out.loc[(1, 1), "looks"] == "induction" and out.loc[(1, 1), "task"] == "t"
    assert out["output_size"].tolist() == writes["output_size"].tolist()
    # without weights or tasks, the roles are where the heads look
    alone = combine(looks, None, None)
    assert alone["role"].tolist() == looks["role"].tolist() and alone["writes"].isna().all()

"""The planted indirect-object circuit: its heads do on the task what the plan says, measured by the
ablate stage's own tables (effects, task_attention), so the task roles have ground truth."""

from __future__ import annotations

import pytest

from interp import AblateConfig
from interp.ablate.stage import ablate
from interp.synthetic.circuit import PLAN, TASK_ROLES, planted_circuit


@pytest.fixture(scope="module")
def measured():
    circuit = planted_circuit(n_prompts=40)
    config = AblateConfig(
        tasks=(circuit.task,), metrics=("ioi",), n_bootstrap=50, threads=1, prune=False
    )
    return circuit, ablate(circuit.model, config, progress=False)


def test_the_task_names_its_positions_and_the_model_solves_it(measured):
    circuit, result = measured
    task = circuit.task
    assert len(task.sequences) == 40 and task.position_names == ("IO", "S1", "S2", "END")
    ids = circuit.model.tokenizer.convert_ids_to_tokens
    first = task.sequences[0]
    names = task.named_positions[0]
    assert ids(first[names["IO"]]) == ids(first[-1]) != ids(first[names["S2"]])
    assert first[names["S1"]] == first[names["S2"]]
    exact = result.effects.query("estimator == 'exact' and metric == 'ioi'")
    assert (exact["baseline"] < 0).all()  # IO wins over S


def test_task_attention_and_effects_are_the_planted_ones(measured):
    _, result = measured
    end = result.task_attention.query("query == 'END'").pivot_table(
        index=["layer", "head"], columns="key", values="attention"
    )
    assert end.loc[(0, 0), "S2"] == pytest.approx(1.0)  # the inhibitor marks S
    for mover in [(1, 0), (1, 1)]:
        assert end.loc[mover, "IO"] == pytest.approx(1.0, abs=1e-6)
    assert end.loc[(1, 2), "S2"] == pytest.approx(1.0)  # the S copier
    delta = result.effects.query(
        "estimator == 'exact' and metric == 'ioi' and ablation == 'mean'"
    ).set_index(["layer", "head"])["delta"]
    assert delta[(0, 0)] > 1 and delta[(1, 0)] > 1  # removing the inhibitor or the mover hurts
    assert delta[(1, 1)] < -1 and delta[(1, 2)] < -1  # removing what works against IO helps
    for inactive in [(0, 2), (0, 3), (1, 3)]:
        assert delta[inactive] == pytest.approx(0.0, abs=1e-9)
    assert set(TASK_ROLES) <= set(PLAN)


def test_task_attention_marks_the_scored_query_and_the_uniform_share(measured):
    circuit, result = measured
    table = result.task_attention
    assert set(table.loc[table["scored"] == 1, "query"]) == {"END"}  # positions = (END,)
    end = table[table["query"] == "END"]
    assert end["baseline"].to_numpy() == pytest.approx(1 / 7)  # END is token 6 of every prompt
    s2_io = table[(table["query"] == "S2") & (table["key"] == "IO")]
    assert s2_io["baseline"].to_numpy() == pytest.approx(1 / 6)
    unplanned = end[(end["layer"] == 1) & (end["head"] == 3)]
    assert unplanned["attention"].to_numpy() == pytest.approx(unplanned["baseline"].to_numpy())


def test_the_roles_of_the_planted_circuit_come_from_all_the_evidence(measured):
    from interp import CollectConfig
    from interp.classify.evidence import Evidence
    from interp.classify.stage import classify
    from interp.collect.stage import collect
    from interp.weights.config import WeightsConfig
    from interp.weights.stage import weights

    circuit, result = measured
    found = collect(
        circuit.model,
        CollectConfig(suites=("prose", "repeated"), n_repeated=8, max_sentences=30, n_bootstrap=10),
        progress=False,
    )
    ev = weights(
        circuit.model,
        WeightsConfig(n_tokens=128, n_null=20, n_bootstrap=10, n_prose=4, n_repeated=4),
        progress=False,
    )
    evidence = Evidence(ev.weights, ev.composition, result.effects, result.task_attention)
    roles = classify(found.features, evidence=evidence).roles.set_index(["layer", "head"])
    assert roles["task_role"].dropna().to_dict() == TASK_ROLES
    assert (roles.loc[list(TASK_ROLES), "evidence"] == "task").all()
    assert roles.loc[(0, 0), "task_key"] == "S2" and roles.loc[(0, 0), "task_partner"] in (
        "L1H0",
        "L1H1",
    )
    assert roles.loc[(1, 0), "task_key"] == "IO" and roles.loc[(1, 0), "writes"] == "copying"
    assert roles.loc[(1, 1), "writes"] == "copy_suppression"
    # the S copier copies and looks at S2 but works against the task: previous_token, copying
    assert (roles.loc[(1, 2), "role"], roles.loc[(1, 2), "second_role"]) == (
        "previous_token",
        "copying",
    )
    inactive = roles.index[roles["role"] == "inactive"].tolist()
    assert (
        inactive == [(0, 2), (0, 3), (1, 3)] and roles.loc[(0, 2), "second_role"] == "current_token"
    )

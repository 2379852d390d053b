"""The ablate stage end to end on tiny models: tables, pruning curve, top-k, run directory, roles."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd
import pytest
import torch
from tiny_models import N_HEADS, N_LAYERS, tiny_native

from interp.ablate.catalogue import CAUSAL_METRICS
from interp.ablate.config import CPU_TOKENS_PER_PASS, DEFAULT_BUDGET, DEFAULT_ROUNDS
from interp.ablate.pruning import step_sizes
from interp.ablate.removable import removable_fraction
from interp.ablate.stage import AblateConfig, ablate, role_effects, surprises
from interp.ablate.tasks import Task
from interp.errors import ConfigError, RunError
from interp.pipeline import rundir
from interp.pipeline.execute import rerun_stage
from interp.pipeline.results import load_run
from interp.pipeline.stages import stage
from interp.pipeline.tables import EFFECTS, PRUNING

N = N_LAYERS * N_HEADS
SMALL = AblateConfig(
    ablations=("zero", "mean"),
    n_prose=6,
    n_repeated=4,
    repeated_lengths=(6,),
    n_syntax=10,
    n_bootstrap=100,
    threads=1,
    time_budget=1e9,  # the same rounds in every run, however busy the machine (the default is 300 s)
)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def result(llama):
    return ablate(llama, SMALL, progress=False)


# --- effects -----------------------------------------------------------------------------------


def test_effects_schema_and_coverage(result):
    e = result.effects
    assert list(e.columns[: len(EFFECTS.names)]) == EFFECTS.names
    assert set(e["estimator"]) == {"exact", "attribution"}
    estimated = {"loss_prose", "loss_repeated", "sv_logit_diff"}  # the metrics with a gradient
    assert set(e["metric"]) == estimated | {"kl_prose", "sv_prob"}
    assert set(e.loc[e["estimator"] == "attribution", "metric"]) == estimated
    assert len(e[e["estimator"] == "exact"]) == N * 2 * 5
    assert len(e[e["estimator"] == "attribution"]) == N * 2 * 3
    assert not e[["baseline", "ablated", "delta", "ci_low", "ci_high"]].isna().any().any()
    assert (e["ci_low"] <= e["ci_high"]).all()


def test_delta_is_oriented_so_positive_is_worse(result):
    e = result.effects
    loss = e[~e["metric"].isin(["sv_logit_diff", "sv_prob"])]
    sv = e[e["metric"].isin(["sv_logit_diff", "sv_prob"])]
    np.testing.assert_allclose(loss["delta"], loss["ablated"] - loss["baseline"], atol=1e-9)
    np.testing.assert_allclose(sv["delta"], sv["baseline"] - sv["ablated"], atol=1e-9)
    nonzero = e[e["baseline"] != 0]  # the KL metrics are 0 at the intact model
    np.testing.assert_allclose(
        nonzero["delta_rel"], nonzero["delta"] / nonzero["baseline"].abs(), atol=1e-9
    )
    assert e.groupby(["metric", "estimator"])["baseline"].nunique().eq(1).all()


def test_heads_per_pass_changes_speed_not_results(llama, result):
    stacked = ablate(
        llama,
        dataclasses.replace(SMALL, heads_per_pass=1, attribution=False, prune=False),
        progress=False,
    )
    a = result.effects[result.effects["estimator"] == "exact"].reset_index(drop=True)
    b = stacked.effects.reset_index(drop=True)
    np.testing.assert_allclose(a["delta"], b["delta"], atol=1e-5)


def test_exact_rows_carry_the_estimate(result):
    e = result.effects
    exact = e[e["estimator"] == "exact"]
    assert (exact["selected"] == "all").all() and e.loc[
        e["estimator"] != "exact", "selected"
    ].isna().all()
    merged = exact.merge(
        e[e["estimator"] == "attribution"], on=["layer", "head", "ablation", "metric"]
    )
    np.testing.assert_array_equal(merged["estimate_x"], merged["delta_y"])
    assert set(result.summary["audit"]) == {
        f"{k}/{m}"
        for k in ("zero", "mean")
        for m in ("loss_prose", "loss_repeated", "sv_logit_diff")
    }


@pytest.mark.parametrize("estimator", ["integrated", "attribution", "atp_star"])
def test_top_k_runs_exact_ablation_on_the_top_heads_and_an_audit_sample(llama, estimator):
    out = ablate(
        llama,
        dataclasses.replace(
            SMALL, ablations=("zero",), top_k=1, audit=2, prune=False, estimator=estimator
        ),
        progress=False,
    )
    exact = out.effects[out.effects["estimator"] == "exact"]
    estimated = out.effects[out.effects["estimator"] != "exact"]
    # top_k ranks by the second opinions and the stage's own estimator
    assert set(estimated["estimator"]) == {"attribution", "integrated", estimator}
    # the top 1 of every (estimator, metric): their union
    best = {
        (
            int(g.loc[g["delta"].abs().idxmax(), "layer"]),
            int(g.loc[g["delta"].abs().idxmax(), "head"]),
        )
        for _, g in estimated.groupby(["estimator", "metric"])
    }
    assert (
        set(
            exact.loc[exact["selected"] == "top_k", ["layer", "head"]].itertuples(
                index=False, name=None
            )
        )
        == best
    )
    chosen = exact.drop_duplicates(["layer", "head"])["selected"].value_counts().to_dict()
    assert chosen == {"top_k": len(best), "audit": 2}
    assert len(estimated.groupby(["layer", "head"])) == N
    assert out.summary["exact_heads"] == len(best) + 2 and out.summary["estimator"] == estimator
    assert len(out.summary["never_exact"]) == N - len(best) - 2
    audit = out.summary["audit"]["zero/loss_prose"]
    assert audit["n_audit"] == 2 and audit["max_abs_error"] >= audit["mean_abs_error"] >= 0
    own = estimated[estimated["estimator"] == estimator]
    merged = exact.merge(own, on=["layer", "head", "ablation", "metric"])
    np.testing.assert_array_equal(
        merged["estimate_x"], merged["delta_y"]
    )  # the estimate column is the chosen one's


def test_atp_star_batches_never_mix_tiers(llama):
    """The QK tier's batches come first and hold only its sequences: what it finds is carried to
    the sequences after it (interp.ablate.atp_star)."""
    from interp.ablate.corpora import in_tiers, stage_corpus

    corpus = stage_corpus(llama, SMALL, CAUSAL_METRICS)
    bounds = [{f: 1 for f in corpus.sizes}, {f: 3 for f in corpus.sizes}]
    tiered = in_tiers(corpus, bounds, CPU_TOKENS_PER_PASS, 0)
    tiers = [
        max(0 if int(i) < 1 else 1 if int(i) < 3 else 2 for i in b.index) for b in tiered.batches
    ]
    assert tiers == sorted(tiers)
    for batch, tier in zip(tiered.batches, tiers):
        low = {0: 0, 1: 1, 2: 3}[tier]
        assert all(low <= int(i) for i in batch.index)
    assert sorted((b.eval_set, int(i)) for b in tiered.batches for i in b.index) == sorted(
        (b.eval_set, int(i)) for b in corpus.batches for i in b.index
    )


def test_metrics_can_be_restricted(llama):
    out = ablate(
        llama,
        dataclasses.replace(SMALL, metrics=("sv_logit_diff",), attribution=False, prune=False),
        progress=False,
    )
    assert set(out.effects["metric"]) == {"sv_logit_diff"}
    assert set(out.summary["corpus"]) == {"sv_logit_diff"}
    with pytest.raises(ValueError, match="do not apply"):
        ablate(llama, dataclasses.replace(SMALL, metrics=("embedding_cosine",)), progress=False)


def test_encoder_stage(bert):
    out = ablate(bert, dataclasses.replace(SMALL, ablations=("zero", "resample")), progress=False)
    e = out.effects
    assert set(e["metric"]) == {"embedding_cosine", "retrieval_margin"}
    estimated = e[e["estimator"] == "attribution"]
    assert set(estimated["metric"]) == {"retrieval_margin"}  # no gradient at the intact model
    cosine = e[e["metric"] == "embedding_cosine"]
    assert (cosine["baseline"] == 0).all() and cosine["delta_rel"].isna().all()
    assert (cosine["delta"] >= 0).all()
    assert set(out.pruning["metric"]) == {"embedding_cosine", "retrieval_margin"}


def test_top_k_without_an_estimable_metric_ablates_every_head(bert):
    config = dataclasses.replace(
        SMALL, ablations=("zero",), metrics=("embedding_cosine",), top_k=2, prune=False
    )
    with pytest.warns(UserWarning, match="top_k"):
        out = ablate(bert, config, progress=False)
    assert out.summary["exact_heads"] == N


def test_a_model_with_one_output_logit_is_one_line_naming_the_metric():
    model = tiny_native(d_vocab_out=1)
    with pytest.warns(UserWarning, match="outside the model's 1 output logits"):
        with pytest.raises(
            ConfigError, match=r"^metric loss_prose has no position to score: .* 1 output logit"
        ) as err:
            ablate(model, dataclasses.replace(SMALL, n_syntax=0, max_rounds=3), progress=False)
    assert "\n" not in str(err.value)
    with pytest.raises(
        ConfigError, match="^no evaluation sequence for sv_logit_diff fits this model and tokenizer"
    ):
        ablate(
            model, dataclasses.replace(SMALL, metrics=("sv_logit_diff",)), progress=False
        )  # no sentence is left


def test_a_metric_with_no_scorable_position_is_one_line_naming_it(llama):
    task = Task("nothing", ("the man said", "a boat went"), positions=((), ()))
    with pytest.raises(
        ConfigError,
        match=r"^metric nothing has no position to score: none of its 1 evaluation "
        r"sequence\(s\) gives it a position",
    ):
        ablate(
            llama, dataclasses.replace(SMALL, tasks=(task,), metrics=("nothing",)), progress=False
        )


def test_without_progress_bars_each_finished_phase_prints_one_line(llama, capsys):
    out = ablate(
        llama,
        dataclasses.replace(SMALL, ablations=("zero",), top_k=1, prune_step=0.5),
        progress=False,
    )
    # besides the line per round of the exact sweep (tests/unit/test_precise.py)
    lines = [
        line
        for line in capsys.readouterr().err.splitlines()
        if not line.startswith("ablate: round ")
    ]
    assert all(
        re.fullmatch(r"ablate: .+ done in \d+ s", line)
        for line in lines
        if line.startswith("ablate: ")
    )
    phases = [re.sub(r" done in \d+ s$", "", line) for line in lines if line.startswith("ablate: ")]
    assert phases[0] == f"ablate: evaluation corpus {out.summary['n_tokens']} tokens"
    assert phases[1] == "ablate: thread count (1 thread, --threads)"  # SMALL pins one thread
    assert phases[2:] == [
        "ablate: attribution estimate",
        "ablate: integrated estimate",
        f"ablate: exact sweep {out.summary['exact_heads']} heads",
        "ablate: pruning 5 metric(s)",
    ]
    ablate(
        llama,
        dataclasses.replace(SMALL, ablations=("zero",), attribution=False, prune=False),
        progress=True,
    )
    assert not [
        line
        for line in capsys.readouterr().err.splitlines()
        if line.startswith("ablate: ") and "done" in line
    ]


def test_bf16_runs_on_a_copy(llama):
    out = ablate(
        llama,
        dataclasses.replace(
            SMALL,
            ablations=("zero",),
            dtype="bfloat16",
            attribution=False,
            prune=False,
            n_syntax=0,
            n_repeated=0,
        ),
        progress=False,
    )
    assert len(out.effects) == N * 2  # loss_prose and kl_prose
    assert next(llama.bridge.parameters()).dtype == torch.float32


# --- pruning -----------------------------------------------------------------------------------


def test_pruning_curve_steps_one_head_at_a_time(result, llama):
    p = result.pruning
    assert list(p.columns) == PRUNING.names
    for metric, curve in p.groupby("metric"):
        curve = curve.sort_values("heads_removed")
        assert curve["heads_removed"].tolist() == list(range(N + 1))
        assert np.all(np.diff(curve["fraction_removed"]) > 0)
        assert curve["fraction_removed"].iloc[-1] == 1.0
        assert pd.isna(curve["last_removed"].iloc[0])
        removed = curve["last_removed"].iloc[1:].tolist()
        assert all(re.fullmatch(r"L\d+H\d+", r) for r in removed)
        assert len(set(removed)) == N
        assert curve["value"].iloc[0] == pytest.approx(held_out_value(llama, metric, []), rel=1e-5)


@pytest.mark.parametrize("kind", ["zero", "mean", "resample"])
def test_stacked_pruning_steps_equal_one_step_per_pass(llama, kind):
    from interp.ablate.estimate import head_means
    from interp.ablate.evaluation import build_corpus
    from interp.ablate.forward import Ablator
    from interp.ablate.pruning import Removals

    corpus = build_corpus(
        llama, n_prose=4, n_repeated=2, repeated_lengths=(6,), n_syntax=4, seed=0, max_tokens=512
    )
    ablator = Ablator(llama)
    order = [(2, 1), (0, 3), (1, 0), (2, 2), (0, 0), (1, 3)]
    means = head_means(ablator, corpus)
    values = []
    for max_tokens in (None, 1):
        removals = Removals(ablator, corpus, "loss_prose", kind, means, max_tokens)
        removals.measure({k: order[:k] for k in range(len(order) + 1)})
        values.append(removals.values(removals.counts()))
    np.testing.assert_allclose(values[0], values[1], rtol=1e-5)
    assert len(np.unique(values[0])) > 3  # the steps really differ


@pytest.mark.parametrize("metric", ["loss_prose", "loss_repeated", "sv_logit_diff"])
def test_each_metric_removes_its_own_least_important_head_first(result, llama, metric):
    e = result.effects
    exact = e[(e["estimator"] == "exact") & (e["metric"] == metric) & (e["ablation"] == "zero")]
    first = exact.sort_values(["delta", "layer", "head"]).iloc[0]
    p = result.pruning[result.pruning["metric"] == metric]
    step = p[p["heads_removed"] == 1]
    assert step["last_removed"].item() == f"L{first['layer']}H{first['head']}"
    head = (int(first["layer"]), int(first["head"]))
    assert step["value"].item() == pytest.approx(held_out_value(llama, metric, [head]), rel=1e-5)
    # not the corpus the order came from: 1e-4 apart is ten times the equality above (a head that
    # read every round of the sweep's corpus comes near the held-out value, 8e-4 apart here)
    assert step["value"].item() != pytest.approx(first["ablated"], rel=1e-4)
    assert (p["ci_low"] <= p["value"] + 1e-12).all() and (p["value"] <= p["ci_high"] + 1e-12).all()
    shares = result.summary["removable"][metric]
    for tol in ("1%", "5%"):
        assert 0 <= shares[tol]["ci_low"] <= shares[tol]["ci_high"] <= 1
        assert shares[tol]["share"] == removable_fraction(
            result.pruning, metric, float(tol[:-1]) / 100
        )


def test_role_curves_remove_every_head_of_a_role(llama):
    roles = pd.DataFrame(
        {
            "layer": [l for l in range(N_LAYERS) for _ in range(N_HEADS)],
            "head": [h for _ in range(N_LAYERS) for h in range(N_HEADS)],
        }
    )
    roles["role"] = np.where(roles["head"] == 0, "first_token", "unexplained")
    out = ablate(
        llama,
        dataclasses.replace(SMALL, ablations=("zero",), prune_step=0.5),
        progress=False,
        roles=roles,
    )
    rows = out.pruning[out.pruning["removed_by"] == "role:first_token"]
    assert set(rows["metric"]) == set(CAUSAL_METRICS)
    assert (rows["heads_removed"] == N_LAYERS).all()
    heads = [(layer, 0) for layer in range(N_LAYERS)]
    prose = rows[rows["metric"] == "loss_prose"]
    assert prose["value"].item() == pytest.approx(
        held_out_value(llama, "loss_prose", heads), rel=1e-5
    )
    assert (out.pruning["removed_by"] == "role:unexplained").sum() == len(CAUSAL_METRICS)


def held_out_value(model, metric, heads):
    """``metric`` on the held-out split of SMALL's corpus with ``heads`` zero-ablated: the oracle
    for the pruning curve, from the ablator and the metric alone."""
    from interp.ablate.evaluation import build_corpus
    from interp.ablate.forward import Ablator, Edit
    from interp.ablate.metrics import batch_metrics

    corpus = build_corpus(
        model,
        SMALL.n_prose,
        SMALL.n_repeated,
        SMALL.repeated_lengths,
        SMALL.n_syntax,
        SMALL.seed,
        CPU_TOKENS_PER_PASS,
        split=1,
    )
    ablator, num, den = Ablator(model), 0.0, 0.0
    for batch in corpus.batches:
        out = ablator.run(batch, [Edit(layer, head, torch.zeros(())) for layer, head in heads])
        per = batch_metrics(out, batch).get(metric)
        if per is not None:
            num, den = num + float(per.num.sum()), den + float(per.den.sum())
    return num / den


def test_the_two_corpus_splits_share_no_sequence(llama):
    from interp.ablate.evaluation import build_corpus

    a, b = (build_corpus(llama, 6, 4, (6,), 10, 0, 512, split=s) for s in (0, 1))
    assert a.sizes == b.sizes
    seqs = lambda c: {tuple(it.tokens.tolist()) for it in c.items}  # noqa: E731
    assert not seqs(a) & seqs(b)
    with pytest.raises(ValueError, match="split"):
        build_corpus(llama, 6, 4, (6,), 10, 0, 512, split=2)


def test_stacked_heads_stay_within_the_token_budget():
    from interp.ablate.sweep import pass_size

    batch = type("B", (), {"tokens": torch.zeros(4, 10)})()  # 40 padded tokens
    assert pass_size(batch, None, 2048) == 51
    assert pass_size(batch, 3, 2048) == 3
    assert pass_size(batch, None, 30) == 1  # one copy even when the batch alone is over budget


def test_step_sizes():
    assert step_sizes(12, None) == list(range(1, 13))
    assert step_sizes(270, None) == list(range(14, 270, 14)) + [270]
    assert step_sizes(10, 0.25) == [3, 6, 9, 10]


def test_removable_fraction():
    curve = pd.DataFrame(
        {
            "fraction_removed": [0, 0.25, 0.5, 0.75, 1.0],
            "heads_removed": [0, 1, 2, 3, 4],
            "metric": "loss_prose",
            "value": [2.0, 2.01, 2.03, 2.2, 5.0],
        }
    )
    assert removable_fraction(curve, "loss_prose", 0.01) == 0.25  # +0.5%, then +1.5%
    assert removable_fraction(curve, "loss_prose", 0.05) == 0.5
    sv = curve.assign(metric="sv_logit_diff", value=[2.0, 1.99, 1.5, 1.0, 0.0])
    assert removable_fraction(sv, "sv_logit_diff", 0.01) == 0.25  # a falling logit diff is worse
    better = curve.assign(value=[2.0, 1.99, 1.9, 2.0, 2.0])
    assert (
        removable_fraction(better, "loss_prose", 0.01) == 0.25
    )  # 5% better is not within 1% either


# --- config and run directory -----------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        dict(ablations=()),
        dict(ablations=("zero", "zero")),
        dict(ablations=("noise",)),
        dict(metrics=("accuracy",)),
        dict(n_prose=-1),
        dict(repeated_lengths=(1,)),
        dict(dtype="int8"),
        dict(top_k=0),
        dict(heads_per_pass=0),
        dict(prune_step=0.0),
        dict(n_bootstrap=5),
        dict(threads=0),
        dict(audit=0),
        dict(precision=0.0),
        dict(precision=-0.1),
        dict(precision=float("nan")),
        dict(precision=float("inf")),
        dict(precision=1.5),
    ],
)
def test_config_validation(bad):
    with pytest.raises(ValueError):
        AblateConfig(**bad)


def test_quick_mode_resolution():
    q = AblateConfig().for_quick().resolved(270)
    assert (
        q.top_k == 6 and q.prune_step == 0.1 and q.n_prose <= 3 and q.n_bootstrap <= 200
    )  # 2% per list
    assert q.ig_steps == 2 and q.estimator_positions == 200
    assert AblateConfig().for_quick().resolved(12).top_k == 5
    sweep = dict(max_rounds=DEFAULT_ROUNDS, time_budget=DEFAULT_BUDGET)
    filled = dict(max_tokens_per_batch=CPU_TOKENS_PER_PASS, estimator_positions=0, **sweep)
    assert AblateConfig().resolved(270) == AblateConfig(**filled)  # filled in
    assert AblateConfig(max_tokens_per_batch=512).resolved(270) == AblateConfig(
        max_tokens_per_batch=512, estimator_positions=0, **sweep
    )


def test_ablate_stage_writes_tables_and_records_the_stage(llama, tmp_path):
    with pytest.raises(RunError):
        rerun_stage(tmp_path / "nowhere", "ablate", SMALL, model=llama, progress=False)
    rundir.write_manifest(tmp_path, {"model": llama.facts(), "stages": {}})
    config = dataclasses.replace(SMALL, ablations=("zero",), top_k=2, prune_step=0.5)
    rerun_stage(tmp_path, "ablate", config, model=llama, progress=False)
    run = load_run(tmp_path)
    assert run.effects is not None and run.pruning is not None
    recorded = run.manifest["stages"]["ablate"]
    assert recorded["config"]["top_k"] == 2 and recorded["seconds"] > 0
    assert set(recorded["removable"]) == set(CAUSAL_METRICS)
    assert stage("ablate").done(tmp_path, config)


# --- roles meet effects -----------------------------------------------------------------------


def _effects(deltas: dict[tuple[int, int], float]) -> pd.DataFrame:
    rows = [
        {
            "layer": l,
            "head": h,
            "ablation": "zero",
            "metric": "loss_prose",
            "baseline": 3.0,
            "ablated": 3.0 + d,
            "delta": d,
            "delta_rel": d / 3,
            "ci_low": d - 0.01,
            "ci_high": d + 0.01,
            "estimator": "exact",
        }
        for (l, h), d in deltas.items()
    ]
    return pd.DataFrame(rows)


def _roles(labels: dict[tuple[int, int], tuple[str, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "layer": l,
                "head": h,
                "role": r,
                "confidence": c,
                "second_role": np.nan,
                "stability": 1.0,
            }
            for (l, h), (r, c) in labels.items()
        ]
    )


def test_role_effects_and_surprises():
    heads = [(l, h) for l in range(4) for h in range(5)]
    deltas = {head: 0.001 * i for i, head in enumerate(heads)}
    deltas[(3, 4)] = 1.0  # the one big effect: an unexplained head
    deltas[(3, 3)] = 0.5  # second biggest: an induction head, as expected
    labels = {head: ("previous_token", 0.9) for head in heads}
    labels[(3, 4)] = ("unexplained", 0.3)
    labels[(3, 3)] = ("induction", 0.9)
    roles, effects = _roles(labels), _effects(deltas)

    per_role = role_effects(roles, effects).set_index("role")
    assert (
        per_role.loc["induction", "n_heads"] == 1
        and per_role.loc["induction", "share_important"] == 1.0
    )
    assert (
        per_role.loc["previous_token", "n_heads"] == 18
        and per_role.loc["previous_token", "share_important"] == 0
    )

    s = surprises(roles, effects)
    important = s[s["surprise"] == "unexplained_but_important"]
    assert list(zip(important["layer"], important["head"])) == [(3, 4)]
    unimportant = s[s["surprise"] == "labelled_but_unimportant"]
    assert len(unimportant) == 18 and (3, 3) not in set(
        zip(unimportant["layer"], unimportant["head"])
    )


def test_roles_missing_gives_empty_frames():
    effects = _effects({(0, 0): 0.1})
    assert role_effects(None, effects).empty and list(role_effects(None, effects).columns)
    assert surprises(None, effects).empty and "surprise" in surprises(None, effects).columns


def test_exact_effects_win_over_attribution():
    from interp.ablate.surprises import best_effects

    exact = _effects({(0, 0): 0.2})
    attribution = exact.assign(estimator="attribution", delta=0.9)
    best = best_effects(pd.concat([attribution, exact]))
    assert len(best) == 1 and best["estimator"].iloc[0] == "exact"


def test_group_ablation_and_the_role_check(llama):
    from interp.ablate.evaluation import build_corpus
    from interp.ablate.forward import Ablator
    from interp.ablate.groups import group_value, role_vs_random

    corpus = build_corpus(
        llama,
        SMALL.n_prose,
        SMALL.n_repeated,
        SMALL.repeated_lengths,
        SMALL.n_syntax,
        SMALL.seed,
        CPU_TOKENS_PER_PASS,
        split=1,
    )
    ablator = Ablator(llama)
    for heads in ([], [(1, 2)], [(0, 1), (2, 3)]):
        assert group_value(ablator, corpus, "loss_prose", heads) == pytest.approx(
            held_out_value(llama, "loss_prose", heads), rel=1e-6
        )
    roles = pd.DataFrame(
        [
            {"layer": l, "head": h, "role": "unexplained"}
            for l in range(N_LAYERS)
            for h in range(N_HEADS)
        ]
    )
    roles.loc[(roles["layer"] == 2) & (roles["head"].isin([0, 1])), "role"] = "induction"
    roles.loc[(roles["layer"] == 0) & (roles["head"] == 0), "role"] = "previous_token"
    check = role_vs_random(
        ablator, corpus, roles, "induction", "sv_logit_diff", exclude=("previous_token",), n_draws=4
    )
    assert check.heads == [(2, 0), (2, 1)] and len(check.random_rises) == 4
    base = group_value(ablator, corpus, "sv_logit_diff", [])
    ablated = group_value(ablator, corpus, "sv_logit_diff", [(2, 0), (2, 1)])
    assert check.rise == pytest.approx(base - ablated)  # a falling logit difference is worse
    with pytest.raises(ValueError, match="no head is labelled"):
        role_vs_random(ablator, corpus, roles, "delimiter", "loss_prose")

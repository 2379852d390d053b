"""The estimator's own corpus: the sweep's sequences and more, up to --estimator-positions per metric."""

from __future__ import annotations

import dataclasses

import pytest
from tiny_models import N_HEADS, N_LAYERS

from interp.ablate.stage import AblateConfig, ablate

N = N_LAYERS * N_HEADS
SMALL = AblateConfig(
    ablations=("zero", "mean"),
    n_prose=6,
    n_repeated=4,
    repeated_lengths=(6,),
    n_syntax=10,
    n_bootstrap=100,
    threads=1,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_estimator_reads_the_sweep_corpus_and_more_up_to_its_positions(llama):
    from interp.ablate.corpora import corpus_facts, estimator_corpus, stage_corpus

    cfg = dataclasses.replace(SMALL, estimator_positions=500, max_rounds=3).resolved(
        N
    )  # the sweep has 356 prose positions
    metrics = ("loss_prose", "loss_repeated", "sv_logit_diff")
    narrow = stage_corpus(llama, cfg, metrics)
    wide = estimator_corpus(llama, cfg, metrics, narrow)
    facts = corpus_facts(wide)
    assert all(facts[f]["n_scored"] >= 500 for f in metrics)
    assert all(facts[f]["n_scored"] > corpus_facts(narrow)[f]["n_scored"] for f in metrics)
    for eval_set in metrics:  # the sweep's sequences come first, in order
        first = [it.tokens.tolist() for it in narrow.items if it.eval_set == eval_set]
        assert [it.tokens.tolist() for it in wide.items if it.eval_set == eval_set][
            : len(first)
        ] == first
    assert (
        estimator_corpus(llama, dataclasses.replace(cfg, estimator_positions=0), metrics, narrow)
        is narrow
    )
    # prose stops at the lines of its half: the target is not reached, and nothing fails
    prose = estimator_corpus(
        llama,
        dataclasses.replace(cfg, estimator_positions=10**6),
        ("loss_prose",),
        stage_corpus(llama, cfg, ("loss_prose",)),
    )
    assert prose.sizes == {"loss_prose": 201}


def test_estimate_rows_count_the_estimator_corpus_positions(llama):
    config = dataclasses.replace(
        SMALL, ablations=("mean",), top_k=1, audit=1, prune=False, estimator_positions=500
    )
    out = ablate(llama, config, progress=False)
    rows = (
        out.effects[out.effects["estimator"] == "attribution"].groupby("metric")["n_tokens"].max()
    )
    facts = out.summary["estimator_corpus"]
    assert {m: int(n) for m, n in rows.items()} == {m: facts[m]["n_scored"] for m in rows.index}
    assert min(rows) >= 500
    exact = out.effects[out.effects["estimator"] == "exact"].groupby("metric")["n_tokens"].max()
    shared = exact.index.intersection(rows.index)  # the metrics the estimator reads too
    assert len(shared) == 3
    # the exact sweep keeps its own corpus (made for its 50 rounds), read at each head's pace:
    # never past it, and not the estimator's
    sweep_made = out.summary["corpus"]
    assert all(exact[m] <= sweep_made[m]["n_scored"] for m in shared)
    assert (exact[shared] != rows[shared]).all()
    integrated = (
        out.effects[out.effects["estimator"] == "integrated"].groupby("metric")["n_tokens"].max()
    )
    # the second opinions read the opening rounds of the sweep's corpus, made for all 50 rounds
    from interp.ablate.corpora import corpus_facts, opening_corpus, stage_corpus

    cfg = config.resolved(N)
    assert cfg.max_rounds == 50
    metrics = tuple(out.summary["metrics"])
    sweep = stage_corpus(llama, cfg, metrics)
    opening = corpus_facts(opening_corpus(llama, cfg, metrics, sweep))
    assert {m: int(n) for m, n in integrated.items()} == {
        m: opening[m]["n_scored"] for m in integrated.index
    }
    made = out.summary["corpus"]
    assert all(opening[m]["n_scored"] < made[m]["n_scored"] for m in integrated.index)
    first = opening_corpus(llama, cfg, metrics, sweep)
    for eval_set in integrated.index:  # the sweep's first sequences, the same ones
        ours = [it.tokens.tolist() for it in first.items if it.eval_set == eval_set]
        made_for_all = [it.tokens.tolist() for it in sweep.items if it.eval_set == eval_set]
        assert ours == made_for_all[: len(ours)]


def test_the_estimator_positions_default_to_where_the_estimator_chooses():
    assert (
        AblateConfig().resolved(270).estimator_positions == 0
    )  # a full sweep: every head is exact
    assert AblateConfig(top_k=10).resolved(270).estimator_positions == 4000
    assert AblateConfig().for_quick().resolved(270).estimator_positions == 200
    assert AblateConfig(top_k=10, estimator_positions=70).resolved(270).estimator_positions == 70


def test_an_estimator_corpus_beyond_the_memory_is_one_line():
    from interp.errors import MemoryBudgetError
    from interp.model import memory

    memory.check_estimator_terms(
        30, 9, 64, 4000, resample=False, available=2**31
    )  # 276 MiB of 1 GiB: fits
    with pytest.raises(
        MemoryBudgetError, match=r"estimator's 4000 sequences need about .*--estimator-positions"
    ):
        memory.check_estimator_terms(30, 9, 64, 4000, resample=True, available=2**30)


def test_an_eval_set_with_no_scorable_sequence_does_not_grow():
    from interp.ablate.corpora import _grown

    assert _grown(16, 0, 4000) == 16  # nothing fits: drawing 4000x as many would not help
    assert _grown(16, 4000, 4000) == 16
    assert _grown(10, 100, 1000) == 102  # 10x, and 2% over for the sentences an eval set drops

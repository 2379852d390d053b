"""`interp run --corpus treebank.conllu` on a tiny model: the user's treebank gets rows of its own
in the syntax table, apart from the built-in suite's, and the features pool nothing unless asked."""

from __future__ import annotations

import random

import pytest
from click.testing import CliRunner

import interp
from interp.cli import main

ADJECTIVES = ["old", "young", "tall", "happy", "small", "red"]
NOUNS = ["man", "woman", "dog", "cat", "teacher", "farmer"]
THINGS = ["book", "key", "box", "cup", "map", "lamp"]
VERBS = ["sees", "holds", "finds", "likes", "wants"]
N_SENTENCES = 40
# "the ADJ NOUN VERB the THING ." in UD: (form, head, deprel); word 4 (the verb) is the root.
TEMPLATE = (
    ("the", 3, "det"),
    ("ADJ", 3, "amod"),
    ("NOUN", 4, "nsubj"),
    ("VERB", 0, "root"),
    ("the", 6, "det"),
    ("THING", 4, "obj"),
    (".", 4, "punct"),
)


def write_treebank(path):
    rng = random.Random(0)
    lines = []
    for _ in range(N_SENTENCES):
        fill = {
            "ADJ": rng.choice(ADJECTIVES),
            "NOUN": rng.choice(NOUNS),
            "VERB": rng.choice(VERBS),
            "THING": rng.choice(THINGS),
        }
        for k, (form, head, rel) in enumerate(TEMPLATE, 1):
            misc = "SpaceAfter=No" if k == 6 else "_"
            lines.append(f"{k}\t{fill.get(form, form)}\t_\t_\t_\t_\t{head}\t{rel}\t_\t{misc}")
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return path


# The user's treebank in a causal model (a partner later in the sentence is not scored): per
# relation and direction, its arcs and the share of them at each word offset.
USER = {
    ("amod", "head2dep"): (N_SENTENCES, {-1: 1.0}),
    ("det", "head2dep"): (2 * N_SENTENCES, {-2: 0.5, -1: 0.5}),  # the ADJ NOUN ... the THING
    ("nsubj", "head2dep"): (N_SENTENCES, {-1: 1.0}),
    ("obj", "dep2head"): (N_SENTENCES, {-2: 1.0}),
    ("punct", "dep2head"): (N_SENTENCES, {-3: 1.0}),
}


def invoke(*args):
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def treebank(tmp_path_factory):
    return write_treebank(tmp_path_factory.mktemp("tb") / "treebank.conllu")


def run(model_dir, treebank, out, name, *extra):
    invoke(
        "run",
        "--model",
        str(model_dir),
        "--corpus",
        str(treebank),
        "--quick",
        "--n-syntax",
        "60",
        "--n-repeated",
        "8",
        "--skip",
        "weights",
        "--skip",
        "classify",
        "--skip",
        "ablate",
        "--skip",
        "report",
        "-q",
        "--out",
        str(out),
        "--name",
        name,
        *extra,
    )
    return out / model_dir.name / name


def syntactic_n(features, relation, direction):
    rows = features[features["feature"] == f"syntactic:{relation}:{direction}"]
    return int(rows["n"].iloc[0]) if len(rows) else None


def test_a_user_treebank_is_scored_apart_from_the_builtin_suite(model_dir, treebank, tmp_path):
    run_dir = run(model_dir, treebank, tmp_path, "tb")
    tables = interp.load_run(run_dir)
    syntax, features = tables.tables["syntax"], tables.features
    assert list(dict.fromkeys(syntax["corpus"])) == ["syntax", "user:treebank"]
    mine = syntax[syntax["corpus"] == "user:treebank"]
    assert set(zip(mine["relation"], mine["direction"])) == set(USER)
    for (relation, direction), (arcs, offsets) in USER.items():
        rows = mine[(mine["relation"] == relation) & (mine["direction"] == direction)]
        assert rows["rank"].tolist() == [1, 2, 3]
        assert rows["accuracy"].is_monotonic_decreasing
        first = rows.iloc[0]
        assert first["arcs"] == arcs and first["sentences"] == N_SENTENCES
        for d in (-3, -2, -1, 1, 2, 3):
            assert first[f"offset_{d}"] == pytest.approx(offsets.get(d, 0.0)), (
                relation,
                direction,
                d,
            )
    # no rule that needs no syntax gets every det arc by offset; the nearest "the" does
    assert mine.loc[mine["relation"] == "det", "best_rule"].iloc[0] == "nearest_the"
    assert (mine["in_features"] == 0).all() and (
        syntax.loc[syntax["corpus"] == "syntax", "in_features"] == 1
    ).all()

    # the features read the built-in suite alone: its arcs, not its arcs plus the user's
    builtin = syntax[(syntax["corpus"] == "syntax") & (syntax["rank"] == 1)].set_index(
        ["relation", "direction"]
    )
    assert syntactic_n(features, "det", "head2dep") == builtin.loc[("det", "head2dep"), "arcs"]
    assert syntactic_n(features, "punct", "dep2head") is None  # only the user's treebank has punct
    assert tables.manifest["stages"]["collect"]["syntactic_corpora"] == ["syntax"]

    # pooling is an explicit option, and the syntax table still scores each treebank apart
    invoke("collect", str(run_dir), "--pool-syntax", "-q")
    pooled = interp.load_run(run_dir)
    assert (
        syntactic_n(pooled.features, "det", "head2dep")
        == builtin.loc[("det", "head2dep"), "arcs"] + 2 * N_SENTENCES
    )
    assert syntactic_n(pooled.features, "punct", "dep2head") == N_SENTENCES
    again = pooled.syntax
    assert (again["in_features"] == 1).all()
    assert again.drop(columns="in_features").equals(syntax.drop(columns="in_features"))


def test_without_the_builtin_suite_the_features_read_the_users_treebank(
    model_dir, treebank, tmp_path
):
    run_dir = run(model_dir, treebank, tmp_path, "alone", "--no-builtin")
    tables = interp.load_run(run_dir)
    assert (
        set(tables.syntax["corpus"]) == {"user:treebank"}
        and (tables.syntax["in_features"] == 1).all()
    )
    assert syntactic_n(tables.features, "det", "head2dep") == 2 * N_SENTENCES


@pytest.mark.slow
def test_smollm2_finds_the_word_before_in_a_user_treebank(smollm2, treebank):
    """On the packaged SmolLM2, some head links every noun of the user's treebank to its
    adjective right before it (as a previous-token head would); the treebank is scored on its own."""
    from interp import CollectConfig
    from interp.collect.stage import collect

    config = CollectConfig(
        suites=("syntax",), n_syntax=30, n_repeated=0, corpora=(str(treebank),), n_bootstrap=10
    )
    syntax = collect(smollm2, config, progress=False).syntax
    mine = syntax[(syntax["corpus"] == "user:treebank") & (syntax["rank"] == 1)].set_index(
        ["relation", "direction"]
    )
    assert mine.loc[("amod", "head2dep"), "arcs"] == N_SENTENCES
    assert mine.loc[("amod", "head2dep"), "accuracy"] >= 0.95
    assert set(syntax["corpus"]) == {"syntax", "user:treebank"}

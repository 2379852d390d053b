"""The report's syntax section: per relation, the best head against the rules that need no syntax.

It leads with one table drawn from the run's ``syntax`` table (written by the collect stage, one
treebank at a time): per corpus, relation and direction, the best head, its accuracy with a 95%
bootstrap interval, the best fixed rule and the word offsets, and the number of arcs, the
largest relations first. Then the relation heatmaps: one panel per ``syntactic:<rel>:<dir>``
feature of the features table (the treebank the classifier reads), only for features with at
least :data:`MIN_ARCS` arcs, since an accuracy over a handful of arcs is noise painted in full
colour; a caption counts the ones left out (the maps are drawn by
:func:`interp.report.feature_plots.plot_relation_heatmaps`). Pure pandas: no torch.
"""

from __future__ import annotations

import pandas as pd

from interp.report import content as C
from interp.roles import FEATURE_GROUP_PREFIX

SYNTACTIC_PREFIX = FEATURE_GROUP_PREFIX["syntactic"]
BUILTIN = (
    "syntax"  # the built-in syntax suite (interp.collect.syntax_table.BUILTIN, which imports torch)
)

# A relation x direction gets a heatmap from this many arcs on: below it one head's accuracy
# moves by 3 points or more per arc, and the 95% interval of a head right at 50% spans more than
# +-17 points, wider than the lift that makes a head syntactic.
MIN_ARCS = 30
# Offsets shown in the report's table (the syntax table has offset_-3 .. offset_3).
SHOWN_OFFSETS = (-2, -1, 1, 2)


def is_syntactic(name: str) -> bool:
    return str(name).startswith(SYNTACTIC_PREFIX)


def best_heads(syntax: pd.DataFrame | None) -> pd.DataFrame | None:
    """The rank-1 row of every (corpus, relation, direction): corpora in table order, then the
    most arcs first (then relation, direction). None when the table is absent or empty."""
    if syntax is None or syntax.empty:
        return None
    first = syntax[syntax["rank"] == 1].copy()
    order = {c: i for i, c in enumerate(dict.fromkeys(syntax["corpus"]))}
    first["_corpus"] = first["corpus"].map(order)
    first = first.sort_values(
        ["_corpus", "arcs", "relation", "direction"],
        ascending=[True, False, True, True],
        kind="stable",
    )
    return first.drop(columns="_corpus").reset_index(drop=True)


def relation_table(syntax: pd.DataFrame | None) -> pd.DataFrame | None:
    """The report's per-relation table: corpus, relation, direction, arcs, best head, accuracy and
    its 95% interval (ci_low, ci_high), the best fixed rule and its accuracy, and the shown word
    offsets that some arc has (a causal model scores no partner ahead: offset_1 and offset_2 go)."""
    first = best_heads(syntax)
    if first is None:
        return None
    frame = pd.DataFrame(
        {
            "corpus": first["corpus"],
            "relation": first["relation"],
            "direction": first["direction"],
            "arcs": first["arcs"],
            "best head": [
                f"L{int(layer)}H{int(head)}" for layer, head in zip(first["layer"], first["head"])
            ],
            "accuracy": first["accuracy"],
            "ci_low": first["ci_low"],
            "ci_high": first["ci_high"],
            "best rule": first["best_rule"],
            "rule accuracy": first["best_rule_accuracy"],
        }
    )
    for d in SHOWN_OFFSETS:
        column = f"offset_{d}"
        if column in first.columns and first[column].fillna(0).gt(0).any():
            frame[column] = first[column].to_numpy()
    return frame


def _table_block(frame: pd.DataFrame) -> C.Table:
    shares = tuple(
        c
        for c in frame.columns
        if c in ("accuracy", "ci_low", "ci_high", "rule accuracy") or c.startswith("offset_")
    )
    return C.table(
        frame,
        "syntax-table",
        percent_columns=shares,
        intervals={"accuracy": ("ci_low", "ci_high")},
        filter="Filter relations:",
    )


def feature_arcs(features: pd.DataFrame | None) -> pd.Series:
    """Arcs per syntactic feature of the features table (its ``n``), the most first."""
    if features is None or features.empty:
        return pd.Series(dtype=int)
    rows = features[features["feature"].astype(str).map(is_syntactic)]
    arcs = rows.groupby("feature")["n"].max().astype(int)
    return arcs.sort_index().sort_values(ascending=False, kind="stable")


def classifier_corpora(syntax: pd.DataFrame | None, stages: dict | None = None) -> list[str]:
    """The treebanks the features' syntactic values rest on: the syntax table's ``in_features``
    rows, else what the collect stage recorded (empty when neither says)."""
    if syntax is not None and not syntax.empty and "in_features" in syntax.columns:
        return list(dict.fromkeys(syntax.loc[syntax["in_features"] == 1, "corpus"]))
    return list(((stages or {}).get("collect") or {}).get("syntactic_corpora") or [])


def names(corpora: list[str]) -> str:
    return ", ".join(corpora)


def _have(n: int) -> str:
    return "has" if n == 1 else "have"


def _are(n: int) -> str:
    return "is" if n == 1 else "are"


def maps_caption(arcs: pd.Series, corpora: list[str]) -> str:
    """The relation maps' caption: what a cell is, and how many relations were left out and why
    (``arcs``: per syntactic feature, its number of arcs; see :func:`feature_arcs`)."""
    source = f" of {names(corpora)}" if corpora else ""
    caption = (
        f"Syntactic features{source}, the treebank the classifier reads: one panel per relation and direction "
        f"with at least {MIN_ARCS} arcs, the most arcs first; cell = accuracy minus the best fixed rule's "
        f"(red: the head finds the gold partner more often than any rule that needs no syntax)."
    )
    scored = arcs[arcs > 0]
    few = int((scored < MIN_ARCS).sum())
    if few:
        caption += (
            f" {few} of the {len(scored)} relation × direction features with arcs {_have(few)} fewer than "
            f"{MIN_ARCS} and {_are(few)} left out: with so few, one arc moves the accuracy by several points. "
            f"The table above lists their best heads."
        )
    if len(scored) < len(arcs):
        empty = len(arcs) - len(scored)
        caption += (
            f" {empty} more {_have(empty)} no arc at all (in a causal model a partner later in the sentence "
            f"is never scored)."
        )
    return caption


def syntax_section(
    syntax: pd.DataFrame | None,
    features: pd.DataFrame | None,
    stages: dict | None,
    figures: list[C.FigureBlock],
) -> C.Section | None:
    """The syntax section: the per-relation table, which treebank the classifier reads, the maps."""
    table = relation_table(syntax)
    corpora = classifier_corpora(syntax, stages)
    has_features = not feature_arcs(features).empty
    if table is None and not figures and not has_features:
        return None
    blocks: list[C.Block | None] = []
    if table is not None and syntax is not None:
        n = int(syntax["rank"].max())
        blocks.append(
            C.Text(
                "Per treebank (syntax: the built-in suite; user:<file>: each --corpus CoNLL-U file, scored on its own), "
                "relation and direction: the head whose most-attended word is most often the gold partner (dep2head: "
                "the dependent looks for its head; head2dep: the other way), with its 95% bootstrap interval over "
                "sentences, against rules that need no syntax: the best one of any kind (an offset, a word position or "
                "the nearest word of a form) and the word offsets (offset_-1: the word right before). Largest relations "
                "first. "
                f"The run's syntax table holds the best {n} heads of each and every offset from -3 to +3."
            )
        )
        blocks.append(_table_block(table))
    else:
        blocks.append(
            C.Text(
                "This run has no syntax table (it was collected before interp wrote one, or has no "
                "treebank): interp collect RUN_DIR writes it.",
                "note",
            )
        )
    if corpora:
        pooled = len(corpora) > 1 and BUILTIN in corpora
        blocks.append(
            C.Text(
                f"The classifier's syntactic features (and the maps below) rest on {names(corpora)}"
                + (
                    " pooled, as --pool-syntax asked."
                    if pooled
                    else ": the built-in suite when the run has it, else the --corpus treebanks "
                    "(--pool-syntax pools them all)."
                ),
                "muted",
            )
        )
    if has_features and not figures:
        blocks.append(
            C.Text(
                f"No relation has {MIN_ARCS} arcs or more in the classifier's treebank, so no relation "
                "map is drawn.",
                "note",
            )
        )
    return C.section("syntax", "Syntax", *blocks, *figures)

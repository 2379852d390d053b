"""The schema of every table the toolkit writes, declared once.

Each table is tidy (one observation per row) and written as parquet and csv. `interp tables`
prints this schema; the README's column reference is generated from the same text. Missing
values are NaN, never a sentinel.

Column types are enforced both ways: :meth:`Table.validate` casts a frame to the declared
dtypes before it is written and after it is read, and refuses one that cannot be (a missing
column, text in a number column, a missing value in an integer column), so a table on disk
always means what this file says.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

# Declared type -> the pandas dtype a column holds. Text columns allow missing values (NaN);
# integer columns do not (a missing count is a bug, not data).
DTYPES = {"int": "int64", "float": "float64", "str": "object"}


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str
    doc: str
    # Since features version 3: a run written before has no such column, and is still read
    # (the report draws what it can); when present it is cast like any other.
    optional: bool = False


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]
    # Columns whose name follows a pattern (one per role, ...): documented, not enforced.
    pattern_columns: tuple[Column, ...] = ()

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def validate(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The frame with declared columns first, cast to their declared dtypes.

        Raises ValueError naming the table and column when a declared column is missing, its
        values cannot take the declared type, or a float column holds an infinity.
        """
        missing = [c.name for c in self.columns if c.name not in frame.columns and not c.optional]
        if missing:
            raise ValueError(f"table {self.name!r} lacks columns {missing}")
        present = [c for c in self.columns if c.name in frame.columns]
        extra = [c for c in frame.columns if c not in self.names]
        frame = frame[[c.name for c in present] + extra].copy()
        for col in present:
            frame[col.name] = _cast(frame[col.name], col, self.name)
        return frame

    def finite(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The frame with infinite values of its float columns replaced by NaN (for writers:
        a table on disk holds no infinities, and :meth:`validate` refuses one that does)."""
        floats = [c.name for c in self.columns if c.dtype == "float" and c.name in frame.columns]
        if not floats:
            return frame
        frame = frame.copy()
        frame[floats] = frame[floats].replace([np.inf, -np.inf], np.nan)
        return frame


def _cast(values: pd.Series, col: Column, table: str) -> pd.Series:
    target = DTYPES[col.dtype]
    try:
        if col.dtype == "str":
            return values.astype(object).map(lambda v: np.nan if pd.isna(v) else v if isinstance(v, str) else str(v))
        if col.dtype == "int" and values.isna().any():
            raise ValueError("missing values")
        out = pd.to_numeric(values, errors="raise").astype(target)
        if col.dtype == "float" and np.isinf(out.to_numpy()).any():
            raise ValueError("infinite values (a table holds NaN where there is no finite value)")
        if col.dtype == "int" and not np.array_equal(out.to_numpy(), pd.to_numeric(values).to_numpy()):
            raise ValueError("non-integer values")
        return out
    except (TypeError, ValueError) as exc:
        raise ValueError(f"table {table!r}: column {col.name!r} must be {col.dtype} ({exc})") from None


FEATURES = Table(
    "features",
    "One row per (layer, head, feature): how much attention the head puts where the feature looks.",
    (
        Column("layer", "int", "layer index, 0-based"),
        Column("head", "int", "query-head index within the layer, 0-based"),
        Column("feature", "str", "feature name (see `interp roles`), e.g. previous_token, position:1, syntactic:nsubj:head2dep"),
        Column("value", "float", "the head's score: share of its attention off the first position (the sink) that "
               "lands on the feature's target keys, over eligible query positions (first_token: the mass on the first "
               "position itself; broad: normalised entropy over the content keys; syntactic features: share of arcs "
               "whose most-attended word is the gold partner)"),
        Column("baseline", "float", "what a head with no preference scores on the same positions: its non-sink attention "
               "spread uniformly over the keys it may see (for syntactic features: accuracy of the best fixed rule: a "
               "word offset, word position or word form)"),
        Column("sink_mass", "float", "mean attention on the first position (BOS / [CLS]) over the same positions; the raw "
               "mass on the targets is value * (1 - sink_mass) (duplicate_token, induction: minus the mass on the query itself too)",
               optional=True),
        Column("ci_low", "float", "2.5% bootstrap quantile of value, resampling probe sequences"),
        Column("ci_high", "float", "97.5% bootstrap quantile of value, resampling probe sequences"),
        Column("n", "int", "number of query positions (or arcs) the value rests on"),
    ),
)

ROLES_TABLE = Table(
    "roles",
    "One row per head: its primary role, how sure, a second role, its sink mass, and how stable under resampled probes.",
    (
        Column("layer", "int", "layer index, 0-based"),
        Column("head", "int", "query-head index within the layer, 0-based"),
        Column("role", "str", "primary role from the catalogue, or 'unexplained'"),
        Column("confidence", "float", "calibrated probability of the primary role (1 for first_token, which the sink rule sets)"),
        Column("second_role", "str", "a second role that also holds, or NaN"),
        Column("sink_mass", "float", "mean attention on the first position (BOS / [CLS]) over every content query: the "
               "head's attention sink; the role says what the head does with the rest (first_token: too little rest)",
               optional=True),
        Column("stability", "float", "share of probe bootstrap resamples that give the same primary role"),
    ),
    (Column("score_<role>", "float", "probability that the primary role is <role>: the classifier's, on the head's "
            "non-sink attention (first_token: 1 where the sink rule applies, and then every other score 0)"),),
)

EFFECTS = Table(
    "effects",
    "One row per (layer, head, ablation, metric): what removing the head does to the metric.",
    (
        Column("layer", "int", "layer index, 0-based"),
        Column("head", "int", "query-head index within the layer, 0-based"),
        Column("ablation", "str", "zero | mean | resample"),
        Column("metric", "str", "metric name: loss_prose, loss_repeated, sv_logit_diff (causal); embedding_cosine, retrieval_margin (encoders)"),
        Column("baseline", "float", "metric of the intact model"),
        Column("ablated", "float", "metric with the head ablated"),
        Column("delta", "float", "change oriented so that positive means the model got worse (ablated - baseline for losses, baseline - ablated for sv_logit_diff and retrieval_margin)"),
        Column("delta_rel", "float", "delta / |baseline|"),
        Column("ci_low", "float", "2.5% bootstrap quantile of delta over evaluation sequences"),
        Column("ci_high", "float", "97.5% bootstrap quantile of delta over evaluation sequences"),
        Column("method", "str", "exact (the ablated model was run) | integrated (integrated-gradients estimate over the "
               "clean -> ablated path) | attribution (first-order estimate)"),
        Column("selected", "str", "exact rows: why the head was ablated exactly: all (every head was) | top_k (the estimator "
               "ranked it among the top k) | audit (a random sample of the other heads, to check the estimator); NaN on "
               "estimates", optional=True),
        Column("estimate", "float", "exact rows: the estimator's delta for the same head, ablation and metric (NaN where "
               "there is none); the audit's error is delta - estimate", optional=True),
        Column("n_tokens", "int", "tokens of the evaluation sequences this effect was measured on", optional=True),
        Column("tolerance", "float", "the effect below which a head counts as removable: 1% of |baseline| (absolute 0.01 "
               "where the baseline is 0)", optional=True),
        Column("vs_zero", "str", "above | below: the 95% interval excludes zero on that side; undecided: it contains zero",
               optional=True),
        Column("vs_tolerance", "str", "above: the interval lies beyond +tolerance (the head matters); within: inside "
               "+-tolerance (removable); below: beyond -tolerance (removing it helps); undecided: it straddles a bound",
               optional=True),
    ),
)

PRUNING = Table(
    "pruning",
    "One row per step of cumulative head removal, each metric's least important heads first (ordered by that metric's effects, measured on a held-out evaluation corpus), and one per role whose heads are removed together.",
    (
        Column("fraction_removed", "float", "share of all heads removed so far"),
        Column("heads_removed", "int", "number of heads removed so far"),
        Column("metric", "str", "metric measured after the step"),
        Column("value", "float", "metric value with those heads ablated, on the held-out corpus (step 0: the intact model there)"),
        Column("last_removed", "str", "the heads removed at this step, space-separated, as L{layer}H{head} (NaN at step 0; "
               "role rows: all of the role's heads)"),
        Column("ci_low", "float", "2.5% bootstrap quantile of value over held-out sequences", optional=True),
        Column("ci_high", "float", "97.5% bootstrap quantile of value over held-out sequences", optional=True),
        Column("removed_by", "str", "effect: the metric's own curve, heads in ascending order of their effect on that "
               "metric (one head per step near the 1% and 5% tolerances); role:<name>: every head of that primary "
               "role removed at once", optional=True),
    ),
)

TABLES: dict[str, Table] = {t.name: t for t in (FEATURES, ROLES_TABLE, EFFECTS, PRUNING)}


def describe() -> str:
    """Plain-text reference of every table and column (printed by `interp tables`)."""
    lines: list[str] = []
    for table in TABLES.values():
        lines.append(f"{table.name}: {table.doc}")
        for col in table.columns + table.pattern_columns:
            lines.append(f"  {col.name:<18} {col.dtype:<6} {col.doc}")
        lines.append("")
    return "\n".join(lines)

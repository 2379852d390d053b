"""Compare a run's tables with the golden ones: exact where the computation is, robust where it
is not.

- **Keys, integers, labels**: exact (``layer``, ``head``, ``feature``, ``role``, ``n_tokens``, ...).
  Rows are matched by the table's key (:data:`KEYS`) and must come in the same order.
- **Floats**: equal within ``ATOL + RTOL * max(|golden|, |new|)`` (float32 rounding, which differs between
  processes and library versions; the losses are about 7, so a delta of about 1e-3 carries about
  1e-6 of it). NaN equals NaN and nothing else.
- **Decisions taken on a float** (``vs_zero``, ``vs_tolerance``: where the 95% interval lies
  against 0 and against +-tolerance) may differ only where a golden interval bound equals the
  threshold within the tolerance.
- **Orders taken from floats** (a pruning curve removes heads in ascending order of their effect
  on its metric): two heads may swap only if their golden effects tie within twice the
  tolerance (each effect may move by the tolerance, so their order is fixed only beyond twice
  it). Every inversion between the golden order and the new one must be such a tie (this check
  covers the own-order steps' ``last_removed``). A step whose set of removed heads then differs
  from the golden one (step 7 of tiny-bert's ``embedding_cosine`` curve if L0H1 and L2H1 swap)
  measured another model, so its ``value`` and interval are not compared; steps whose sets agree
  are compared as any row. The by-role rows' ``last_removed`` is compared as a set of heads.

:func:`differences` returns the differing cells, one row each, golden and new side by side;
:func:`report` renders them for a failing test.
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pandas as pd

RTOL = 1e-5
ATOL = 1e-6
KEYS = {
    "features": ("layer", "head", "feature"),
    "roles": ("layer", "head"),
    "effects": ("layer", "head", "ablation", "metric", "estimator"),
    "pruning": ("metric", "removed_by", "heads_removed"),
    "weights": ("layer", "head", "score"),
    "composition": ("kind", "layer", "head", "writer_layer", "writer_head"),
}
# Columns that only say which heads a pruning step removed, or what it measured on them.
_STEP_VALUES = ("value", "ci_low", "ci_high")
DIFF_COLUMNS = ["table", "row", "column", "golden", "now", "why"]


def read_table(source) -> pd.DataFrame:
    """A table as the golden files hold it (csv): only an empty field is missing (NaN)."""
    return pd.read_csv(source, keep_default_na=False, na_values=[""])


def close(a: float, b: float, scale: float = 1.0) -> bool:
    """``a`` equals ``b`` within ``scale`` times the tolerance; NaN equals NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= scale * (ATOL + RTOL * max(abs(a), abs(b)))


def differences(
    tables_now: dict[str, pd.DataFrame], tables_golden: dict[str, pd.DataFrame]
) -> pd.DataFrame:
    """Every cell in which the new tables differ from the golden ones beyond what is allowed."""
    found: list[dict] = []
    for table, golden in tables_golden.items():
        now = tables_now[table]
        found += _table_differences(table, now, golden, tables_golden.get("effects"))
    return pd.DataFrame(found, columns=DIFF_COLUMNS)


def report(
    diff: pd.DataFrame, versions_golden: dict | None = None, versions_now: dict | None = None
) -> str:
    """The differing cells (golden and new side by side), then the library versions of both."""
    lines = [f"{len(diff)} cell(s) differ beyond rtol={RTOL:g}, atol={ATOL:g}:"]
    shown = diff.assign(golden=diff["golden"].map(_shown), now=diff["now"].map(_shown))
    with pd.option_context(
        "display.width", 250, "display.max_colwidth", 80, "display.max_rows", 500
    ):
        lines.append(shown.to_string(index=False))
    if versions_golden is not None and versions_now is not None:
        names = sorted(set(versions_golden) | set(versions_now))
        frame = pd.DataFrame(
            {
                "golden": [versions_golden.get(n) for n in names],
                "now": [versions_now.get(n) for n in names],
            },
            index=names,
        )
        frame[""] = np.where(frame["golden"] != frame["now"], "differs", "")
        lines += ["", "library versions:", frame.to_string()]
    return "\n".join(lines)


def _shown(value: object) -> str:
    """A cell as it was read, floats with every digit."""
    return repr(float(value)) if isinstance(value, (float, np.floating)) else str(value)


def _table_differences(
    table: str, now: pd.DataFrame, golden: pd.DataFrame, effects: pd.DataFrame | None
) -> list[dict]:
    def cell(row: str, column: str, g: object, n: object, why: str) -> dict:
        return {"table": table, "row": row, "column": column, "golden": g, "now": n, "why": why}

    if list(now.columns) != list(golden.columns):
        return [cell("", "(columns)", list(golden.columns), list(now.columns), "columns differ")]
    keys = list(KEYS[table])
    g_rows, n_rows = _keyed(golden, keys), _keyed(now, keys)
    out = [cell(k, "(row)", "present", "missing", "row missing") for k in g_rows if k not in n_rows]
    out += [cell(k, "(row)", "missing", "present", "row added") for k in n_rows if k not in g_rows]
    common = [k for k in g_rows if k in n_rows]
    if not out and common != [k for k in n_rows if k in g_rows]:
        out.append(cell("", "(rows)", "golden order", "another order", "rows in another order"))
    skip: dict[str, set[str]] = {}
    if table == "pruning" and effects is not None:
        out += [cell(*d) for d in _pruning_orders(now, golden, effects)]
        skip = _pruning_skips(now, golden)
    for key in common:
        g, n = g_rows[key], n_rows[key]
        for column in golden.columns:
            if column in keys or column in skip.get(key, ()):
                continue
            a, b = n[column], g[column]
            if column == "last_removed":
                same = _heads(a) == _heads(b)
            elif column in ("vs_zero", "vs_tolerance"):
                same = _equal(a, b) or _threshold_tie(g, column)
            else:
                same = _equal(a, b)
            if not same:
                out.append(cell(key, column, b, a, _why(a, b)))
    return out


def _keyed(frame: pd.DataFrame, keys: list[str]) -> dict[str, pd.Series]:
    return {_key(row, keys): row for _, row in frame.iterrows()}


def _key(row: pd.Series, keys: list[str] | tuple[str, ...]) -> str:
    return " ".join(f"{k}={row[k]}" for k in keys)


def _is_nan(x: object) -> bool:
    return isinstance(x, float) and math.isnan(x) or x is None or x is pd.NA


def _equal(a: object, b: object) -> bool:
    if _is_nan(a) or _is_nan(b):
        return _is_nan(a) and _is_nan(b)
    if isinstance(a, (int, np.integer)) and isinstance(b, (int, np.integer)):
        return int(a) == int(b)
    if isinstance(a, (float, np.floating, int, np.integer)) and isinstance(
        b, (float, np.floating, int, np.integer)
    ):
        return close(float(a), float(b))
    return str(a) == str(b)


def _why(a: object, b: object) -> str:
    try:
        return f"off by {float(a) - float(b):.3g}"
    except (TypeError, ValueError):
        return "not equal"


def _threshold_tie(golden_row: pd.Series, column: str) -> bool:
    """A decision against a threshold may flip where an interval bound ties with it."""
    thresholds = (
        [0.0] if column == "vs_zero" else [golden_row["tolerance"], -golden_row["tolerance"]]
    )
    return any(
        close(float(golden_row[b]), float(t)) for b in ("ci_low", "ci_high") for t in thresholds
    )


def _heads(text: object) -> frozenset[str]:
    return frozenset() if _is_nan(text) else frozenset(str(text).split())


def _orders(pruning: pd.DataFrame) -> dict[str, list[str]]:
    """Each metric's removal order, from its own-order curve (``removed_by`` = effect)."""
    curve = pruning[pruning["removed_by"] == "effect"].sort_values(
        ["metric", "heads_removed"], kind="stable"
    )
    return {
        m: [
            h for text in part["last_removed"] for h in ([] if _is_nan(text) else str(text).split())
        ]
        for m, part in curve.groupby("metric", sort=False)
    }


def _scores(effects: pd.DataFrame, metric: str) -> dict[str, float]:
    """The effect that orders a metric's curve: the exact one where a head has it, else the estimate."""
    rows = effects[effects["metric"] == metric]
    assert rows["ablation"].nunique() <= 1, "one ablation kind per golden run"
    score: dict[str, float] = {}
    for exact in (False, True):
        part = rows[(rows["estimator"] == "exact") == exact]
        score.update({f"L{int(r.layer)}H{int(r.head)}": float(r.delta) for r in part.itertuples()})
    return score


def _pruning_orders(now: pd.DataFrame, golden: pd.DataFrame, effects: pd.DataFrame) -> list[tuple]:
    """Inversions between the golden and the new removal order that no tie explains."""
    out = []
    new_orders = _orders(now)
    for metric, g_order in _orders(golden).items():
        n_order = new_orders.get(metric, [])
        if sorted(n_order) != sorted(g_order):
            out.append(
                (f"metric={metric}", "(order)", " ".join(g_order), " ".join(n_order), "other heads")
            )
            continue
        score, position = _scores(effects, metric), {h: i for i, h in enumerate(n_order)}
        for a, b in combinations(g_order, 2):  # a before b in the golden order
            if position[a] < position[b]:
                continue
            if a in score and b in score and close(score[a], score[b], scale=2.0):
                continue
            out.append(
                (
                    f"metric={metric}",
                    "(order)",
                    f"{a} before {b}",
                    f"{b} before {a}",
                    f"effects {score.get(a, math.nan):.3g} and {score.get(b, math.nan):.3g} do not tie",
                )
            )
    return out


def _pruning_skips(now: pd.DataFrame, golden: pd.DataFrame) -> dict[str, set[str]]:
    """What the order check already covers, and what a tied swap changes: an own-order step's
    ``last_removed`` (checked as part of the order), and the values of a step whose set of removed
    heads differs (by tied heads) from the golden one, since they measure another set of heads."""
    g_orders, n_orders = _orders(golden), _orders(now)
    skip: dict[str, set[str]] = {}
    for _, row in golden[golden["removed_by"] == "effect"].iterrows():
        metric, k = row["metric"], int(row["heads_removed"])
        swapped = set(g_orders[metric][:k]) != set(n_orders.get(metric, [])[:k])
        skip[_key(row, KEYS["pruning"])] = {"last_removed", *(_STEP_VALUES if swapped else ())}
    return skip

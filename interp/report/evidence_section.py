"""The heads that matter: which role each holds, which evidence decided it, and whom they compose with.

For the heads with the largest effects (:data:`TOP` per metric, the effect the report shows:
exact where measured), a table says the primary and second role, where the head looks, what it
writes, its task role and the evidence that decided (the roles table's ``evidence``), beside its
effect; and a graph draws the composition among them: an edge from an earlier head to a later
one where the later head's queries, keys or values read the earlier one's output above the
random-pair null and among the :data:`EDGE_RANK` earlier heads it reads most that way (the
composition table's ``rank``). The layout is networkx's multipartite layout, one column per
layer. Pure pandas, networkx and matplotlib: no torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import networkx as nx
import pandas as pd
from matplotlib.lines import Line2D

from interp.pipeline.results import RunTables
from interp.report import content as C
from interp.report import summary as S
from interp.report.figures import new_figure, role_colour, role_handles, save, styled
from interp.roles import ROLES

TOP = 10  # heads per metric in the table and the graph
EDGE_RANK = 3  # an edge: the writer is among the reader's 3 strongest of a kind
KIND_STYLE: dict[str, tuple[str, Literal["solid", "dashed"]]] = {
    "q": ("#1f77b4", "solid"),
    "k": ("#d62728", "solid"),
    "v": ("#7f7f7f", "dashed"),
}
COLUMNS = (
    "name",
    "metric",
    "delta",
    "role",
    "second_role",
    "evidence",
    "looks",
    "components",
    "writes",
    "task_role",
    "output_size",
)


def top_heads(run: RunTables, top: int = TOP) -> pd.DataFrame | None:
    """The ``top`` heads by |effect| on each metric (the report's ablation, exact where the head
    was ablated exactly), joined with their roles: one row per (metric, head), largest first."""
    best = S.best_effects(run.effects)
    if best is None or run.roles is None:
        return None
    ranked = best.assign(size=best["delta"].abs()).sort_values(
        ["metric", "size"], ascending=[True, False], kind="stable"
    )
    chosen = ranked.groupby("metric", sort=False).head(top)
    roles = run.roles.reindex(columns=["layer", "head", *COLUMNS[3:]])
    out = chosen.merge(roles, on=["layer", "head"], how="left")
    names = [f"L{l}H{h}" for l, h in zip(out["layer"], out["head"])]
    return out.assign(name=names)


def evidence_table(run: RunTables, top: int = TOP) -> pd.DataFrame | None:
    """:func:`top_heads` as the report shows it (columns :data:`COLUMNS`)."""
    found = top_heads(run, top)
    if found is None:
        return None
    return found[list(COLUMNS)].rename(columns={"name": "head"}).reset_index(drop=True)


def composition_graph(run: RunTables, heads: list[tuple[int, int]]) -> nx.DiGraph:
    """Nodes: ``heads`` (attributes layer, role); edges writer -> reader among them where the
    composition passes the null and the writer ranks within :data:`EDGE_RANK` (attributes kind,
    value). Several kinds between one pair: the strongest."""
    graph = nx.DiGraph()
    roles = (
        run.roles.set_index(["layer", "head"])["role"]
        if run.roles is not None
        else pd.Series(dtype=object)
    )
    for layer, head in heads:
        graph.add_node((layer, head), layer=layer, role=str(roles.get((layer, head), "")))
    comp = run.tables.get("composition")
    if comp is None or comp.empty:
        return graph
    keep = comp[(comp["value"] > comp["null_high"]) & (comp["rank"] <= EDGE_RANK)]
    among = set(heads)
    for r in keep.sort_values("value").itertuples():
        writer, reader = (int(r.writer_layer), int(r.writer_head)), (int(r.layer), int(r.head))
        if writer in among and reader in among:
            graph.add_edge(writer, reader, kind=r.kind, value=float(r.value))
    return graph


@styled
def plot_composition_graph(run: RunTables, fig_dir: Path | None, top: int = TOP):
    """The composition graph among the heads that matter (None without roles, effects or a
    composition table)."""
    found = top_heads(run, top)
    if found is None or run.tables.get("composition") is None:
        return None
    heads = sorted(set(zip(found["layer"].astype(int), found["head"].astype(int))))
    graph = composition_graph(run, heads)
    if graph.number_of_edges() == 0:
        return None
    position = nx.multipartite_layout(graph, subset_key="layer", align="vertical")
    width = min(14.0, max(6.0, 0.8 * len({l for l, _ in heads}) + 2.5))
    fig = new_figure(width, max(4.0, 0.5 * max(pd.Series([l for l, _ in heads]).value_counts())))
    ax = fig.add_subplot()
    roles = [graph.nodes[n]["role"] for n in graph.nodes]
    nx.draw_networkx_nodes(
        graph, position, ax=ax, node_color=[role_colour(r) for r in roles], node_size=420
    )
    nx.draw_networkx_labels(
        graph, position, ax=ax, labels={n: f"L{n[0]}H{n[1]}" for n in graph.nodes}, font_size=6
    )
    for kind, (colour, style) in KIND_STYLE.items():
        edges = [(a, b) for a, b, k in graph.edges(data="kind") if k == kind]
        nx.draw_networkx_edges(
            graph,
            position,
            edgelist=edges,
            ax=ax,
            edge_color=colour,
            style=style,
            arrows=True,
            arrowsize=8,
            node_size=420,
            connectionstyle="arc3,rad=0.08",
        )
    present = [r for r in ROLES if r in set(roles)]
    kinds = [
        Line2D([], [], color=colour, linestyle=style, label=f"{kind}-composition")
        for kind, (colour, style) in KIND_STYLE.items()
    ]
    ax.legend(
        handles=role_handles(present) + kinds,
        fontsize=6,
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
    )
    ax.set_axis_off()
    caption = (
        f"The {top} heads with the largest effect on each metric, one column per layer (left: "
        f"early), coloured by primary role. An arrow from an earlier head to a later one: the later "
        f"head's queries (q), keys (k) or values (v) read the earlier head's output above the "
        f"random-pair null and among the {EDGE_RANK} earlier heads it reads most that way (the "
        f"composition table; static weights: blind to rotary positions and to what the data makes "
        f"of them)."
    )
    return save(
        fig, fig_dir, "composition_graph", "Composition among the heads that matter", caption
    )


def section(run: RunTables, figures: Path) -> C.Section | None:
    """Which role the heads that matter hold, what decided it, and whom they compose with
    (classify, after ablate and weights)."""
    table = evidence_table(run)
    if table is None:
        return None
    drawn = plot_composition_graph(run, figures)
    unexplained = table.drop_duplicates("head")["role"].eq("unexplained")
    return C.section(
        "evidence",
        "The heads that matter: role and evidence",
        C.Text(
            f"The {TOP} heads with the largest effect on each metric ({len(unexplained)} heads, "
            f"{int(unexplained.sum())} of them unexplained): their primary and second role, and what "
            "decided the primary one (evidence: attention = where the head looks, weights = what "
            "its OV circuit writes, output = how much it writes, task = its task's attention, "
            "effects and composition; blank: no evidence sufficed)."
        ),
        C.table(
            table,
            "evidence-table",
            role_columns=("role", "second_role", "looks", "writes", "task_role"),
        ),
        C.figure(drawn) if drawn is not None else None,
    )

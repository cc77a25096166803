"""IOPDDL nodes tied by rigid edges solved as one group: an edge whose allowed pairs (costs below `FORBIDDEN`) are a
bijection between its two nodes' strategies fixes either node's strategy once the other's is chosen, so every node
of a connected set of such edges follows one of them (its root).

Most of the contest's edges are rigid (one sharding carried from an operation to the next): 35,789 of A's 54,801
edges tie 34,718 of its 34,932 nodes into 178 sets, the largest 6,369 nodes; K's 29,612 of 49,674 tie 32,256 nodes
into 2,711 sets. A move that changes one node of a set must change all of it, which no search that moves a few
groups at a time finds (on A, three nodes tied to each other, one of them on 150 edges, moved together took 1.0 G off
a valid solution at 8.4 G that its neighbourhood search had left). Merged, the problem the core solves has a group per
set: its candidates the root's strategies that every cycle of the set agrees on, its cost the members' costs and the
edges within the set at those strategies, its edges to other sets the members' edges read at the strategies each
candidate gives them, and its bytes at a row the sum of the members live there. A choice of the merged problem is a
choice of every node (`Merged.lift`): the same cost and the same usage at every time, so nothing is lost.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ipuplan.model.problem import FORBIDDEN, Edge, Problem, TableRows, TermTable
from ipuplan.plan.budgets import Limit


@dataclass(frozen=True)
class Merged:
    """The merged problem and, per group, each member node with the strategy each of the group's candidates gives it."""

    problem: Problem
    members: tuple[np.ndarray, ...]
    """Per group, its nodes."""
    picks: tuple[np.ndarray, ...]
    """Per group, (its nodes, its candidates): the strategy of each node under each candidate."""

    def lift(self, choice) -> np.ndarray:
        """Per node of the instance, its strategy under the merged problem's `choice`."""
        nodes = sum(len(m) for m in self.members)
        strategies = np.zeros(nodes, dtype=np.int64)
        for members, picks, c in zip(self.members, self.picks, choice):
            strategies[members] = picks[:, c]
        return strategies


def rigid_edges(instance) -> np.ndarray:
    """Per edge, whether its allowed pairs are a bijection between two distinct nodes' strategies."""
    found = np.zeros(instance.edges, dtype=bool)
    for e, (u, v) in enumerate(instance.edge_nodes.tolist()):
        if u != v:
            allowed = instance.edge_matrix(e) < FORBIDDEN
            found[e] = (allowed.shape[0] == allowed.shape[1] and bool((allowed.sum(axis=0) == 1).all())
                        and bool((allowed.sum(axis=1) == 1).all()))
    return found


def _sets(instance, rigid: np.ndarray) -> list[tuple[int, list[tuple[int, int, bool]]]]:
    """Per set of nodes tied by rigid edges: its root and its rigid edges in breadth-first order from the root, each
    as (edge, the node reached, whether it is the edge's second node)."""
    incident: dict[int, list[tuple[int, int, bool]]] = {}
    for e in np.flatnonzero(rigid).tolist():
        u, v = instance.edge_nodes[e].tolist()
        incident.setdefault(u, []).append((e, v, True))
        incident.setdefault(v, []).append((e, u, False))
    seen = np.zeros(instance.nodes, dtype=bool)
    found = []
    for root in range(instance.nodes):
        if seen[root]:
            continue
        seen[root] = True
        order, queue = [], [root]
        while queue:
            node = queue.pop()
            for e, other, second in incident.get(node, ()):
                order.append((e, other, second))
                if not seen[other]:
                    seen[other] = True
                    queue.append(other)
        found.append((root, order))
    return found


def _member_picks(instance, root: int, order: list[tuple[int, int, bool]]) -> tuple[np.ndarray, np.ndarray]:
    """(the set's nodes, root first; per node, its strategy under each strategy of the root the set's cycles agree
    on, those strategies as the columns)."""
    picks = {root: np.arange(int(instance.strategy_counts[root]))}
    agree = np.ones(len(picks[root]), dtype=bool)
    for e, other, second in order:
        allowed = instance.edge_matrix(e) < FORBIDDEN
        follows = np.argmax(allowed, axis=1) if second else np.argmax(allowed, axis=0)
        source = instance.edge_nodes[e, 0 if second else 1]
        reached = follows[picks[source]]
        if other in picks:
            agree &= picks[other] == reached
        else:
            picks[other] = reached
    nodes = np.array(list(picks), dtype=np.int64)
    return nodes, np.array([picks[n][agree] for n in nodes.tolist()], dtype=np.int64).reshape(len(nodes), -1)


def merged(instance, times: np.ndarray, constant: np.ndarray, varying: np.ndarray) -> Merged | None:
    """The instance with every set of nodes tied by rigid edges as one group (module docstring), its rows at `times`
    (`iopddl.row_times`) with `constant` bytes there (what no choice changes), the `varying` nodes' usages (those
    whose strategies differ in it) its terms; None when no edge is rigid (nothing to merge) or some set's cycles agree
    on no strategy (every choice makes a forbidden pair: the unmerged problem says so)."""
    rigid = rigid_edges(instance)
    if not rigid.any():
        return None
    sets = [_member_picks(instance, root, order) for root, order in _sets(instance, rigid)]
    if any(not picks.shape[1] for _, picks in sets):
        return None
    members, picks = tuple(m for m, _ in sets), tuple(p for _, p in sets)
    group_of, row_of = np.zeros(instance.nodes, dtype=np.int64), np.zeros(instance.nodes, dtype=np.int64)
    for g, nodes in enumerate(members):
        group_of[nodes], row_of[nodes] = g, np.arange(len(nodes))
    exchange, edges = _costs(instance, members, picks, group_of, row_of)
    limits = () if instance.usage_limit is None else (Limit("usage", 1, 0, instance.usage_limit),)
    table = _table(instance, members, picks, times, constant, varying)
    problem = Problem(candidate_counts=tuple(p.shape[1] for p in picks), input_choice=(0,) * len(members),
                      group_sizes=(0,) * len(members), rows=TableRows(table, times),
                      exchange=tuple(tuple(e.tolist()) for e in exchange), limits=limits, steps_total=len(times),
                      edges=edges)
    return Merged(problem, members, picks)


def _capped_sum(values: np.ndarray, axis: int = 0) -> np.ndarray:
    """The sum along `axis` of costs each at most FORBIDDEN, FORBIDDEN where any is (no int64 wraps)."""
    forbidden = (values >= FORBIDDEN).any(axis=axis)
    return np.where(forbidden, FORBIDDEN, np.minimum(np.where(values >= FORBIDDEN, 0, values).sum(axis=axis),
                                                     FORBIDDEN))


def _costs(instance, members, picks, group_of, row_of) -> tuple[list[np.ndarray], tuple[Edge, ...]]:
    """(per group, per candidate: its members' costs and the edges within it; the edges between groups, each pair
    of groups once, their members' edges summed)."""
    start = instance.strategy_start
    exchange = [_capped_sum(np.minimum(instance.costs[start[nodes][:, None] + p], FORBIDDEN))
                for nodes, p in zip(members, picks)]
    between: dict[tuple[int, int], np.ndarray] = {}
    for e, (u, v) in enumerate(instance.edge_nodes.tolist()):
        gu, gv = int(group_of[u]), int(group_of[v])
        matrix = np.minimum(instance.edge_matrix(e), FORBIDDEN)
        su, sv = picks[gu][row_of[u]], picks[gv][row_of[v]]
        if gu == gv:
            exchange[gu] = _capped_sum(np.stack([exchange[gu], matrix[su, sv]]))
        else:
            pair = matrix[su[:, None], sv[None, :]] if gu < gv else matrix[su[:, None], sv[None, :]].T
            key = (min(gu, gv), max(gu, gv))
            between[key] = pair if key not in between else _capped_sum(np.stack([between[key], pair]))
    return exchange, tuple(Edge(a, b, costs) for (a, b), costs in sorted(between.items()))


def _table(instance, members, picks, times: np.ndarray, constant: np.ndarray, varying: np.ndarray) -> TermTable:
    """The groups' bytes at the rows `times`: per group, a term per run of rows with the same live members (their
    usages summed per candidate), one span each, numbered by first row then group (as `iopddl.usage_rows`)."""
    first = np.searchsorted(times, instance.intervals[:, 0])
    end = np.searchsorted(times, instance.intervals[:, 1])
    varying = varying & (first < end)
    terms: list[tuple[int, int, int, np.ndarray]] = []
    for g, (nodes, p) in enumerate(zip(members, picks)):
        held = varying[nodes]
        if not held.any():
            continue
        nodes, p = nodes[held], p[held]
        bounds = np.unique(np.concatenate([first[nodes], end[nodes]]))
        change = np.zeros((len(bounds), p.shape[1]), dtype=np.int64)
        live = np.zeros(len(bounds), dtype=np.int64)
        at_first, at_end = np.searchsorted(bounds, first[nodes]), np.searchsorted(bounds, end[nodes])
        usage = instance.usages[instance.strategy_start[nodes][:, None] + p]
        np.add.at(change, at_first, usage)
        np.add.at(change, at_end, -usage)
        np.add.at(live, at_first, 1)
        np.add.at(live, at_end, -1)
        change, live = np.cumsum(change, axis=0), np.cumsum(live)
        for k in np.flatnonzero(live[:-1] > 0).tolist():
            terms.append((int(bounds[k]), g, int(bounds[k + 1]), change[k]))
    terms.sort(key=lambda term: term[:2])
    counts = np.array([len(t[3]) for t in terms], dtype=np.int64)
    standard = np.concatenate([t[3] for t in terms]) if terms else np.zeros(0, dtype=np.int64)
    return TermTable(group=np.array([t[1] for t in terms], dtype=np.int64), start=np.cumsum(counts) - counts,
                     standard=standard, interleaved=np.zeros(len(standard), dtype=np.int64),
                     span_term=np.arange(len(terms)), span_first=np.array([t[0] for t in terms], dtype=np.int64),
                     span_end=np.array([t[2] for t in terms], dtype=np.int64),
                     constant_standard=constant, constant_interleaved=np.zeros(len(times), dtype=np.int64))

"""IOPDDL nodes that follow others solved as one group: an edge whose allowed pairs (costs below `FORBIDDEN`) leave
one strategy of its second node at most per strategy of its first fixes the second once the first is chosen (a rigid
edge, its allowed pairs a bijection, fixes either from the other), so the nodes joined by such edges follow one of
them, the group's root.

Most of the contest's edges are rigid (one sharding carried from an operation to the next): 35,789 of A's 54,801
edges tie 34,718 of its 34,932 nodes into 178 sets, the largest 6,369 nodes; K's 29,612 of 49,674 tie 32,256 nodes
into 2,711 sets. A move that changes one node of a set must change all of it, which no search that moves a few
groups at a time finds (on A, three nodes tied to each other, one of them on 150 edges, moved together took 1.0 G off
a valid solution at 8.4 G that its neighbourhood search had left). Merged along rigid and one-way determining edges
(A: 287 groups, K: 5,282, M: 5,404, S: 6,569), the problem the core solves has a group per set: its candidates the
root's strategies that pay no forbidden cost within the set, its cost the members' costs and the edges within the
set at the strategies each candidate gives them, its edges to other sets the members' edges read the same way, and
its bytes at a row the sum of the members live there. A choice of the merged problem is a choice of every node
(`Merged.lift`), at the same cost and the same usage at every time, and every solution that pays no forbidden cost is
one (a node that follows has no other allowed strategy): nothing is lost.
"""

from __future__ import annotations

from collections.abc import Iterator
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


def determining(instance) -> Iterator[tuple[int, np.ndarray]]:
    """Each edge whose first node's strategy leaves at most one allowed strategy of its second node (each row of
    allowed pairs has one at most), or whose second's leaves one of the first's (each column), with its allowed pairs;
    a rigid edge does both. An edge that joins a node to itself does neither."""
    for e, (u, v) in enumerate(instance.edge_nodes.tolist()):
        if u != v:
            allowed = instance.edge_matrix(e) < FORBIDDEN
            if (allowed.sum(axis=1) <= 1).all() or (allowed.sum(axis=0) <= 1).all():
                yield e, allowed


class _Sets:
    """Groups of nodes, each node's strategy a function of its group's root's (`picks`), merged along edges that
    determine one side from the other."""

    def __init__(self, counts: np.ndarray) -> None:
        self.group_of = list(range(len(counts)))
        self.members = [[node] for node in range(len(counts))]
        self.picks = [[np.arange(int(k))] for k in counts.tolist()]
        self.position = [0] * len(counts)

    def between(self, instance, e: int, allowed: np.ndarray) -> tuple[int, int, np.ndarray]:
        """(the groups of edge `e`'s nodes, its `allowed` pairs per pair of their candidates)."""
        u, v = instance.edge_nodes[e].tolist()
        g, h = self.group_of[u], self.group_of[v]
        return g, h, allowed[self.picks[g][self.position[u]][:, None], self.picks[h][self.position[v]][None, :]]

    def join(self, g: int, h: int, follows: np.ndarray) -> None:
        """Group `h` into `g`, its candidate under `g`'s candidate c `follows[c]`."""
        for node, row in zip(self.members[h], self.picks[h]):
            self.group_of[node], self.position[node] = g, len(self.members[g])
            self.members[g].append(node)
            self.picks[g].append(row[follows])
        self.members[h], self.picks[h] = [], []

    def merged_along(self, instance, e: int, allowed: np.ndarray) -> None:
        """Edge `e`'s groups merged where it (its `allowed` pairs) determines one from the other (the larger kept
        where either way would do)."""
        g, h, allowed = self.between(instance, e, allowed)
        if g == h:
            return
        forward, backward = (allowed.sum(axis=1) <= 1).all(), (allowed.sum(axis=0) <= 1).all()
        if forward and (not backward or len(self.members[g]) >= len(self.members[h])):
            self.join(g, h, np.argmax(allowed, axis=1))
        elif backward:
            self.join(h, g, np.argmax(allowed, axis=0))


def _followers(instance) -> tuple[list[np.ndarray], list[np.ndarray]] | None:
    """(per group, its nodes; per group, its nodes' strategies under each of its candidates) of the nodes merged
    along the edges that determine one side from the other, one pass over them (an edge that determines a node's
    strategy from the other's still does from its group's: one merge each, or none once both are in one group);
    None when no edge determines."""
    sets, merging = _Sets(instance.strategy_counts), False
    for e, allowed in determining(instance):
        sets.merged_along(instance, e, allowed)
        merging = True
    if not merging:
        return None
    kept = [g for g, members in enumerate(sets.members) if members]
    return ([np.array(sets.members[g], dtype=np.int64) for g in kept],
            [np.array(sets.picks[g], dtype=np.int64) for g in kept])


def merged(instance, times: np.ndarray, constant: np.ndarray, varying: np.ndarray,
           at_most_pairs: int | None = None) -> Merged | None:
    """The instance with its nodes merged along the edges that determine one side from the other (module docstring),
    its rows at `times` (`iopddl.row_times`) with `constant` bytes there (what no choice changes), the `varying`
    nodes' usages (those whose strategies differ in it) its terms. A group's candidates are its root's strategies
    that pay no forbidden cost within it. None when no edge determines (nothing to merge) or a group has no such
    candidate (every choice makes a forbidden pair: the unmerged problem says so), or when the pairs of candidates of
    the groups an edge joins may be more than `at_most_pairs` (told before the costs and rows are built: IOPDDL K, M
    and S, 1.6-3.2 M, paid 1 s for a problem too large to solve whole)."""
    found = _followers(instance)
    if found is None:
        return None
    members, picks = found
    group_of, row_of = np.zeros(instance.nodes, dtype=np.int64), np.zeros(instance.nodes, dtype=np.int64)
    for g, nodes in enumerate(members):
        group_of[nodes], row_of[nodes] = g, np.arange(len(nodes))
    if at_most_pairs is not None and _pairs_at_most(instance, group_of, picks) > at_most_pairs:
        return None
    exchange, between = _costs(instance, members, picks, group_of, row_of)
    keep = [costs < FORBIDDEN for costs in exchange]
    if not all(k.any() for k in keep):
        return None
    picks = [p[:, k] for p, k in zip(picks, keep)]
    edges = tuple(Edge(a, b, costs[keep[a]][:, keep[b]]) for (a, b), costs in sorted(between.items()))
    limits = () if instance.usage_limit is None else (Limit("usage", 1, 0, instance.usage_limit),)
    table = _table(instance, members, picks, times, constant, varying)
    problem = Problem(candidate_counts=tuple(p.shape[1] for p in picks), input_choice=(0,) * len(members),
                      group_sizes=(0,) * len(members), rows=TableRows(table, times),
                      exchange=tuple(tuple(costs[k].tolist()) for costs, k in zip(exchange, keep)), limits=limits,
                      steps_total=len(times), edges=edges)
    return Merged(problem, tuple(members), tuple(picks))


def _capped_sum(values: np.ndarray, axis: int = 0) -> np.ndarray:
    """The sum along `axis` of costs each at most FORBIDDEN, FORBIDDEN where any is (no int64 wraps)."""
    forbidden = (values >= FORBIDDEN).any(axis=axis)
    return np.where(forbidden, FORBIDDEN, np.minimum(np.where(values >= FORBIDDEN, 0, values).sum(axis=axis),
                                                     FORBIDDEN))


def _pairs_at_most(instance, group_of: np.ndarray, picks: list[np.ndarray]) -> int:
    """The pairs of candidates of every two groups an edge joins, each two counted once: at least the merged
    problem's pair booleans (A: 59,630 for 58,462)."""
    counts = np.array([p.shape[1] for p in picks], dtype=np.int64)
    a, b = group_of[instance.edge_nodes[:, 0]], group_of[instance.edge_nodes[:, 1]]
    apart = a != b
    joined = np.unique(np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1)[apart], axis=0).reshape(-1, 2)
    return int((counts[joined[:, 0]] * counts[joined[:, 1]]).sum())


def _costs(instance, members, picks, group_of, row_of) -> tuple[list[np.ndarray], dict[tuple[int, int], np.ndarray]]:
    """(per group, per candidate: its members' costs and the edges within it; per pair of groups an edge joins, the
    lower first, their members' edges summed per pair of candidates)."""
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
    return exchange, between


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

"""Model reduction, before a solver sees the problem: exact pairwise reductions, then dominated candidates dropped.

Pairwise (`pairwise`), each exact and repeated until nothing changes: a candidate that is forbidden on its own, or
whose every pair on some edge is, is dropped (no choice may make it); edges between the same two groups are one
matrix, their sum; an edge with one candidate left on a side, or whose matrix separates (`costs[i, j] == r[i] +
c[j]` for every pair, none forbidden, tested in integers), becomes exchange of its groups' candidates. What is left
are edges that need pair variables. A group whose input candidate is dropped changes whatever it picks: its values
count as a constant, left out.

Dominance (`dominance`): candidate `d` dominates `c` when, at every row the group is live at, `d` has no more
standard and no more interleaved bytes, on each of the group's edges no dearer a pair with any neighbour candidate,
and no more (exchange bytes, changed values) in that order (the objective's later terms). Every budget limit weighs
both classes non-negatively, so swapping `c` for `d` never breaks a budget nor raises any term nor makes a forbidden
pair: an optimum survives. Of identical candidates the lowest index stays. The input's candidate always stays (the
changed-values term counts against it). At 10k values about two thirds of the candidates go (stride variants with
equal bytes and dearer exchange).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from ipuplan.model.problem import FORBIDDEN, Edge, Problem, TableRows, TermTable, ranges, row_steps
from ipuplan.solvers.construct import flat_tie_ranks
from ipuplan.solvers.result import Progress, SolveResult, SolverSettings, SolveStatus, model_size


@dataclass(frozen=True)
class Reduced:
    problem: Problem
    kept: tuple[np.ndarray, ...]
    """Per group, the original index of each kept candidate."""
    before: int
    """Candidates before the reduction."""
    infeasible: bool = False
    """Some group has no candidate left that may be chosen: no choice is valid (`problem` is then the original)."""

    @property
    def dropped(self) -> int:
        return self.before - sum(self.problem.candidate_counts)

    def lift(self, choice: tuple[int, ...]) -> tuple[int, ...]:
        """A choice of the reduced problem as indices of the original candidates."""
        return tuple(int(kept[c]) for kept, c in zip(self.kept, choice))

    def lowered(self, choice: tuple[int, ...]) -> tuple[int, ...] | None:
        """A choice of the original candidates as indices of the kept ones; None when one of them was dropped."""
        found = []
        for kept, c in zip(self.kept, choice):
            at = np.flatnonzero(kept == c)
            if not len(at):
                return None
            found.append(int(at[0]))
        return tuple(found)

    def then(self, second: Reduced) -> Reduced:
        """This reduction followed by `second` (a reduction of this one's problem)."""
        return Reduced(second.problem, tuple(first[kept] for first, kept in zip(self.kept, second.kept)), self.before,
                       second.infeasible)


def terms_by_group(table: TermTable, groups: int) -> list[np.ndarray]:
    """Per group, its distinct terms."""
    order = np.argsort(table.group, kind="stable")
    bounds = np.searchsorted(table.group[order], np.arange(groups + 1))
    return [order[bounds[g]:bounds[g + 1]] for g in range(groups)]


DOMINANCE_BATCH = 1 << 24
"""Comparisons (groups x rows x candidates x candidates) one batch of `_kept` makes at most."""


def _kept(problem: Problem) -> tuple[np.ndarray, ...]:
    """Per group, its undominated candidates (module docstring): the groups of one candidate count compared at once,
    in batches (IOPDDL A: one call per group took 2 s). `d` beats `c` when it is no more on every row the group is
    compared on (`_compared_rows`) and not identical, or identical with a lower index; the input's candidate stays."""
    kept = [np.zeros(0, dtype=np.int64)] * problem.groups
    inputs = np.asarray(problem.input_choice, dtype=np.int64)
    for groups, values in _compared_rows(problem).values():
        for g, survivors in _undominated_groups(groups, values, inputs):
            kept[g] = survivors
    return tuple(kept)


def _compared_rows(problem: Problem) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per candidate count, the distinct rows the candidates of each group of that count are compared on: (each row's
    group, ascending; the rows, a column per candidate). A group's rows are its terms' standard and interleaved bytes,
    per edge its pair costs with each neighbour candidate, and its tie ranks (`tie_ranks`: the objective's later
    terms)."""
    table, ties = problem.table, flat_tie_ranks(problem)
    pieces: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}

    def add(groups: np.ndarray, values: np.ndarray) -> None:
        pieces.setdefault(values.shape[1], []).append((groups, values.astype(np.int64, copy=False)))

    counts = np.asarray(problem.candidate_counts, dtype=np.int64)
    for count in np.unique(counts).tolist():
        terms = np.flatnonzero(table.counts == count)
        at = table.start[terms][:, None] + np.arange(count)
        add(table.group[terms], table.standard[at])
        add(table.group[terms], table.interleaved[at])
        groups = np.flatnonzero(counts == count)
        add(groups, ties[problem.candidate_starts[groups][:, None] + np.arange(count)])
    shaped: dict[tuple[int, int], list[Edge]] = {}
    for edge in problem.edges:
        shaped.setdefault(edge.costs.shape, []).append(edge)
    for (rows, columns), edges in shaped.items():
        costs = np.stack([edge.costs for edge in edges])
        add(np.repeat([edge.a for edge in edges], columns), costs.transpose(0, 2, 1).reshape(-1, rows))
        add(np.repeat([edge.b for edge in edges], rows), costs.reshape(-1, columns))
    found = {}
    for count, parts in pieces.items():
        # a row a group has twice decides nothing more (IOPDDL A: 400 k rows of nine candidates, half repeated)
        distinct = _distinct_rows(np.column_stack([np.concatenate([g for g, _ in parts]),
                                                   np.concatenate([v for _, v in parts])]))
        found[count] = (distinct[:, 0], distinct[:, 1:])
    return found


def _distinct_rows(matrix: np.ndarray) -> np.ndarray:
    """The distinct rows of `matrix`, in order of their first column, then the next, ... (as `np.unique(axis=0)`, which
    compares rows as bytes and took 3.8 s on IOPDDL A)."""
    ordered = matrix[np.lexsort(matrix.T[::-1])]
    new = np.ones(len(ordered), dtype=bool)
    new[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    return ordered[new]


def _undominated_groups(groups: np.ndarray, values: np.ndarray,
                        inputs: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(group, its undominated candidates) for every group among `groups` (each row's, ascending), in batches of
    groups with about as many rows (fewest first), each padded with rows of zeros (equal everywhere: no row decides)."""
    distinct, first, heights = np.unique(groups, return_index=True, return_counts=True)
    slot = np.arange(len(groups)) - np.repeat(first, heights)
    order = np.argsort(heights, kind="stable")
    rank = np.empty(len(distinct), dtype=np.int64)
    rank[order] = np.arange(len(distinct))
    position = np.repeat(np.arange(len(distinct)), heights)  # each row's group among `distinct`
    by_rank = np.argsort(rank[position], kind="stable")
    row_bounds = np.concatenate([[0], np.cumsum(heights[order])])
    count = values.shape[1]
    at = 0
    while at < len(order):
        ends = np.arange(at + 1, len(order) + 1)
        end = at + max(1, int(np.searchsorted((ends - at) * heights[order[ends - 1]] * count * count, DOMINANCE_BATCH,
                                              side="right")))
        members = order[at:end]
        rows = by_rank[row_bounds[at]:row_bounds[end]]
        laid = np.zeros((len(members), int(heights[members].max()), count), dtype=np.int64)
        laid[rank[position[rows]] - at, slot[rows]] = values[rows]
        beaten = _beaten_once_per_block(laid)
        beaten[np.arange(len(members)), inputs[distinct[members]]] = False
        # every member's survivors at once, then cut per member (a call per group was 0.07 s at 50k values)
        survivors = np.nonzero(~beaten)[1]
        yield from zip(distinct[members].tolist(), np.split(survivors, np.cumsum(count - beaten.sum(axis=1))[:-1]))
        at = end


def _beaten_once_per_block(laid: np.ndarray) -> np.ndarray:
    """`_beaten(laid)`, worked out once per distinct block (a group's rows x candidates): a group's answer is its
    block's alone, and an unrolled program repeats its groups' blocks (285 copies of some 70 at 50k values)."""
    leaders, at = np.unique(_first_alike(laid), return_inverse=True)
    return _beaten(laid[leaders])[at]


def _first_alike(laid: np.ndarray) -> np.ndarray:
    """Per group of `laid`, the first group whose block is identical to its own: the first of those whose blocks hash
    alike, the blocks then compared in full (a group whose hash meets a different block leads itself)."""
    flat = laid.reshape(len(laid), -1)
    _, first, inverse = np.unique(_block_hashes(flat), return_index=True, return_inverse=True)
    leader = first[inverse]
    return np.where((flat == flat[leader]).all(axis=1), leader, np.arange(len(laid)))


def _block_hashes(flat: np.ndarray) -> np.ndarray:
    """Per row of `flat` (int64, C order), a hash: its figures read as unsigned, weighted by fixed odd 64-bit numbers
    and summed, modulo 2^64 (equal rows hash alike; `_first_alike` compares those in full)."""
    weights = np.random.default_rng(0).integers(1, 1 << 63, flat.shape[1], dtype=np.uint64) | np.uint64(1)
    return flat.view(np.uint64) @ weights


def _beaten(laid: np.ndarray) -> np.ndarray:
    """Per group (of `laid`: groups x rows x candidates), the candidates another beats: no more than it everywhere and
    not identical (no more both ways), or identical with a lower index."""
    no_more = _no_more(laid)
    equal = no_more & no_more.transpose(0, 2, 1)
    return (no_more & ~equal).any(axis=1) | np.triu(equal, 1).any(axis=1)


def _no_more(laid: np.ndarray, head: int = 8) -> np.ndarray:
    """[group, i, j]: whether candidate i is no more than candidate j on every row. The first `head` rows rule out
    most pairs; the other rows are read for the pairs left only (IOPDDL A's groups of 114-129 candidates have some
    150 distinct rows each)."""
    no_more = (laid[:, :head, :, None] <= laid[:, :head, None, :]).all(axis=1)
    rest = laid[:, head:, :]
    if not rest.shape[1]:
        return no_more
    group, i, j = np.nonzero(no_more & ~np.eye(laid.shape[2], dtype=bool))
    step = max(1, DOMINANCE_BATCH // (8 * rest.shape[1]))
    for at in range(0, len(group), step):
        g, a, b = group[at:at + step], i[at:at + step], j[at:at + step]
        fails = ~(rest[g, :, a] <= rest[g, :, b]).all(axis=1)
        no_more[g[fails], a[fails], b[fails]] = False
    return no_more


def _kept_table(table: TermTable, kept: tuple[np.ndarray, ...]) -> TermTable:
    """The table over the kept candidates: the same spans (and occurrences, when laid out), each term narrowed."""
    flat, starts, counts = _laid_flat(kept)
    lengths = counts[table.group] if len(table.group) else np.zeros(0, dtype=np.int64)
    picked = np.repeat(table.start, lengths) + flat[ranges(starts[table.group], lengths)] if len(lengths) else lengths
    return table.with_candidates(np.cumsum(lengths) - lengths, table.standard[picked], table.interleaved[picked])


def _laid_flat(kept: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every group's kept candidates end to end, where each group's begin, and how many each keeps."""
    counts = np.fromiter(map(len, kept), dtype=np.int64, count=len(kept))
    flat = np.concatenate(kept).astype(np.int64) if len(kept) else np.zeros(0, dtype=np.int64)
    return flat, np.cumsum(counts) - counts, counts


def _narrowed(problem: Problem, kept: tuple[np.ndarray, ...], **fields) -> Problem:
    """The problem over the `kept` candidates of each group (rows, table, exchange, input, edges narrowed), `fields`
    replaced after that. Laid flat: a dict and a tuple per group took 0.15 s of 0.22 at 50k values."""
    table = _kept_table(problem.table, kept)
    flat, starts, counts = _laid_flat(kept)
    owner = np.repeat(np.arange(len(kept)), counts)
    picked = problem.flat_exchange[problem.candidate_starts[owner] + flat].tolist()
    # the input's place among its group's kept candidates (ascending), 0 where it was dropped
    span = max(problem.candidate_counts, default=0) + 1
    keys, wanted = owner * span + flat, np.arange(len(kept)) * span + np.array(problem.input_choice, dtype=np.int64)
    at = np.minimum(np.searchsorted(keys, wanted), max(len(keys) - 1, 0))
    found = (keys[at] == wanted) if len(keys) else np.zeros(len(kept), dtype=bool)
    # the narrowed table is the rows' table: no second pass over every term
    return problem.with_table(
        table, candidate_counts=tuple(counts.tolist()), rows=TableRows(table, row_steps(problem.rows)),
        input_choice=tuple(np.where(found, at - starts, 0).tolist()),
        exchange=tuple(tuple(picked[a:a + n]) for a, n in zip(starts.tolist(), counts.tolist())),
        edges=tuple(_narrowed_edge(e, kept[e.a], kept[e.b]) for e in problem.edges), **fields)


def _narrowed_edge(edge: Edge, rows: np.ndarray, columns: np.ndarray) -> Edge:
    if (len(rows), len(columns)) == edge.costs.shape:  # kept whole (candidates are kept in order)
        return edge
    return Edge(edge.a, edge.b, edge.costs[np.ix_(rows, columns)])


def dominance(problem: Problem) -> Reduced:
    """The problem over the undominated candidates, and the map back to the original indices."""
    kept = _kept(problem)
    return Reduced(_narrowed(problem, kept), kept, sum(problem.candidate_counts))


def reduce(problem: Problem) -> Reduced:
    """The exact pairwise reductions, then the undominated candidates; the map back to the original indices."""
    exact = pairwise(problem)
    return exact if exact.infeasible else exact.then(dominance(exact.problem))


def _merged_edges(problem: Problem) -> dict[tuple[int, int], np.ndarray]:
    """The edges by their two groups (lower index first), those between the same two groups summed; a forbidden
    pair stays forbidden (at FORBIDDEN exactly, so that sums stay within int64)."""
    merged: dict[tuple[int, int], np.ndarray] = {}
    for edge in problem.edges:
        key, costs = ((edge.a, edge.b), edge.costs) if edge.a < edge.b else ((edge.b, edge.a), edge.costs.T)
        merged[key] = _priced_sum(merged[key], costs) if key in merged else np.minimum(costs, FORBIDDEN)
    return merged


def _priced_sum(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Costs added, FORBIDDEN where either is."""
    return np.where((first >= FORBIDDEN) | (second >= FORBIDDEN), FORBIDDEN, first + second)


def _separated(costs: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(r, c) with `costs[i, j] == r[i] + c[j]` for every pair, r the rows' least (so both are no less than the
    least cost); None when the matrix does not separate or forbids a pair (a forbidden pair is not a sum)."""
    if (costs >= FORBIDDEN).any():
        return None
    rows = costs.min(axis=1)
    columns = costs[0] - rows[0]
    return (rows, columns) if np.array_equal(costs, rows[:, None] + columns[None, :]) else None


class _Pairwise:
    """The working state of `pairwise`, over the original candidate indices: which may still be chosen, each
    candidate's exchange, and the edges not yet made exchange."""

    def __init__(self, problem: Problem) -> None:
        self.exchange = [np.minimum(np.asarray(costs, dtype=np.int64), FORBIDDEN) for costs in problem.exchange]
        self.alive = [costs < FORBIDDEN for costs in self.exchange]
        self.edges = _merged_edges(problem)
        self.kept_edges: dict[tuple[int, int], tuple[int, int]] = {}
        """Edges found to need pair variables, with their sides' candidates left then: while those counts stand
        (candidates are only ever dropped), the edge needs them still."""

    def drop_forbidden(self) -> None:
        """Drop candidates forbidden alone or on every pair of an edge, until none is. Only an edge with a forbidden
        pair can drop one (any pair of an edge without is allowed), and only after a candidate of one of its groups
        was dropped can it drop another: an edge is read again only then (a pass over every edge until none dropped
        anything took 3.4 s on IOPDDL A)."""
        for g, costs in enumerate(self.exchange):
            self.alive[g] &= costs < FORBIDDEN
        forbidding = [(key, costs < FORBIDDEN) for key, costs in self.edges.items() if (costs >= FORBIDDEN).any()]
        touching: dict[int, list[int]] = {}
        for k, ((a, b), _) in enumerate(forbidding):
            touching.setdefault(a, []).append(k)
            touching.setdefault(b, []).append(k)
        waiting, pending = deque(range(len(forbidding))), set(range(len(forbidding)))
        while waiting:
            k = waiting.popleft()
            pending.discard(k)
            (a, b), allowed_pairs = forbidding[k]
            allowed = allowed_pairs & self.alive[a][:, None] & self.alive[b][None, :]
            for g, usable in ((a, allowed.any(axis=1)), (b, allowed.any(axis=0))):
                if (self.alive[g] & ~usable).any():
                    self.alive[g] &= usable
                    again = [other for other in touching[g] if other not in pending]
                    waiting.extend(again)
                    pending.update(again)

    def unary_edges(self) -> bool:
        """Make exchange of every edge with one candidate left on a side or a matrix that separates; whether any."""
        made = False
        # per group, its candidates left: counted once a call, listed once when first needed (an edge kept with the
        # same counts is passed over without either: most of them, on the second call)
        counts = [int(np.count_nonzero(alive)) for alive in self.alive]
        listed: dict[int, np.ndarray] = {}
        for (a, b), costs in list(self.edges.items()):
            if self.kept_edges.get((a, b)) == (counts[a], counts[b]):
                continue
            rows = listed[a] if a in listed else listed.setdefault(a, np.flatnonzero(self.alive[a]))
            columns = listed[b] if b in listed else listed.setdefault(b, np.flatnonzero(self.alive[b]))
            alive = costs[rows][:, columns]
            if len(rows) == 1 or len(columns) == 1:
                split = (alive.min(axis=1), np.zeros(len(columns), np.int64)) if len(columns) == 1 else (
                    np.zeros(1, np.int64), alive[0])
            else:
                split = _separated(alive)
            if split is None:
                self.kept_edges[(a, b)] = (len(rows), len(columns))
                continue
            self.exchange[a][rows] = _priced_sum(self.exchange[a][rows], split[0])
            self.exchange[b][columns] = _priced_sum(self.exchange[b][columns], split[1])
            del self.edges[(a, b)]
            made = True
        return made


def pairwise(problem: Problem) -> Reduced:
    """The problem after the exact pairwise reductions (module docstring), and the map back; the problem itself
    when there is nothing to reduce, marked infeasible when some group has no candidate left."""
    counts = problem.candidate_counts
    if not problem.edges and max(map(max, problem.exchange), default=0) < FORBIDDEN:
        return Reduced(problem, tuple(np.arange(n) for n in counts), sum(counts))
    state = _Pairwise(problem)
    while True:
        state.drop_forbidden()
        if not all(alive.any() for alive in state.alive):
            return Reduced(problem, tuple(np.arange(n) for n in counts), sum(counts), infeasible=True)
        if not state.unary_edges():
            break
    kept = tuple(np.flatnonzero(alive) for alive in state.alive)
    dropped_input = [not alive[c] for alive, c in zip(state.alive, problem.input_choice)]
    rebuilt = problem.with_table(problem.table, exchange=tuple(tuple(costs.tolist()) for costs in state.exchange),
                                 edges=tuple(Edge(a, b, costs) for (a, b), costs in state.edges.items()))
    smaller = _narrowed(rebuilt, kept, group_sizes=tuple(
        0 if gone else size for size, gone in zip(problem.group_sizes, dropped_input)))
    return Reduced(smaller, kept, sum(counts))


def on_undominated(solve_reduced: Callable[..., SolveResult]) -> Callable[..., SolveResult]:
    """A backend's `solve` from its solve of a reduced problem: `solve_reduced` sees the problem after the exact
    pairwise reductions, over the undominated candidates only (`reduce`); its choice comes back as indices of the
    problem's candidates, its exchange and changed values as the problem's. When some group has no candidate that
    may be chosen, the answer is infeasible without a solve."""

    def solve(problem: Problem, settings: SolverSettings, progress: Progress | None = None, **options) -> SolveResult:
        reduced = reduce(problem)
        if reduced.infeasible:
            return SolveResult(SolveStatus.INFEASIBLE, problem.input_choice, None, problem.lower_bound(),
                               solve_seconds=0.0, first_solution_seconds=None, objective=settings.objective,
                               **model_size(problem))
        start = None if settings.start is None else reduced.lowered(settings.start)
        # the reduction took its time out of the limit (15-20 s on IOPDDL A), unless the limit counts units
        limit = settings.time_limit if settings.deterministic else settings.wall(settings.time_limit)
        result = solve_reduced(reduced.problem, replace(settings, start=start, time_limit=limit), progress, **options)
        if result.peak is None:
            return replace(result, choice=problem.input_choice, candidates_dropped=reduced.dropped)
        choice = reduced.lift(result.choice)
        return replace(result, choice=choice, candidates_dropped=reduced.dropped,
                       exchange_bytes=problem.exchange_of(choice), changed_values=problem.changed_of(choice))

    return solve

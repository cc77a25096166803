"""Constructive solution: a complete choice in (near) linear time, so a solve never ends with nothing.

Each group starts at its smallest candidate (the least bytes summed over the rows it is live at,
then the least exchange and changes); a greedy repair then moves one group at a time off the row
most over budget (or the peak row), scoring every candidate of a group at once with numpy over the
rows that group touches. Deterministic: a move cap, no clock. The CP-SAT backend hints it, and
skips the solve when it provably meets every term's bound.
"""

from __future__ import annotations

import numpy as np

from ipuplan.model.objective import Objective
from ipuplan.model.problem import Problem, Usage

MOVES = 4000
"""Repair moves at most: a deterministic cap (no clock); each move costs a sort of the rows' totals."""


class GroupRows:
    """Per group, the rows it is live at and its bytes per (row, candidate) in each class, built when first asked."""

    def __init__(self, problem: Problem) -> None:
        self.table, self.counts = problem.table, problem.candidate_counts
        groups = self.table.group[self.table.term]
        self.order = np.argsort(groups, kind="stable")
        self.bounds = np.searchsorted(groups[self.order], np.arange(problem.groups + 1))
        self.built: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def of(self, g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, standard rows x candidates, interleaved rows x candidates) of group `g`."""
        if g not in self.built:
            occurrences = self.order[self.bounds[g]:self.bounds[g + 1]]
            at = self.table.start[self.table.term[occurrences]][:, None] + np.arange(self.counts[g])
            self.built[g] = (self.table.row[occurrences], self.table.standard[at], self.table.interleaved[at])
        return self.built[g]


def tie_costs(problem: Problem) -> list[np.ndarray]:
    """Per group, per candidate: exchange x weight + changed values (the objective's terms after the peak)."""
    return [np.array(costs, dtype=np.int64) * problem.tie_weight + np.where(np.arange(len(costs)) == original, 0, size)
            for costs, original, size in zip(problem.exchange, problem.input_choice, problem.group_sizes)]


def tie_bound(problem: Problem) -> int:
    """The least exchange x weight + changed values any choice can have: each group at its cheapest."""
    return int(sum(int(costs.min()) for costs in tie_costs(problem)))


def tie_value(problem: Problem, choice: tuple[int, ...]) -> int:
    return int(sum(int(costs[c]) for costs, c in zip(tie_costs(problem), choice)))


def summed_bytes(problem: Problem) -> list[np.ndarray]:
    """Per group, per candidate: its bytes summed over every row it is live at."""
    table = problem.table
    offsets = np.cumsum([0, *problem.candidate_counts])
    live = np.bincount(table.term, minlength=table.terms)
    counts = table.counts
    candidate = np.arange(len(table.standard)) - np.repeat(table.start, counts)
    where = np.repeat(offsets[table.group], counts) + candidate
    weights = (table.standard + table.interleaved) * np.repeat(live, counts)
    sums = np.bincount(where, weights=weights, minlength=int(offsets[-1])).astype(np.int64)
    return [sums[offsets[g]:offsets[g + 1]] for g in range(problem.groups)]


def _smallest(problem: Problem, objective: Objective) -> list[int]:
    """Per group its smallest candidate (with `fit` the cheapest), ties to the cheaper, then the lower index."""
    ties = tie_costs(problem)
    choice = []
    for size, tie in zip(summed_bytes(problem), ties):
        keys = (size, tie) if objective == Objective.PEAK else (tie, size)
        choice.append(int(np.lexsort(tuple(reversed(keys)))[0]))
    return choice


class Standing:
    """One move's view of every row: the totals' distinct values with their counts, and the total excess."""

    def __init__(self, problem: Problem, standard: np.ndarray, interleaved: np.ndarray) -> None:
        self.total = standard + interleaved
        self.over = Usage(standard, interleaved).excess(problem.limits)
        self.values, self.counts = np.unique(self.total, return_counts=True)
        self.excess = int(self.over.sum())

    @property
    def key(self) -> tuple[int, int, int]:
        """(total excess, peak, rows at the peak): what a move must lower."""
        return self.excess, int(self.values[-1]), int(self.counts[-1])

    def top_without(self, rows: np.ndarray) -> tuple[int, int]:
        """The highest total of the rows not in `rows`, and how many rows reach it (-1, 0 when none is left)."""
        taken: dict[int, int] = {}
        for value in self.total[rows].tolist():
            taken[value] = taken.get(value, 0) + 1
        for k in range(len(self.values) - 1, -1, -1):
            left = int(self.counts[k]) - taken.get(int(self.values[k]), 0)
            if left:
                return int(self.values[k]), left
        return -1, 0


def _scores(problem: Problem, group: tuple[np.ndarray, np.ndarray, np.ndarray], current: int, standard: np.ndarray,
            interleaved: np.ndarray, standing: Standing) -> np.ndarray:
    """Per candidate of the group: (total excess, peak, rows at that peak) after switching it there, as rows."""
    rows, group_standard, group_interleaved = group
    new_std = standard[rows][:, None] - group_standard[:, [current]] + group_standard
    new_il = interleaved[rows][:, None] - group_interleaved[:, [current]] + group_interleaved
    new_total = new_std + new_il
    top, at_top = standing.top_without(rows)
    peak = np.maximum(top, new_total.max(axis=0, initial=-1))
    at_peak = np.where(peak == top, at_top, 0) + (new_total >= peak[None, :]).sum(axis=0)
    violation = standing.excess - int(standing.over[rows].sum()) + Usage(new_std, new_il).excess(problem.limits).sum(axis=0)
    return np.stack([violation, peak, at_peak])


def repair(problem: Problem, choice: list[int], index: GroupRows, moves: int = MOVES) -> list[int]:
    """Greedy single switches off the focus row while (excess, peak, rows at the peak) strictly drops."""
    choice = list(choice)
    usage = problem.usage(choice)
    standard, interleaved = usage.standard.copy(), usage.interleaved.copy()
    for _ in range(moves):
        standing = Standing(problem, standard, interleaved)
        focus = int(np.argmax(standing.over)) if standing.excess else int(np.argmax(standing.total))
        best = (standing.key, None)
        for g, _, _ in problem.rows[focus].terms:
            scores = _scores(problem, index.of(g), choice[g], standard, interleaved, standing)
            c = int(np.lexsort(scores[::-1])[0])
            key = tuple(int(x) for x in scores[:, c])
            if key < best[0]:
                best = (key, (g, c))
        if best[1] is None:
            break
        g, c = best[1]
        rows, group_standard, group_interleaved = index.of(g)
        standard[rows] += group_standard[:, c] - group_standard[:, choice[g]]
        interleaved[rows] += group_interleaved[:, c] - group_interleaved[:, choice[g]]
        choice[g] = c
    return choice


def construct(problem: Problem, objective: Objective = Objective.PEAK, moves: int = MOVES) -> tuple[int, ...]:
    """Every group at its smallest candidate, then repaired greedily across the rows."""
    if not problem.groups:
        return ()
    return tuple(repair(problem, _smallest(problem, objective), GroupRows(problem), moves))

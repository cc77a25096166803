"""Constructive solution: a complete choice in (near) linear time, so a solve never ends with nothing.

Each group starts at its smallest candidate (the least bytes summed over the rows it is live at,
then the least exchange and changes); a greedy repair then moves one group at a time off the row
most over budget (or the peak row), scoring every candidate of a group at once with numpy over the
rows that group touches. Deterministic: a move cap, no clock. The CP-SAT backend hints it, and
skips the solve when it provably meets every term's bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ipuplan.costs import Objective, Problem, Usage

MOVES = 4000
"""Repair moves at most: each costs O(rows) numpy work, so this caps the repair near a second at 50k values."""


@dataclass(frozen=True)
class GroupRows:
    """Per group: the row indices it is live at and its bytes per (row, candidate) in each class."""

    rows: tuple[np.ndarray, ...]
    standard: tuple[np.ndarray, ...]
    interleaved: tuple[np.ndarray, ...]


def group_rows(problem: Problem) -> GroupRows:
    """The transpose of the step rows: one pass over every term."""
    rows: list[list[int]] = [[] for _ in range(problem.groups)]
    standard: list[list[np.ndarray]] = [[] for _ in range(problem.groups)]
    interleaved: list[list[np.ndarray]] = [[] for _ in range(problem.groups)]
    for r, row in enumerate(problem.rows):
        for g, s, i in row.terms:
            rows[g].append(r)
            standard[g].append(s)
            interleaved[g].append(i)

    def stacked(parts: list[np.ndarray], g: int) -> np.ndarray:
        return np.array(parts, dtype=np.int64) if parts else np.zeros((0, problem.candidate_counts[g]), dtype=np.int64)

    return GroupRows(tuple(np.array(r, dtype=np.int64) for r in rows),
                     tuple(stacked(s, g) for g, s in enumerate(standard)),
                     tuple(stacked(i, g) for g, i in enumerate(interleaved)))


def tie_costs(problem: Problem) -> list[np.ndarray]:
    """Per group, per candidate: exchange x weight + changed values (the objective's terms after the peak)."""
    weight = sum(problem.group_sizes) + 1
    return [np.array(costs, dtype=np.int64) * weight + np.where(np.arange(len(costs)) == original, 0, size)
            for costs, original, size in zip(problem.exchange, problem.input_choice, problem.group_sizes)]


def tie_bound(problem: Problem) -> int:
    """The least exchange x weight + changed values any choice can have: each group at its cheapest."""
    return int(sum(int(costs.min()) for costs in tie_costs(problem)))


def tie_value(problem: Problem, choice: tuple[int, ...]) -> int:
    return int(sum(int(costs[c]) for costs, c in zip(tie_costs(problem), choice)))


def _smallest(index: GroupRows, problem: Problem, objective: Objective) -> list[int]:
    """Per group its smallest candidate (with `fit` the cheapest), ties to the cheaper, then the lower index."""
    ties = tie_costs(problem)
    choice = []
    for g in range(problem.groups):
        size = (index.standard[g] + index.interleaved[g]).sum(axis=0)
        keys = (size, ties[g]) if objective == Objective.PEAK else (ties[g], size)
        choice.append(int(np.lexsort(tuple(reversed(keys)))[0]))
    return choice


def _usage(problem: Problem, index: GroupRows, choice: list[int]) -> tuple[np.ndarray, np.ndarray]:
    standard = np.array([row.standard for row in problem.rows], dtype=np.int64)
    interleaved = np.array([row.interleaved for row in problem.rows], dtype=np.int64)
    for g, c in enumerate(choice):
        np.add.at(standard, index.rows[g], index.standard[g][:, c])
        np.add.at(interleaved, index.rows[g], index.interleaved[g][:, c])
    return standard, interleaved


def _over(problem: Problem, standard: np.ndarray, interleaved: np.ndarray) -> np.ndarray:
    """Bytes over the budgets per entry (rows, or rows x candidates)."""
    return Usage(standard, interleaved).excess(problem.limits)


def _scores(problem: Problem, index: GroupRows, g: int, current: int, standard: np.ndarray,
            interleaved: np.ndarray) -> np.ndarray:
    """Per candidate of `g`: (total excess, peak, rows at that peak) after switching `g` to it, as rows."""
    rows = index.rows[g]
    new_std = standard[rows][:, None] - index.standard[g][:, [current]] + index.standard[g]
    new_il = interleaved[rows][:, None] - index.interleaved[g][:, [current]] + index.interleaved[g]
    total = standard + interleaved
    others = total.copy()
    others[rows] = -1
    others_over = _over(problem, standard, interleaved)
    others_over[rows] = 0
    new_total = new_std + new_il
    top = int(others.max(initial=0))
    peak = np.maximum(top, new_total.max(axis=0, initial=0))
    # The other rows reach a candidate's peak only when it equals their maximum: O(rows), not O(rows x candidates).
    at_peak = np.where(peak == top, int((others == top).sum()), 0) + (new_total >= peak[None, :]).sum(axis=0)
    violation = others_over.sum() + _over(problem, new_std, new_il).sum(axis=0)
    return np.stack([violation, peak, at_peak])


def repair(problem: Problem, choice: list[int], index: GroupRows, moves: int = MOVES) -> list[int]:
    """Greedy single switches off the focus row while (excess, peak, rows at the peak) strictly drops."""
    choice = list(choice)
    standard, interleaved = _usage(problem, index, choice)
    for _ in range(moves):
        over = _over(problem, standard, interleaved)
        focus = int(np.argmax(over)) if over.any() else int(np.argmax(standard + interleaved))
        total = standard + interleaved
        peak = int(total.max())
        best = ((int(over.sum()), peak, int((total >= peak).sum())), None)
        for g, _, _ in problem.rows[focus].terms:
            scores = _scores(problem, index, g, choice[g], standard, interleaved)
            c = int(np.lexsort(scores[::-1])[0])
            key = tuple(int(x) for x in scores[:, c])
            if key < best[0]:
                best = (key, (g, c))
        if best[1] is None:
            break
        g, c = best[1]
        rows = index.rows[g]
        np.add.at(standard, rows, index.standard[g][:, c] - index.standard[g][:, choice[g]])
        np.add.at(interleaved, rows, index.interleaved[g][:, c] - index.interleaved[g][:, choice[g]])
        choice[g] = c
    return choice


def construct(problem: Problem, objective: Objective = Objective.PEAK, moves: int = MOVES) -> tuple[int, ...]:
    """Every group at its smallest candidate, then repaired greedily across the rows."""
    if not problem.groups:
        return ()
    index = group_rows(problem)
    return tuple(repair(problem, _smallest(index, problem, objective), index, moves))

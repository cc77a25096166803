"""Model reduction: drop every candidate another candidate of its group dominates, before a solver sees it.

Candidate `d` dominates `c` when, at every row the group is live at, `d` has no more standard and no
more interleaved bytes, and `d` costs no more in exchange x weight + changed values (the objective's
later terms). Every budget limit weighs both classes non-negatively, so swapping `c` for `d` never
breaks a budget nor raises any term: an optimum survives. Of identical candidates the lowest index
stays. The input's candidate always stays (the changed-values term counts against it). At 10k values
about two thirds of the candidates go (stride variants with equal bytes and dearer exchange).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ipuplan.model.problem import Problem, StepRow, TermTable
from ipuplan.solvers.construct import tie_costs
from ipuplan.solvers.result import Progress, SolveResult, SolverSettings


@dataclass(frozen=True)
class Reduced:
    problem: Problem
    kept: tuple[np.ndarray, ...]
    """Per group, the original index of each kept candidate."""
    before: int
    """Candidates before the reduction."""

    @property
    def dropped(self) -> int:
        return self.before - sum(self.problem.candidate_counts)

    def lift(self, choice: tuple[int, ...]) -> tuple[int, ...]:
        """A choice of the reduced problem as indices of the original candidates."""
        return tuple(int(kept[c]) for kept, c in zip(self.kept, choice))


def undominated(standard: np.ndarray, interleaved: np.ndarray, ties: np.ndarray, keep: int) -> np.ndarray:
    """Indices of the candidates no other candidate dominates (rows x candidates matrices; `keep` always stays)."""
    both = np.unique(np.hstack([standard, interleaved]), axis=0) if len(standard) else np.zeros((0, 2 * len(ties)))
    count = len(ties)
    bytes_of = np.vstack([both[:, :count], both[:, count:]])  # rows of either class, candidates as columns
    no_more = (bytes_of[:, :, None] <= bytes_of[:, None, :]).all(axis=0) & (ties[:, None] <= ties[None, :])
    equal = (bytes_of[:, :, None] == bytes_of[:, None, :]).all(axis=0) & (ties[:, None] == ties[None, :])
    # d beats c: no more anywhere and not identical, or identical with a lower index.
    beaten = (no_more & ~equal).any(axis=0) | np.triu(equal, 1).any(axis=0)
    beaten[keep] = False
    return np.flatnonzero(~beaten)


def terms_by_group(table: TermTable, groups: int) -> list[np.ndarray]:
    """Per group, its distinct terms."""
    order = np.argsort(table.group, kind="stable")
    bounds = np.searchsorted(table.group[order], np.arange(groups + 1))
    return [order[bounds[g]:bounds[g + 1]] for g in range(groups)]


def _kept(problem: Problem) -> tuple[np.ndarray, ...]:
    """Per group, its undominated candidates; equal groups (the copies of an unrolled program) computed once."""
    table, ties = problem.table, tie_costs(problem)
    found: dict[tuple, np.ndarray] = {}
    kept = []
    for g, terms in enumerate(terms_by_group(table, problem.groups)):
        at = table.start[terms][:, None] + np.arange(problem.candidate_counts[g])
        standard, interleaved = table.standard[at], table.interleaved[at]
        key = (standard.shape, standard.tobytes(), interleaved.tobytes(), ties[g].tobytes(), problem.input_choice[g])
        if key not in found:
            found[key] = undominated(standard, interleaved, ties[g], problem.input_choice[g])
        kept.append(found[key])
    return tuple(kept)


def _kept_table(table: TermTable, kept: tuple[np.ndarray, ...]) -> TermTable:
    """The table over the kept candidates: the same occurrences, each distinct term narrowed."""
    at = [table.start[t] + kept[g] for t, g in enumerate(table.group)]
    counts = np.array([len(a) for a in at], dtype=np.int64)
    picked = np.concatenate(at) if at else np.zeros(0, dtype=np.int64)
    return replace(table, start=np.cumsum(counts) - counts, standard=table.standard[picked],
                   interleaved=table.interleaved[picked])


def _kept_rows(problem: Problem, table: TermTable) -> tuple[StepRow, ...]:
    terms = [(int(g), table.standard[start:start + count], table.interleaved[start:start + count])
             for g, start, count in zip(table.group, table.start, table.counts)]
    bounds = np.searchsorted(table.row, np.arange(len(problem.rows) + 1))
    return tuple(StepRow(row.step, row.standard, row.interleaved, tuple(terms[t] for t in table.term[a:b]))
                 for row, a, b in zip(problem.rows, bounds[:-1], bounds[1:]))


def reduce(problem: Problem) -> Reduced:
    """The problem over the undominated candidates, and the map back to the original indices."""
    kept = _kept(problem)
    table = _kept_table(problem.table, kept)
    where = [{int(c): k for k, c in enumerate(group)} for group in kept]
    smaller = replace(problem, candidate_counts=tuple(len(k) for k in kept), rows=_kept_rows(problem, table),
                      input_choice=tuple(where[g][c] for g, c in enumerate(problem.input_choice)),
                      exchange=tuple(tuple(problem.exchange[g][int(c)] for c in group) for g, group in enumerate(kept)))
    smaller.__dict__["table"] = table  # the narrowed table is the rows' table: no second pass over every term
    return Reduced(smaller, kept, sum(problem.candidate_counts))


def on_undominated(solve_reduced: Callable[..., SolveResult]) -> Callable[..., SolveResult]:
    """A backend's `solve` from its solve of a reduced problem: `solve_reduced` sees only the undominated
    candidates (`reduce`), and its choice comes back as indices of the problem's candidates."""

    def solve(problem: Problem, settings: SolverSettings, progress: Progress | None = None, **options) -> SolveResult:
        reduced = reduce(problem)
        result = solve_reduced(reduced.problem, settings, progress, **options)
        return replace(result, choice=reduced.lift(result.choice), candidates_dropped=reduced.dropped)

    return solve

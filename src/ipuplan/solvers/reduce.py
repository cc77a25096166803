"""Model reduction: drop every candidate another candidate of its group dominates, before a solver sees it.

Candidate `d` dominates `c` when, at every row the group is live at, `d` has no more standard and no
more interleaved bytes, and `d` costs no more in exchange x weight + changed values (the objective's
later terms). Every budget limit weighs both classes non-negatively, so swapping `c` for `d` never
breaks a budget nor raises any term: an optimum survives. Of identical candidates the lowest index
stays. The input's candidate always stays (the changed-values term counts against it). At 10k values
about two thirds of the candidates go (stride variants with equal bytes and dearer exchange).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ipuplan.costs import Problem, StepRow
from ipuplan.solvers.construct import group_rows, tie_costs


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


def reduce(problem: Problem) -> Reduced:
    """The problem over the undominated candidates, and the map back to the original indices."""
    index, ties = group_rows(problem), tie_costs(problem)
    kept = tuple(undominated(index.standard[g], index.interleaved[g], ties[g], problem.input_choice[g])
                 for g in range(problem.groups))
    rows = tuple(StepRow(row.step, row.standard, row.interleaved,
                         tuple((g, s[kept[g]], i[kept[g]]) for g, s, i in row.terms)) for row in problem.rows)
    where = [{int(c): k for k, c in enumerate(group)} for group in kept]
    smaller = replace(problem, candidate_counts=tuple(len(k) for k in kept), rows=rows,
                      input_choice=tuple(where[g][c] for g, c in enumerate(problem.input_choice)),
                      exchange=tuple(tuple(problem.exchange[g][int(c)] for c in group) for g, group in enumerate(kept)))
    return Reduced(smaller, kept, sum(problem.candidate_counts))

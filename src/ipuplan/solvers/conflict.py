"""Why budgets cannot be met: a minimal set of (step, budget) rows that no layout meets together.

XLA's auto-sharding answers infeasibility with an irreducible subset; so does this module. One
assumption literal per budget row that can be exceeded; CP-SAT's
`sufficient_assumptions_for_infeasibility` gives a core, and a deletion filter shrinks it until
dropping any one row makes the rest feasible. The assumption model runs with presolve off and
one worker (the CP-SAT 9.15 bug #5293 lives in presolve, on enforced byte-sized rows), and
nothing it says is taken on trust: the set is proven infeasible again by a plain model (no
enforcement literal), and for each row a layout meeting all the others is found by a plain
model and checked with exact integers. That layout also gives the least the row needs.
No solver value is read unless the solver has a solution.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ipuplan.model.problem import Limit, Problem
from ipuplan.solvers.cpsat import (
    SOLVED,
    STATUS,
    add_pairs,
    choice_variables,
    chosen_candidates,
    hint_choice,
    usage_expressions,
)
from ipuplan.solvers.linear import pair_columns
from ipuplan.solvers.ortools_import import cp_model
from ipuplan.solvers.result import SolveStatus

RAW_PEAK = Limit("raw peak", 1, 1, 0)
"""Standard + interleaved: what `lowest_peak` minimises (its bytes are unused)."""

Pair = tuple[int, int]
"""(index into problem.rows, index into problem.limits): one budget row."""


@dataclass(frozen=True)
class Least:
    """A minimum asked of CP-SAT: `low` is proven; `high` is what `choice` reaches, computed exactly
    (both None when no layout was found in time)."""

    low: int
    high: int | None = None
    choice: tuple[int, ...] | None = None

    @property
    def exact(self) -> bool:
        return self.high is not None and self.high == self.low


@dataclass(frozen=True)
class ConflictRow:
    row: int
    limit: int
    need: Least
    """The least this row's usage can be while every other row of the conflict holds (more than its bytes)."""


@dataclass(frozen=True)
class Conflict:
    rows: tuple[ConflictRow, ...]
    minimal: bool
    """Every row has a layout meeting all the others, checked with exact integers."""
    seconds: float


def _single_worker(seconds: float, presolve: bool = True) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = max(seconds, 0.05)
    solver.parameters.cp_model_presolve = presolve
    return solver


def _choice_model(problem: Problem, pairs):
    """The one-hot choices hinted at the input (where most budget rows hold), and the standard and
    interleaved expressions of the rows `pairs` name (only those: a conflict is a few rows of many)."""
    model = cp_model.CpModel()
    choose = choice_variables(model, problem.candidate_counts)
    first = np.cumsum([0, *problem.candidate_counts[:-1]], dtype=np.int64)
    add_pairs(model, pair_columns(problem, first), [v.index for row in choose for v in row])  # no forbidden pick
    hint_choice(model, choose, problem.input_choice)
    needed = sorted({r for r, _ in pairs})
    expressions = usage_expressions(choose, tuple(problem.rows[r] for r in needed))
    return model, choose, {r: (s, i) for r, (_, s, i) in zip(needed, expressions)}


def meets(problem: Problem, choice: tuple[int, ...], pairs) -> bool:
    """Exact integers: does `choice` meet every budget row of `pairs`?"""
    usage = problem.usage(choice)
    return all(problem.limits[k].usage(int(usage.standard[r]), int(usage.interleaved[r])) <= problem.limits[k].bytes
               for r, k in pairs)


def least(problem: Problem, measured: list[tuple[int, Limit]], held, seconds: float) -> Least | None:
    """The least max of the `measured` (row, limit) usages over layouts meeting the `held` rows; None when
    no layout meets them (proven). Plain rows, no enforcement literal."""
    model, choose, usage = _choice_model(problem, [*held, *measured])
    for r, k in held:
        model.add(problem.limits[k].usage(*usage[r]) <= problem.limits[k].bytes)
    top = problem.upper_bound() * 2 + 1
    worst = model.new_int_var(0, top, "worst")
    for r, limit in measured:
        model.add(limit.usage(*usage[r]) <= worst)
    model.minimize(worst)
    solver = _single_worker(seconds)
    status = STATUS[solver.solve(model)]
    if status == SolveStatus.INFEASIBLE:
        return None
    low = max(int(solver.best_objective_bound), 0)
    if status not in SOLVED:
        return Least(low)
    choice = chosen_candidates(solver, choose)
    exact = problem.usage(choice)
    high = max((limit.usage(int(exact.standard[r]), int(exact.interleaved[r])) for r, limit in measured), default=0)
    return Least(min(low, high), high, choice)


def violable(problem: Problem) -> list[Pair]:
    """Budget rows some layout can exceed (no other row can be part of a conflict), total rows first:
    the deletion filter tries to drop them first, so a conflict is told in class budgets where it can be."""
    pairs = []
    for k, limit in sorted(enumerate(problem.limits), key=lambda item: -(item[1].standard * item[1].interleaved)):
        _, highest = problem.table.row_bounds(limit.standard, limit.interleaved)
        pairs.extend((int(r), k) for r in np.flatnonzero(highest > limit.bytes))
    return pairs


def _unmeetable(problem: Problem, pairs: list[Pair]) -> Pair | None:
    """The first (row, limit) no layout meets on its own: every group at its cheapest candidate for the
    limit still exceeds it."""
    least = [problem.table.row_bounds(limit.standard, limit.interleaved)[0] for limit in problem.limits]
    return next(((r, k) for r, k in pairs if least[k][r] > problem.limits[k].bytes), None)


class _Assumptions:
    """The model with one assumption literal per violable row, asked again and again."""

    def __init__(self, problem: Problem, pairs: list[Pair]) -> None:
        self.model, _, usage = _choice_model(problem, pairs)
        self.literal = {}
        for r, k in pairs:
            self.literal[(r, k)] = self.model.new_bool_var(f"hold_r{r}_l{k}")
            limit = problem.limits[k]
            self.model.add(limit.usage(*usage[r]) <= limit.bytes).only_enforce_if(self.literal[(r, k)])
        self.pair_of = {lit.index: pair for pair, lit in self.literal.items()}

    def core(self, pairs: list[Pair], seconds: float) -> list[Pair] | None:
        """A subset of `pairs` that cannot hold together ([] when all can; None when unknown in time)."""
        self.model.clear_assumptions()
        self.model.add_assumptions([self.literal[p] for p in pairs])
        solver = _single_worker(seconds, presolve=False)
        status = STATUS[solver.solve(self.model)]
        if status in SOLVED:
            return []
        if status != SolveStatus.INFEASIBLE:
            return None
        found = {self.pair_of[index] for index in solver.sufficient_assumptions_for_infeasibility()}
        return [p for p in pairs if p in found]


def deletion_filter(problem: Problem, deadline: float) -> list[Pair] | None:
    """A minimal infeasible set of budget rows, by the solver's word (None: feasible or unknown in time).
    Once a core is known, whether a subset of it can hold depends on its rows alone: the filter asks a
    model of the core's rows, however many the problem has."""
    pairs = violable(problem)
    alone = _unmeetable(problem, pairs)
    # the solver's core is preferred (it tells class budgets where it can); a row no layout meets on its
    # own is a conflict of one that needs no solver, kept in hand in case the core takes too long
    share = (deadline - time.perf_counter()) / (3 if alone is not None else 1)
    current = _Assumptions(problem, pairs).core(pairs, share)
    if current is None and alone is not None:
        return [alone]
    if not current:
        return None
    asked = _Assumptions(problem, current)
    for candidate in list(current):
        if candidate not in current or time.perf_counter() >= deadline:
            continue
        smaller = asked.core([p for p in current if p != candidate], deadline - time.perf_counter())
        if smaller:
            current = smaller
    return current


def minimal_conflict(problem: Problem, seconds: float) -> Conflict | None:
    """A minimal set of budget rows no layout meets together, each with the least it needs while the others
    hold; None when the budgets can be met or nothing was proven within `seconds`."""
    started = time.perf_counter()
    deadline = started + seconds
    current = deletion_filter(problem, deadline)
    while current and least(problem, [], current, _left(deadline)) is None:
        rows = []
        for pair in current:
            others = [p for p in current if p != pair]
            need = least(problem, [(pair[0], problem.limits[pair[1]])], others, _left(deadline))
            if need is None:
                break  # the plain model proves the others conflict already: explain them alone
            rows.append(ConflictRow(pair[0], pair[1], need))
        else:
            minimal = all(_proves_needed(problem, row, current) for row in rows)
            return Conflict(tuple(rows), minimal, time.perf_counter() - started)
        current = others
    return None


def _left(deadline: float) -> float:
    return max(deadline - time.perf_counter(), 0.05)


def _proves_needed(problem: Problem, row: ConflictRow, conflict: list[Pair]) -> bool:
    """Exact integers: the row's layout meets every other row of the conflict and exceeds this one."""
    others = [p for p in conflict if p != (row.row, row.limit)]
    choice = row.need.choice
    return choice is not None and meets(problem, choice, others) and not meets(problem, choice, [(row.row, row.limit)])


def _all_pairs(problem: Problem, skip: int | None = None) -> list[Pair]:
    return [(r, k) for r in range(len(problem.rows)) for k in range(len(problem.limits)) if k != skip]


def least_budget(problem: Problem, limit_index: int, seconds: float) -> Least | None:
    """The least bytes limit `limit_index` needs for every row to be met, the other limits as they are;
    None when raising it alone is not enough."""
    limit = problem.limits[limit_index]
    measured = [(r, limit) for r in range(len(problem.rows))]
    return least(problem, measured, _all_pairs(problem, skip=limit_index), seconds)


def lowest_peak(problem: Problem, seconds: float) -> Least | None:
    """The lowest raw peak of any layout meeting the problem's limits (None: none meets them)."""
    return least(problem, [(r, RAW_PEAK) for r in range(len(problem.rows))], _all_pairs(problem), seconds)


@dataclass(frozen=True)
class LowestPeak:
    peak: Least | None
    within: tuple[str, ...]
    """The class budgets it was measured under: those the conflict does not involve."""


def lowest_peak_outside(problem: Problem, conflict: Conflict | None, seconds: float) -> LowestPeak:
    """The lowest raw peak under the class budgets the conflict leaves alone (what the total budget must
    hold, less its reserve); without budgets when those cannot be met either."""
    involved = {row.limit for row in conflict.rows} if conflict else set(range(len(problem.limits)))
    kept = tuple(limit for k, limit in enumerate(problem.limits)
                 if k not in involved and limit.standard * limit.interleaved == 0)
    if kept:
        peak = lowest_peak(problem.with_limits(kept), seconds / 2)
        if peak is not None:
            return LowestPeak(peak, tuple(limit.name for limit in kept))
    return LowestPeak(lowest_peak(problem.without_budgets(), seconds / 2), ())


def headline(problem: Problem, conflict: Conflict) -> ConflictRow:
    """The row closest to fitting: the least need over its budget, in proportion to that budget."""

    def over(row: ConflictRow) -> float:
        budget = problem.limits[row.limit].bytes
        return (row.need.low - budget) / max(budget, 1)

    return min(conflict.rows, key=lambda row: (over(row), row.limit, row.row))


def conflict_line(problem: Problem, conflict: Conflict | None, lowest: LowestPeak, seconds: float,
                  proven: bool = True) -> str:
    """One line: the row cheapest to relax, what it needs while the others hold, and the lowest raw peak.
    `proven`: a solver proved no layout meets the budgets (else one only found none in time)."""
    if conflict is None:
        what = "the budgets cannot be met together" if proven else "no layout meeting the budgets was found in time"
        return f"{what} (no minimal conflict proven within {seconds:g} s); {_lowest(lowest)}"
    first = headline(problem, conflict)
    limit = problem.limits[first.limit]
    others = [row for row in conflict.rows if row is not first]
    step = problem.rows[first.row].step
    return (f"the {limit.name} ({limit.bytes:,} bytes) cannot be met at step {step}: it needs at least "
            f"{first.need.low:,} {_unless(problem, others)}; {_lowest(lowest)}")


def _unless(problem: Problem, others: list[ConflictRow]) -> str:
    if not others:
        return "in every layout"
    if len(others) == 1:
        other = problem.limits[others[0].limit]
        return f"unless the {other.name} ({other.bytes:,} bytes) is exceeded at step {problem.rows[others[0].row].step}"
    return (f"unless one of {len(others)} other budget-at-a-step limits is exceeded "
            "(a minimal conflict; --json lists each)")


def _lowest(lowest: LowestPeak) -> str:
    within = f" within the {' and the '.join(lowest.within)}" if lowest.within else ""
    peak = lowest.peak
    if peak is None or peak.high is None:
        known = f" is at least {peak.low:,} bytes but" if peak is not None and peak.low > 0 else ""
        return f"the lowest raw peak{within}{known} was not found in time"
    value = f"{peak.low:,} bytes" if peak.exact else f"between {peak.low:,} and {peak.high:,} bytes"
    return f"the lowest raw peak any layout reaches{within} is {value}"


def feasible(problem: Problem, seconds: float) -> bool | None:
    """Can every budget row be met? None when CP-SAT could not tell within `seconds`."""
    found = least(problem, [], _all_pairs(problem), seconds)
    return None if found is not None and found.choice is None else found is not None

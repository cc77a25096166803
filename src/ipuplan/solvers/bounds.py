"""Lower bounds on the peak: window bounds, and the whole scope's bound over the choices a cap left out.

Window bounds: a lower bound on the peak from small exact solves over a few consecutive steps.

Steps couple only the groups live at them. Any set of rows, with only the groups live there and only
their budgets, is a relaxation of the whole problem: its least peak is a lower bound on the whole
problem's, and a window that cannot meet its budgets proves the whole cannot. Windows are centred on
the rows whose per-row bound is highest (where the peak is likely to be decided), solved exactly with
CP-SAT, and the equal ones (an unrolled program repeats its windows) solved once. On the 10,032-value
unrolled plan one 64-row window of 86 groups lifts the bound from 172,596 (every group at its
smallest) to the optimum 180,148 in 0.4 s, where the LP relaxation of the whole model gives 175,568.

Whole-scope bounds (`whole_scope`): a cap on a group's candidates (a kernel family's splits) leaves legal
choices out, so a solver's bound covers the kept list only. The relaxation where each such group may also take
one more candidate, per row and class the least bytes of its left-out choices that could still beat the peak
found (`Problem.relaxation`), contains every choice of the scope at no more bytes: its bound is the scope's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ipuplan.model.problem import Edge, Problem, StepRow, alive_left_out
from ipuplan.solvers.deadline import part
from ipuplan.solvers.result import Progress, SolveResult, SolverSettings, SolveStatus

ROWS = 64
"""Steps per window: small enough to solve exactly in well under a second, wide enough to hold the
couplings that decide the peak on the plans in models/."""
WINDOWS = 12
"""Distinct windows solved at most: a deterministic cap (no clock)."""


@dataclass(frozen=True)
class WindowBound:
    bound: int
    """The best lower bound on the peak: the per-row bound or the best window's proven one."""
    infeasible: bool
    """A window proved that no choice meets the budgets."""
    windows: int
    """Distinct windows solved."""


def window_key(problem: Problem, first: int, last: int) -> tuple:
    """What the window of rows `first` to `last` is made of, equal for windows of equal bytes (the copies of an
    unrolled program): per row its constant bytes, per term its group numbered by first appearance and its bytes,
    and the edges between its groups. From the problem's table: 1,140 windows keyed term by term took 2.4 s at 200k
    values."""
    table = problem.table
    a, b = np.searchsorted(table.row, [first, last]).tolist()
    terms = table.term[a:b]
    groups = table.group[terms]
    distinct, first_at, inverse = np.unique(groups, return_index=True, return_inverse=True)
    local = np.empty(len(distinct), dtype=np.int64)
    local[np.argsort(first_at, kind="stable")] = np.arange(len(distinct))
    shape = (table.constant_standard[first:last].tobytes(), table.constant_interleaved[first:last].tobytes(),
             (table.row[a:b] - first).tobytes(), local[inverse.ravel()].tobytes(), table.contents[terms].tobytes())
    if not problem.edges:
        return shape
    number = dict(zip(distinct.tolist(), local.tolist()))
    return shape + tuple((number[e.a], number[e.b], e.costs.shape, e.costs.tobytes()) for e in problem.edges
                         if e.a in number and e.b in number)


def window(problem: Problem, first: int, last: int) -> Problem:
    """The problem of rows `first` to `last` over only the groups live there, renumbered, with the edges between two
    of them: fewer pairs that may not be made than the whole problem has, still a relaxation."""
    rows = problem.rows[first:last]
    local: dict[int, int] = {}
    for row in rows:
        for g, _, _ in row.terms:
            local.setdefault(g, len(local))
    groups = list(local)
    edges = tuple(Edge(local[e.a], local[e.b], e.costs) for e in problem.edges if e.a in local and e.b in local)
    return Problem(candidate_counts=tuple(problem.candidate_counts[g] for g in groups),
                   input_choice=tuple(problem.input_choice[g] for g in groups),
                   group_sizes=tuple(problem.group_sizes[g] for g in groups),
                   rows=tuple(StepRow(row.step, row.standard, row.interleaved,
                                      tuple((local[g], s, i) for g, s, i in row.terms)) for row in rows),
                   exchange=tuple(problem.exchange[g] for g in groups), limits=problem.limits, steps_total=len(rows),
                   edges=edges)


def centres(problem: Problem) -> np.ndarray:
    """Rows by their per-row bound, highest first (ties: earlier first)."""
    return np.argsort(-problem.row_peaks[0], kind="stable")


def window_bound(problem: Problem, solve: Callable[[Problem, SolverSettings], SolveResult], settings: SolverSettings,
                 target: int, rows: int = ROWS, windows: int = WINDOWS) -> WindowBound:
    """Solve windows (with `solve`, exactly) centred on the highest rows until the bound reaches `target`
    (a known peak: nothing can beat it) or `windows` distinct ones are solved."""
    bound, solved = problem.lower_bound(), {}
    per_window = replace(settings, time_limit=max(0.2, min(1.0, settings.time_limit / 20)), workers=1,
                         deterministic=True, dump_model=None, start=None)
    for centre in centres(problem).tolist():
        if bound >= target or len(solved) >= windows:
            break
        first = max(0, min(centre - rows // 2, len(problem.rows) - rows))
        key = window_key(problem, first, first + rows)
        if key in solved:
            continue
        result = solve(window(problem, first, first + rows), per_window)
        if result.status == SolveStatus.INFEASIBLE:
            return WindowBound(bound, True, len(solved) + 1)
        solved[key] = result.bound
        bound = max(bound, result.bound)
    return WindowBound(bound, False, len(solved))


def whole_scope(problem: Problem, settings: SolverSettings, solve: Callable[..., SolveResult],
                progress: Progress | None = None) -> SolveResult:
    """`solve(problem, settings, progress)`, its status and bound made true of the whole scope when a cap left
    choices out (`problem.left_out`): "optimal" only when the relaxation's bound reaches the peak found, else
    `feasible` with the relaxation's bound; "infeasible" only when the relaxation cannot meet the budgets either
    (else no solution is claimed). The relaxation is solved by the same `solve`, from the solution found."""
    if not problem.left_out:
        return solve(problem, settings, progress)
    started = time.perf_counter()
    result = solve(problem, replace(settings, time_limit=settings.time_limit - part("relaxation", settings.time_limit)),
                   progress)
    solved = result.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE)
    if result.status == SolveStatus.NO_SOLUTION:
        return result
    alive = alive_left_out(problem, result.peak if solved else None)
    relaxed = problem.relaxation(alive)
    if relaxed is None:
        return result
    alive_count = int(sum(mask.sum() for mask in alive.values()))
    if solved and relaxed.lower_bound() >= result.peak:  # every group at its least, row by row, already reaches it
        return replace(result, status=SolveStatus.OPTIMAL, bound=result.peak, left_out=alive_count)
    bound = _relaxed_solve(relaxed, result, settings, solve, started)
    if not solved:
        return _unsolved(result, bound, alive_count)
    proven = bound.status != SolveStatus.NO_SOLUTION and bound.bound >= result.peak
    if progress is not None:
        progress("scope", result.peak, result.peak if proven else bound.bound, time.perf_counter() - started)
    return replace(result, status=SolveStatus.OPTIMAL if proven else SolveStatus.FEASIBLE,
                   bound=result.peak if proven else min(bound.bound, result.peak), left_out=alive_count,
                   search_units=result.search_units + bound.search_units)


def whole_scope_fit(problem: Problem, settings: SolverSettings, solve: Callable[..., SolveResult],
                    progress: Progress | None = None) -> SolveResult:
    """`fit`'s `whole_scope`: "optimal" only when no choice a cap left out can beat the exchange found, "infeasible"
    only when none of them meets the budgets either. The relaxation gives each group with such choices one more
    candidate, their least bytes at no exchange: its least exchange under the budgets bounds every choice of the
    scope, and budgets it cannot meet, no choice meets."""
    if not problem.left_out:
        return solve(problem, settings, progress)
    started = time.perf_counter()
    result = solve(problem, replace(settings, time_limit=settings.time_limit - part("relaxation", settings.time_limit)),
                   progress)
    if result.status == SolveStatus.NO_SOLUTION:
        return result
    alive = alive_left_out(problem, None)
    relaxed = problem.relaxation(alive)
    if relaxed is None:
        return result
    alive_count = int(sum(mask.sum() for mask in alive.values()))
    solved = result.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE)
    bound = _relaxed_solve(relaxed, result, settings, solve, started)
    if not solved:
        return _unsolved(result, bound, alive_count)
    least = bound.exchange_bound if bound.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE) else None
    proven = result.status == SolveStatus.OPTIMAL and least is not None and least >= result.exchange_bytes
    return replace(result, status=SolveStatus.OPTIMAL if proven else SolveStatus.FEASIBLE,
                   exchange_bound=result.exchange_bytes if proven else min(least or 0, result.exchange_bound or 0),
                   left_out=alive_count, search_units=result.search_units + bound.search_units)


def _relaxed_solve(relaxed: Problem, result: SolveResult, settings: SolverSettings, solve: Callable[..., SolveResult],
                   started: float) -> SolveResult:
    """The relaxation solved by the same `solve`, from the solution found if any, in what the time limit leaves
    (at least its "relaxation" share)."""
    seconds = settings.left_since(started, part("relaxation", settings.time_limit))
    solved = result.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE)
    return solve(replace(relaxed, input_choice=result.choice) if solved else relaxed,
                 replace(settings, time_limit=seconds, dump_model=None, start=None), None)


def _unsolved(result: SolveResult, bound: SolveResult, alive_count: int) -> SolveResult:
    """No choice of the kept candidates met the budgets: "infeasible" only when the relaxation proves that no choice
    of the whole scope does either, else no claim."""
    status = SolveStatus.INFEASIBLE if bound.status == SolveStatus.INFEASIBLE else SolveStatus.NO_SOLUTION
    return replace(result, status=status, left_out=alive_count)

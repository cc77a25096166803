"""HiGHS backend: the same one-hot model as CP-SAT, as a MIP through SciPy (`pip install 'ipuplan[highs]'`).

Phase 1 minimises the peak; phase 2 fixes it and minimises exchange bytes x weight + changed values.
The `fit` objective is phase 2 alone, under the budgets.
"""

from __future__ import annotations

import time

import numpy as np

from ipuplan.costs import Objective, Problem
from ipuplan.errors import IpuplanError
from ipuplan.solvers.result import Progress, SolveResult, SolverSettings, SolveStatus


class HighsMissing(IpuplanError):
    """The HiGHS backend needs SciPy."""


def _milp():
    try:
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import coo_matrix
    except ImportError:
        raise HighsMissing("--solver highs needs SciPy: pip install 'ipuplan[highs]'") from None
    return Bounds, LinearConstraint, milp, coo_matrix


class _Rows:
    """Sparse constraint rows over the one-hot columns (and the peak column, the last)."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, int, float]] = []
        self.lower: list[float] = []
        self.upper: list[float] = []

    def add(self, terms: dict[int, float], low: float, high: float) -> None:
        row = len(self.lower)
        self.entries.extend((row, column, value) for column, value in terms.items())
        self.lower.append(low)
        self.upper.append(high)


def _constraints(problem: Problem, offsets: np.ndarray, peak_column: int, peak_cap: int | None) -> _Rows:
    rows = _Rows()
    for g, count in enumerate(problem.candidate_counts):
        rows.add({int(offsets[g]) + c: 1.0 for c in range(count)}, 1.0, 1.0)
    for row in problem.rows:
        standard: dict[int, float] = {}
        interleaved: dict[int, float] = {}
        for g, s, i in row.terms:
            for c in range(len(s)):
                standard[int(offsets[g]) + c] = float(s[c])
                interleaved[int(offsets[g]) + c] = float(i[c])
        total = {k: standard[k] + interleaved[k] for k in standard}
        rows.add({**total, peak_column: -1.0}, -np.inf, -(row.standard + row.interleaved))
        for limit in problem.limits:
            usage = {k: limit.standard * standard[k] + limit.interleaved * interleaved[k] for k in standard}
            rows.add(usage, -np.inf, limit.bytes - limit.usage(row.standard, row.interleaved))
    if peak_cap is not None:
        rows.add({peak_column: 1.0}, -np.inf, float(peak_cap))
    return rows


def _run(problem: Problem, objective: np.ndarray, peak_cap: int | None, seconds: float):
    Bounds, LinearConstraint, milp, coo_matrix = _milp()
    offsets = np.cumsum([0, *problem.candidate_counts])
    count = int(offsets[-1]) + 1
    rows = _constraints(problem, offsets, count - 1, peak_cap)
    matrix = coo_matrix(([e[2] for e in rows.entries], ([e[0] for e in rows.entries], [e[1] for e in rows.entries])),
                        shape=(len(rows.lower), count)).tocsr()
    integrality = np.ones(count)
    integrality[-1] = 0
    bounds = Bounds(np.zeros(count), np.concatenate([np.ones(count - 1), [np.inf]]))
    result = milp(objective, constraints=LinearConstraint(matrix, rows.lower, rows.upper), integrality=integrality,
                  bounds=bounds, options={"time_limit": max(seconds, 0.1), "disp": False, "mip_rel_gap": 0.0})
    if result.x is None:
        return result, None
    chosen = tuple(int(np.argmax(result.x[offsets[g]:offsets[g + 1]])) for g in range(problem.groups))
    return result, chosen


def _phase_two_objective(problem: Problem, weight: int) -> np.ndarray:
    costs = [
        exchange * weight + (0 if c == original else size)
        for row, original, size in zip(problem.exchange, problem.input_choice, problem.group_sizes)
        for c, exchange in enumerate(row)
    ]
    return np.array([*costs, 0.0], dtype=float)


def _dual_bound(result) -> int:
    """HiGHS's proven lower bound on the peak, rounded up to whole bytes (0 when it proved nothing)."""
    dual = getattr(result, "mip_dual_bound", None)
    return int(np.ceil(dual - 1e-6)) if dual is not None and np.isfinite(dual) else 0


def _sizes(problem: Problem) -> dict:
    return {"variables": sum(problem.candidate_counts) + 1, "steps_kept": len(problem.rows), "build_seconds": 0.0,
            "constraints": len(problem.candidate_counts) + len(problem.rows) * (1 + len(problem.limits)),
            "steps_total": problem.steps_total}


def _no_choice(problem: Problem, result, bound: int, elapsed: float, objective: Objective) -> SolveResult:
    status = SolveStatus.INFEASIBLE if result.status == 2 else SolveStatus.NO_SOLUTION
    return SolveResult(status, problem.input_choice, None, bound, solve_seconds=elapsed, first_solution_seconds=None,
                       objective=objective, **_sizes(problem))


def _fit(problem: Problem, settings: SolverSettings, progress: Progress | None) -> SolveResult:
    """Exchange bytes x weight + changed values under the budgets, in one MIP."""
    started = time.perf_counter()
    weight = sum(problem.group_sizes) + 1
    result, choice = _run(problem, _phase_two_objective(problem, weight), None, settings.time_limit)
    elapsed = time.perf_counter() - started
    if choice is None:
        return _no_choice(problem, result, 0, elapsed, Objective.FIT)
    exchange, bound = problem.exchange_of(choice), _dual_bound(result) // weight
    if progress is not None:
        progress("exchange", exchange, bound, elapsed)
    status = SolveStatus.OPTIMAL if result.status == 0 else SolveStatus.FEASIBLE
    return SolveResult(status, choice, problem.usage(choice).peak, problem.lower_bound(), solve_seconds=elapsed,
                       first_solution_seconds=elapsed, exchange_bytes=exchange, changed_values=problem.changed_of(choice),
                       objective=Objective.FIT, exchange_bound=exchange if status == SolveStatus.OPTIMAL else bound,
                       **_sizes(problem))


def solve(problem: Problem, settings: SolverSettings, progress: Progress | None = None) -> SolveResult:
    if settings.objective == Objective.FIT:
        return _fit(problem, settings, progress)
    started = time.perf_counter()
    count = sum(problem.candidate_counts) + 1
    peak_objective = np.zeros(count)
    peak_objective[-1] = 1.0
    first, choice = _run(problem, peak_objective, None, settings.time_limit * 0.8)
    elapsed = time.perf_counter() - started
    bound = _dual_bound(first)
    if choice is None:
        return _no_choice(problem, first, bound, elapsed, Objective.PEAK)
    peak = problem.usage(choice).peak
    if progress is not None:
        progress("peak", peak, bound, elapsed)
    status = SolveStatus.OPTIMAL if first.status == 0 else SolveStatus.FEASIBLE
    weight = sum(problem.group_sizes) + 1
    remaining = max(settings.time_limit - elapsed, settings.time_limit * 0.2)
    _, improved = _run(problem, _phase_two_objective(problem, weight), peak, remaining)
    choice = improved or choice
    return SolveResult(status, choice, peak, bound if status != SolveStatus.OPTIMAL else peak,
                       solve_seconds=time.perf_counter() - started, first_solution_seconds=elapsed,
                       exchange_bytes=problem.exchange_of(choice), changed_values=problem.changed_of(choice),
                       **_sizes(problem))

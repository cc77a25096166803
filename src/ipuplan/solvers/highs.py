"""HiGHS backend: the same one-hot model (the same reduced rows) as CP-SAT, as a MIP through SciPy (`pip install 'ipuplan[highs]'`).

Phase 1 minimises the peak; phase 2 fixes it and minimises exchange bytes x weight + changed values.
The `fit` objective is phase 2 alone, under the budgets.
"""

from __future__ import annotations

import time

import numpy as np

from ipuplan.errors import IpuplanError
from ipuplan.model.objective import Objective
from ipuplan.model.problem import Problem
from ipuplan.solvers.construct import tie_costs
from ipuplan.solvers.linear import linear_rows
from ipuplan.solvers.reduce import on_undominated
from ipuplan.solvers.result import Progress, SolveResult, SolverSettings, SolveStatus, model_size


class HighsMissing(IpuplanError):
    """The HiGHS backend needs SciPy."""


def _milp():
    try:
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import coo_matrix
    except ImportError:
        raise HighsMissing("--solver highs needs SciPy: pip install 'ipuplan[highs]'") from None
    return Bounds, LinearConstraint, milp, coo_matrix


def _matrix(problem: Problem, peak_cap: int | None):
    """(matrix, lower, upper, columns) of the one-hot model over `linear.linear_rows`: one-hot rows, the
    shared sums' definitions, then each rule's rows; columns are the booleans, the shared sums, the peak."""
    _, _, _, coo_matrix = _milp()
    rows = linear_rows(problem)
    sums, booleans = rows.sums, rows.booleans
    peak = booleans + sums.count
    parts = [(np.repeat(np.arange(problem.groups), problem.candidate_counts), np.arange(booleans),
              np.ones(booleans), np.ones(problem.groups), np.ones(problem.groups))]
    definitions = np.repeat(np.arange(sums.count), np.diff(sums.indptr))
    parts.append((np.concatenate([np.arange(sums.count), definitions]),
                  np.concatenate([booleans + np.arange(sums.count), sums.columns]),
                  np.concatenate([np.ones(sums.count), -sums.coefficients]), np.zeros(sums.count), np.zeros(sums.count)))
    for rule_rows in rows.rules:
        count = len(rule_rows.rows)
        at = np.repeat(np.arange(count), np.diff(rule_rows.indptr))
        if rule_rows.rule.limit is None:
            parts.append((np.concatenate([at, np.arange(count)]), np.concatenate([rule_rows.columns, np.full(count, peak)]),
                          np.concatenate([rule_rows.coefficients, -np.ones(count)]), np.full(count, -np.inf),
                          -rule_rows.constant.astype(float)))
        else:
            cap = problem.limits[rule_rows.rule.limit].bytes
            parts.append((at, rule_rows.columns, rule_rows.coefficients, np.full(count, -np.inf),
                          (cap - rule_rows.constant).astype(float)))
    caps = [c for c in (rows.peak_cap, peak_cap) if c is not None]
    if caps:
        parts.append((np.zeros(1), np.array([peak]), np.ones(1), np.full(1, -np.inf), np.array([float(min(caps))])))
    offsets = np.cumsum([0, *(len(p[3]) for p in parts)])
    matrix = coo_matrix((np.concatenate([p[2] for p in parts]).astype(float),
                         (np.concatenate([p[0] + offsets[k] for k, p in enumerate(parts)]),
                          np.concatenate([p[1] for p in parts]))), shape=(int(offsets[-1]), peak + 1)).tocsr()
    return matrix, np.concatenate([p[3] for p in parts]), np.concatenate([p[4] for p in parts]), rows


def _run(problem: Problem, objective: np.ndarray, peak_cap: int | None, seconds: float):
    """(HiGHS's result, the choice or None, the model's size fields) of one MIP over the booleans and the peak."""
    Bounds, LinearConstraint, milp, _ = _milp()
    started = time.perf_counter()
    matrix, lower, upper, rows = _matrix(problem, peak_cap)
    count = matrix.shape[1]
    integrality = np.zeros(count)
    integrality[:rows.booleans] = 1
    bounds = Bounds(np.concatenate([np.zeros(rows.booleans + rows.sums.count), [problem.lower_bound()]]),
                    np.concatenate([np.ones(rows.booleans), rows.sums.upper, [np.inf]]))
    full = np.concatenate([objective[:-1], np.zeros(rows.sums.count), objective[-1:]])
    sizes = model_size(problem, count, matrix.shape[0], time.perf_counter() - started, rows)
    result = milp(full, constraints=LinearConstraint(matrix, lower, upper), integrality=integrality,
                  bounds=bounds, options={"time_limit": max(seconds, 0.1), "disp": False, "mip_rel_gap": 0.0})
    if result.x is None:
        return result, None, sizes
    offsets = np.cumsum([0, *problem.candidate_counts])
    chosen = tuple(int(np.argmax(result.x[offsets[g]:offsets[g + 1]])) for g in range(problem.groups))
    return result, chosen, sizes


def _ties_objective(problem: Problem) -> np.ndarray:
    """Exchange bytes x tie weight + changed values per candidate boolean, nothing on the peak."""
    return np.concatenate([*tie_costs(problem), [0]]).astype(float)


def _dual_bound(result) -> int:
    """HiGHS's proven lower bound on the peak, rounded up to whole bytes (0 when it proved nothing)."""
    dual = getattr(result, "mip_dual_bound", None)
    return int(np.ceil(dual - 1e-6)) if dual is not None and np.isfinite(dual) else 0


def _no_choice(problem: Problem, result, bound: int, elapsed: float, objective: Objective, sizes: dict) -> SolveResult:
    status = SolveStatus.INFEASIBLE if result.status == 2 else SolveStatus.NO_SOLUTION
    return SolveResult(status, problem.input_choice, None, bound, solve_seconds=elapsed, first_solution_seconds=None,
                       objective=objective, **sizes)


def _fit(problem: Problem, settings: SolverSettings, progress: Progress | None) -> SolveResult:
    """Exchange bytes x weight + changed values under the budgets, in one MIP."""
    started = time.perf_counter()
    result, choice, sizes = _run(problem, _ties_objective(problem), None, settings.time_limit)
    elapsed = time.perf_counter() - started
    if choice is None:
        return _no_choice(problem, result, 0, elapsed, Objective.FIT, sizes)
    exchange, bound = problem.exchange_of(choice), _dual_bound(result) // problem.tie_weight
    if progress is not None:
        progress("exchange", exchange, bound, elapsed)
    status = SolveStatus.OPTIMAL if result.status == 0 else SolveStatus.FEASIBLE
    return SolveResult(status, choice, problem.usage(choice).peak, problem.lower_bound(), solve_seconds=elapsed,
                       first_solution_seconds=elapsed, exchange_bytes=exchange, changed_values=problem.changed_of(choice),
                       objective=Objective.FIT, exchange_bound=exchange if status == SolveStatus.OPTIMAL else bound,
                       **sizes)


def solve_reduced(problem: Problem, settings: SolverSettings, progress: Progress | None = None) -> SolveResult:
    """The peak, then exchange bytes and changed values at that peak (with `fit`, only the latter)."""
    if settings.objective == Objective.FIT:
        return _fit(problem, settings, progress)
    started = time.perf_counter()
    count = sum(problem.candidate_counts) + 1
    peak_objective = np.zeros(count)
    peak_objective[-1] = 1.0
    first, choice, sizes = _run(problem, peak_objective, None, settings.time_limit * 0.8)
    elapsed = time.perf_counter() - started
    bound = _dual_bound(first)
    if choice is None:
        return _no_choice(problem, first, bound, elapsed, Objective.PEAK, sizes)
    peak = problem.usage(choice).peak
    if progress is not None:
        progress("peak", peak, bound, elapsed)
    status = SolveStatus.OPTIMAL if first.status == 0 else SolveStatus.FEASIBLE
    remaining = max(settings.time_limit - elapsed, settings.time_limit * 0.2)
    _, improved, _ = _run(problem, _ties_objective(problem), peak, remaining)
    choice = improved or choice
    return SolveResult(status, choice, peak, bound if status != SolveStatus.OPTIMAL else peak,
                       solve_seconds=time.perf_counter() - started, first_solution_seconds=elapsed,
                       exchange_bytes=problem.exchange_of(choice), changed_values=problem.changed_of(choice), **sizes)


solve = on_undominated(solve_reduced)
"""`solve(problem, settings, progress)`: `solve_reduced` over the undominated candidates, as CP-SAT sees them."""

"""HiGHS backend: the same one-hot model (the same reduced rows) as CP-SAT, as a MIP through SciPy
(`pip install 'ipuplan[highs]'`).

Phase 1 minimises the peak; phase 2 fixes it and minimises exchange bytes x weight + changed values (where that
weighted sum is exact in doubles, `Problem.ties_combine`; otherwise exchange bytes, then changed values with the
exchange capped at what that phase found). The `fit` objective is phase 2 alone, under the budgets. Each edge's
pairs are columns tied to their candidates as in `linear.pair_columns`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ipuplan.errors import IpuplanError
from ipuplan.model.objective import Objective
from ipuplan.model.problem import FORBIDDEN, Problem
from ipuplan.solvers.construct import changed_costs
from ipuplan.solvers.deadline import part
from ipuplan.solvers.linear import LinearRows, PairColumns, linear_rows, pair_columns
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


@dataclass(frozen=True)
class _Columns:
    """The MIP's columns: a boolean per candidate, an integer per shared sum, the peak, a boolean per pair."""

    rows: LinearRows
    pairs: PairColumns

    @property
    def peak(self) -> int:
        return self.rows.booleans + self.rows.sums.count

    @property
    def count(self) -> int:
        return self.peak + 1 + self.pairs.count

    def vector(self, booleans: np.ndarray | None = None, peak: float = 0.0,
               pairs: np.ndarray | None = None) -> np.ndarray:
        """A row over every column: `booleans` on the candidates, `peak` on the peak, `pairs` on the pairs."""
        vector = np.zeros(self.count)
        if booleans is not None:
            vector[:self.rows.booleans] = booleans
        vector[self.peak] = peak
        if pairs is not None:
            vector[self.peak + 1:] = pairs
        return vector


def _matrix(problem: Problem, columns: _Columns, peak_cap: int | None, caps: list[tuple[np.ndarray, float]]):
    """(matrix, lower, upper) of the one-hot model over `linear.linear_rows`: one-hot rows, the shared sums'
    definitions, then each rule's rows, each edge's pairs tied to their candidates, then `caps` (row, upper)."""
    _, _, _, coo_matrix = _milp()
    rows, pairs = columns.rows, columns.pairs
    sums, booleans = rows.sums, rows.booleans
    peak = columns.peak
    parts = [(np.repeat(np.arange(problem.groups), problem.candidate_counts), np.arange(booleans),
              np.ones(booleans), np.ones(problem.groups), np.ones(problem.groups))]
    definitions = np.repeat(np.arange(sums.count), np.diff(sums.indptr))
    parts.append((np.concatenate([np.arange(sums.count), definitions]),
                  np.concatenate([booleans + np.arange(sums.count), sums.columns]),
                  np.concatenate([np.ones(sums.count), -sums.coefficients]), np.zeros(sums.count),
                  np.zeros(sums.count)))
    for rule_rows in rows.rules:
        count = len(rule_rows.rows)
        at = np.repeat(np.arange(count), np.diff(rule_rows.indptr))
        if rule_rows.rule.limit is None:
            parts.append((np.concatenate([at, np.arange(count)]),
                          np.concatenate([rule_rows.columns, np.full(count, peak)]),
                          np.concatenate([rule_rows.coefficients, -np.ones(count)]), np.full(count, -np.inf),
                          -rule_rows.constant.astype(float)))
        else:
            cap = problem.limits[rule_rows.rule.limit].bytes
            parts.append((at, rule_rows.columns, rule_rows.coefficients, np.full(count, -np.inf),
                          (cap - rule_rows.constant).astype(float)))
    parts += _pair_parts(pairs, peak + 1)
    peak_caps = [c for c in (rows.peak_cap, peak_cap) if c is not None]
    caps = ([(columns.vector(peak=1.0), float(min(peak_caps)))] if peak_caps else []) + caps
    for vector, upper in caps:
        at = np.flatnonzero(vector)
        parts.append((np.zeros(len(at)), at, vector[at], np.full(1, -np.inf), np.array([upper])))
    offsets = np.cumsum([0, *(len(p[3]) for p in parts)])
    matrix = coo_matrix((np.concatenate([p[2] for p in parts]).astype(float),
                         (np.concatenate([p[0] + offsets[k] for k, p in enumerate(parts)]),
                          np.concatenate([p[1] for p in parts]))), shape=(int(offsets[-1]), columns.count)).tocsr()
    return matrix, np.concatenate([p[3] for p in parts]), np.concatenate([p[4] for p in parts])


def _pair_parts(pairs: PairColumns, first: int) -> list[tuple]:
    """The rows tying each edge's pairs (columns from `first`) to their candidates: `sum y - x == 0`."""
    parts = []
    for column, members in pairs.equalities:
        parts.append((np.zeros(len(members) + 1), np.append(first + members, column),
                      np.append(np.ones(len(members)), -1.0), np.zeros(1), np.zeros(1)))
    return parts


def _run(problem: Problem, columns: _Columns, objective: np.ndarray, peak_cap: int | None, seconds: float,
         caps: list[tuple[np.ndarray, float]] = ()):
    """(HiGHS's result, the choice or None, the model's size fields) of one MIP over every column."""
    Bounds, LinearConstraint, milp, _ = _milp()
    started = time.perf_counter()
    matrix, lower, upper = _matrix(problem, columns, peak_cap, list(caps))
    rows, pairs = columns.rows, columns.pairs
    integrality = np.zeros(columns.count)
    integrality[:rows.booleans] = 1
    integrality[columns.peak + 1:] = 1
    high = np.concatenate([np.ones(rows.booleans), rows.sums.upper, [np.inf], np.ones(pairs.count)])
    high[pairs.forbidden] = 0
    bounds = Bounds(np.concatenate([np.zeros(rows.booleans + rows.sums.count), [problem.lower_bound()],
                                    np.zeros(pairs.count)]), high)
    sizes = model_size(problem, columns.count, matrix.shape[0], time.perf_counter() - started, rows)
    result = milp(objective, constraints=LinearConstraint(matrix, lower, upper), integrality=integrality,
                  bounds=bounds, options={"time_limit": max(seconds, 0.1), "disp": False, "mip_rel_gap": 0.0})
    if result.x is None:
        return result, None, sizes
    offsets = np.cumsum([0, *problem.candidate_counts])
    chosen = tuple(int(np.argmax(result.x[offsets[g]:offsets[g + 1]])) for g in range(problem.groups))
    return result, chosen, sizes


@dataclass(frozen=True)
class _Phase:
    """One term after the peak: its row over the columns and its exact value of a choice."""

    name: str
    vector: np.ndarray
    value: Callable[[tuple[int, ...]], int]
    weight: int = 1


def _ties_phases(problem: Problem, columns: _Columns) -> list[_Phase]:
    """Exchange bytes x tie weight + changed values as one MIP where that is exact in doubles, else one each."""
    unary = np.array([x if x < FORBIDDEN else 0 for costs in problem.exchange for x in costs], dtype=float)
    exchange = columns.vector(unary, pairs=columns.pairs.cost.astype(float))
    changed = columns.vector(np.concatenate(changed_costs(problem)).astype(float) if problem.groups else None)
    if problem.ties_combine:
        weight = problem.tie_weight
        return [_Phase("exchange", exchange * weight + changed,
                       lambda c: problem.exchange_of(c) * weight + problem.changed_of(c), weight)]
    return [_Phase("exchange", exchange, problem.exchange_of), _Phase("changed", changed, problem.changed_of)]


def _least_ties(problem: Problem, columns: _Columns, peak_cap: int | None, seconds: float, choice=None):
    """The terms after the peak in turn (`_ties_phases`), each phase's value capped for the next (half a unit
    above it: the rows are exact integers, the check of them is not): (first phase's result, choice, sizes)."""
    caps: list[tuple[np.ndarray, float]] = []
    head, sizes = None, None
    started = time.perf_counter()
    for k, phase in enumerate(_ties_phases(problem, columns)):
        remaining = seconds if k == 0 else max(seconds - (time.perf_counter() - started),
                                                seconds - part("phases before the last", seconds))
        result, found, sizes = _run(problem, columns, phase.vector, peak_cap, remaining, caps)
        head = result if head is None else head
        if found is None:
            break
        choice = found
        caps.append((phase.vector, phase.value(choice) + 0.5))
    return head, choice, sizes


def _dual_bound(result) -> int:
    """HiGHS's proven lower bound on the phase's objective, rounded up to whole units (0 when it proved nothing)."""
    dual = getattr(result, "mip_dual_bound", None)
    return int(np.ceil(dual - 1e-6)) if dual is not None and np.isfinite(dual) else 0


def _no_choice(problem: Problem, result, bound: int, elapsed: float, objective: Objective, sizes: dict) -> SolveResult:
    status = SolveStatus.INFEASIBLE if result.status == 2 else SolveStatus.NO_SOLUTION
    return SolveResult(status, problem.input_choice, None, bound, solve_seconds=elapsed, first_solution_seconds=None,
                       objective=objective, **sizes)


def _fit(problem: Problem, columns: _Columns, settings: SolverSettings, progress: Progress | None) -> SolveResult:
    """Exchange bytes and changed values under the budgets (`_least_ties`)."""
    started = time.perf_counter()
    result, choice, sizes = _least_ties(problem, columns, None, settings.wall(settings.time_limit))
    elapsed = time.perf_counter() - started
    if choice is None:
        return _no_choice(problem, result, 0, elapsed, Objective.FIT, sizes)
    weight = problem.tie_weight if problem.ties_combine else 1
    exchange, bound = problem.exchange_of(choice), _dual_bound(result) // weight
    if progress is not None:
        progress("exchange", exchange, bound, elapsed)
    status = SolveStatus.OPTIMAL if result.status == 0 else SolveStatus.FEASIBLE
    return SolveResult(status, choice, problem.usage(choice).peak, problem.lower_bound(), solve_seconds=elapsed,
                       first_solution_seconds=elapsed, exchange_bytes=exchange,
                       changed_values=problem.changed_of(choice),
                       objective=Objective.FIT, exchange_bound=exchange if status == SolveStatus.OPTIMAL else bound,
                       **sizes)


def solve_reduced(problem: Problem, settings: SolverSettings, progress: Progress | None = None) -> SolveResult:
    """The peak, then exchange bytes and changed values at that peak (with `fit`, only the latter)."""
    rows = linear_rows(problem)
    columns = _Columns(rows, pair_columns(problem, rows.first))
    if settings.objective == Objective.FIT:
        return _fit(problem, columns, settings, progress)
    started = time.perf_counter()
    limit = settings.time_limit
    first, choice, sizes = _run(problem, columns, columns.vector(peak=1.0), None,
                                settings.wall(part("phases before the last", limit)))
    elapsed = time.perf_counter() - started
    bound = _dual_bound(first)
    if choice is None:
        return _no_choice(problem, first, bound, elapsed, Objective.PEAK, sizes)
    peak = problem.usage(choice).peak
    if progress is not None:
        progress("peak", peak, bound, elapsed)
    status = SolveStatus.OPTIMAL if first.status == 0 else SolveStatus.FEASIBLE
    remaining = settings.wall(max(limit - elapsed, limit - part("phases before the last", limit)))
    _, choice, _ = _least_ties(problem, columns, peak, remaining, choice)
    return SolveResult(status, choice, peak, bound if status != SolveStatus.OPTIMAL else peak,
                       solve_seconds=time.perf_counter() - started, first_solution_seconds=elapsed,
                       exchange_bytes=problem.exchange_of(choice), changed_values=problem.changed_of(choice), **sizes)


solve = on_undominated(solve_reduced)
"""`solve(problem, settings, progress)`: `solve_reduced` over the undominated candidates, as CP-SAT sees them."""

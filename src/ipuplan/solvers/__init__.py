"""Solver backends over a `model.problem.Problem`, by name: `cpsat` (the default), `highs`, `greedy` and any
name `register_backend` adds.

A backend is one function `solve(problem, settings, progress) -> SolveResult`, so the baselines are
measured by the same code path as the optimiser. A built-in backend's module is imported when first used:
`ipuplan check` never pays for OR-Tools or SciPy. Soft budgets (best effort), the peak / exchange front
and the explanation of infeasible budgets (`conflict`) are CP-SAT's, whatever backend solved.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from importlib import import_module
from typing import Protocol, TypeVar

import numpy as np

from ipuplan.model.objective import Objective
from ipuplan.model.problem import Problem, alive_left_out, relaxed_lower_bound
from ipuplan.solvers.bounds import whole_scope, whole_scope_fit
from ipuplan.solvers.construct import construct
from ipuplan.solvers.result import FrontPoint, Progress, SolveResult, SolverSettings, SolveStatus, model_size

SolveFunction = Callable[[Problem, SolverSettings, Progress | None], SolveResult]

BACKENDS: dict[str, str | SolveFunction] = {
    "cpsat": "ipuplan.solvers.cpsat",
    "highs": "ipuplan.solvers.highs",
    "greedy": "ipuplan.solvers.greedy",
}
"""Backend name (what `--solver` takes) -> the module whose `solve` it runs, or the function itself."""


def register_backend(name: str, solve: SolveFunction) -> None:
    """Make `name` a backend that runs `solve`: `solvers.solve(..., name)` and `optimize(plan, solver=name)`
    take it from then on."""
    BACKENDS[name] = solve


class _Registered(str, Enum):
    """A backend's name. The built-ins are members, so the CLI lists them as `--solver`'s choices; a name
    registered later becomes one when first asked for, so the options accept it like a built-in."""

    @classmethod
    def _missing_(cls, value):
        if value not in BACKENDS:
            raise ValueError(f"no solver backend {value!r}: one of {', '.join(BACKENDS)}")
        member = str.__new__(cls, value)
        member._name_ = member._value_ = value
        return member


Backend = _Registered("Backend", {name.upper(): name for name in BACKENDS})


def solve(problem: Problem, settings: SolverSettings, backend: str | Backend = Backend.CPSAT,
          progress: Progress | None = None) -> SolveResult:
    """Minimise the objective terms in order with the named backend. The status and the bound are the whole scope's,
    choices a cap left out of the candidates included (`windows.whole_scope`, `whole_scope_fit`)."""
    found = BACKENDS[Backend(backend).value]
    run = import_module(found).solve if isinstance(found, str) else found
    if settings.objective != Objective.PEAK:
        return whole_scope_fit(problem, settings, run, progress)
    return whole_scope(problem, settings, run, progress)


WIDEN_SHARE = 0.4
"""Of the time limit, the second solve's share when no constructive choice meets the budgets and choices a cap left
out may beat the first solve's peak."""


class Widenable(Protocol):
    """A problem with a way to make some of its left-out choices candidates (`model.build.Widening`)."""

    problem: Problem

    def widened(self, chosen: dict[int, np.ndarray]) -> Widenable:
        """The same with the left-out choices `chosen` (per group, a mask) appended to their groups' candidates."""


W = TypeVar("W", bound=Widenable)


def solve_space(start: W, settings: SolverSettings, backend: str | Backend = Backend.CPSAT,
                progress: Progress | None = None) -> tuple[W, SolveResult]:
    """`solve` the problem, and when a cap left choices out of its candidates, over every one of them that may beat
    a peak already known, so that a better split outside the cap is found rather than only admitted. The peak known
    is the constructive choice's (`construct`); the choices that cannot beat it (`alive_left_out`) stay out, and the
    solve's bound, capped at that peak, covers the whole scope: one solve. Where the constructive choice breaks a
    budget, the first solve finds the peak to beat and a second one (WIDEN_SHARE of the time limit) widens.
    Returns what the result's choice indexes (the wider problem after widening) and the result."""
    problem = start.problem
    if not problem.left_out or settings.objective != Objective.PEAK:
        return start, solve(problem, settings, backend, progress)
    started = time.perf_counter()
    known = constructed(problem)
    if known is None:
        return _solved_twice(start, settings, backend, progress, started)
    alive = alive_left_out(problem, known.peak)
    floor = relaxed_lower_bound(problem, alive)
    if floor is None or floor >= known.peak:  # no left-out choice beats the constructive peak
        counted = int(sum(mask.sum() for mask in alive.values()))
        solved = problem.without_left_out()
        return start, _capped(solved, solve(solved, _left(settings, started, known), backend, progress), known, counted)
    wider = start.widened(alive)
    solved = wider.problem.without_left_out()
    return wider, _capped(solved, solve(solved, _left(settings, started, known), backend, progress), known, 0)


def _left(settings: SolverSettings, started: float, known: Known) -> SolverSettings:
    """The settings with what the time limit leaves after `started` (at least its tenth; deterministic units whole)
    and the `known` choice as the start (the widened candidates come after the kept ones: its indices hold)."""
    settings = replace(settings, start=known.choice)
    if settings.deterministic:
        return settings
    return replace(settings,
                   time_limit=max(settings.time_limit - (time.perf_counter() - started), settings.time_limit / 10))


@dataclass(frozen=True)
class Known:
    """A choice that meets the budgets, found before the solve, and its peak."""

    choice: tuple[int, ...]
    peak: int


def constructed(problem: Problem) -> Known | None:
    """The constructive choice, or the input where its peak is smaller, of those that meet the budgets (None: neither
    does)."""
    found = [Known(choice, problem.usage(choice).peak) for choice in (construct(problem), problem.input_choice)
             if not problem.usage(choice).violation(problem.limits) and not problem.forbidden_in(choice)]
    return min(found, key=lambda known: known.peak, default=None)


def _capped(problem: Problem, result: SolveResult, known: Known, counted: int) -> SolveResult:
    """A solve of `problem` (its candidates and the left-out choices that may beat `known`) as the whole scope's: every
    other choice has a peak of at least `known`'s, so the bound is at most that, and "optimal" holds only where it
    still reaches the peak found. A solve that ends without a choice, or above `known`'s peak, gives `known` (a choice
    of `problem`: the widened candidates come after the kept ones), feasible. `counted`: the left-out choices still out
    that the bound counted (`SolveResult.left_out`)."""
    if result.status not in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE) or result.peak > known.peak:
        result = replace(result, status=SolveStatus.FEASIBLE, choice=known.choice, peak=known.peak,
                         bound=max(0, result.bound or 0), exchange_bytes=problem.exchange_of(known.choice),
                         changed_values=problem.changed_of(known.choice), constructed=True)
    bound = min(result.bound, known.peak)
    return replace(result, bound=bound, status=SolveStatus.OPTIMAL if bound >= result.peak else SolveStatus.FEASIBLE,
                   left_out=counted)


def _solved_twice(start: W, settings: SolverSettings, backend: str | Backend, progress: Progress | None,
                  started: float) -> tuple[W, SolveResult]:
    """`solve_space` with no budget-meeting choice known (looked for since `started`): the first solve (whose bound
    covers the whole scope, `whole_scope`) finds the peak to beat, and when left-out choices may still beat it, a
    second solve has them among the candidates; the first has WIDEN_SHARE less of the time limit."""
    problem = start.problem
    first = solve(problem, replace(settings, time_limit=settings.time_limit * (1 - WIDEN_SHARE)), backend, progress)
    # no kept choice meets the budgets while some left-out one may (no claim yet): those become candidates too
    unmet = first.status == SolveStatus.NO_SOLUTION and first.peak is None
    if first.status != SolveStatus.FEASIBLE and not unmet or not first.left_out:
        return start, first
    wider = start.widened(alive_left_out(problem, None if unmet else first.peak))
    share = settings.time_limit * WIDEN_SHARE
    seconds = share if settings.deterministic else max(settings.time_limit - (time.perf_counter() - started), share)
    second = solve(wider.problem, replace(settings, time_limit=seconds, dump_model=None), backend, progress)
    return wider, second if unmet else _better(first, second)


def _better(first: SolveResult, second: SolveResult) -> SolveResult:
    """Of two solves of one scope (the second over more candidates, every first candidate at the same index), the
    better choice (peak, then exchange, then changes), with the better of their bounds over the scope."""
    solved = second.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE)
    figures = [(r.peak, r.exchange_bytes, r.changed_values) for r in (first, second)]
    best = second if solved and figures[1] <= figures[0] else replace(first, left_out=second.left_out)
    bound = max(first.bound, second.bound if solved else 0)
    optimal = bound >= best.peak
    return replace(best, status=SolveStatus.OPTIMAL if optimal else SolveStatus.FEASIBLE,
                   bound=best.peak if optimal else bound)


def solve_soft(problem: Problem, settings: SolverSettings, progress: Progress | None = None) -> SolveResult:
    """Best effort: the least total excess over the budgets first, then the objective's terms (CP-SAT)."""
    return import_module("ipuplan.solvers.cpsat").solve(problem, settings, progress, soft=True)


def pareto_front(problem: Problem, settings: SolverSettings, max_points: int,
                 on_point: Callable[[FrontPoint], None] | None = None,
                 first: FrontPoint | None = None) -> tuple[list[FrontPoint], bool]:
    """The peak / exchange trade-off from the smallest peak on (from `first`, when solved already), and whether it
    was walked to its end (CP-SAT)."""
    return import_module("ipuplan.solvers.cpsat").pareto_front(problem, settings, max_points, on_point, first)


__all__ = ["BACKENDS", "Backend", "FrontPoint", "Progress", "SolveFunction", "SolveResult", "SolveStatus",
           "SolverSettings", "model_size", "pareto_front", "register_backend", "solve", "solve_soft", "solve_space"]

"""The peak phase's solve over a scope whose families a cap left partly out (issue 19): the left-out splits that may
beat a peak already known are made candidates (the space widened, `space.scopes.with_promoted`) and solved, so that a
better split outside the cap is found rather than only admitted. Here, not in `solvers/`: a backend solves the problem
it is given and never builds candidates itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.model.build import LiveSets, widened_problem
from ipuplan.model.objective import Objective
from ipuplan.model.problem import Problem, alive_left_out, relaxed_lower_bound
from ipuplan.solvers import Backend, Progress, SolveResult, SolverSettings, SolveStatus, solve
from ipuplan.solvers.construct import construct
from ipuplan.solvers.deadline import part
from ipuplan.space.scopes import with_promoted
from ipuplan.space.types import CandidateSpace


@dataclass(frozen=True)
class Widening:
    """A candidate space and its problem, and how to make some left-out choices candidates (`solve_space`)."""

    facts: PlanFacts
    space: CandidateSpace
    problem: Problem
    live: LiveSets | None = None
    """The space's live sets, when known: a widening adds candidates, not members (1.5 s at 200k values)."""

    def widened(self, chosen: dict[int, np.ndarray]) -> Widening:
        """The left-out choices `chosen` (per free group index, a mask) made candidates (`scopes.with_promoted`), the
        problem's rows read off this one's (`widened_problem`); the live sets are not passed on (a solve widens once,
        and they hold 25 MB at 50k values)."""
        space = with_promoted(self.facts, self.space, chosen)
        return Widening(self.facts, space, widened_problem(self.facts, self.problem, space, chosen, self.live))


def solve_space(start: Widening, settings: SolverSettings, backend: str | Backend = Backend.CPSAT,
                progress: Progress | None = None) -> tuple[Widening, SolveResult]:
    """`solve` the problem, and when a cap left choices out of its candidates, over every one of them that may beat
    a peak already known, so that a better split outside the cap is found rather than only admitted. The peak known
    is the constructive choice's (`construct`); the choices that cannot beat it (`alive_left_out`) stay out, and the
    solve's bound, capped at that peak, covers the whole scope: one solve. Where the constructive choice breaks a
    budget, the first solve finds the peak to beat and a second one (the "widen" share of the time limit) widens.
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
             if problem.valid(choice)]
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


def _solved_twice(start: Widening, settings: SolverSettings, backend: str | Backend, progress: Progress | None,
                  started: float) -> tuple[Widening, SolveResult]:
    """`solve_space` with no budget-meeting choice known (looked for since `started`): the first solve (whose bound
    covers the whole scope, `whole_scope`) finds the peak to beat, and when left-out choices may still beat it, a
    second solve has them among the candidates; the first has the "widen" share less of the time limit."""
    problem = start.problem
    share = part("widen", settings.time_limit)
    first = solve(problem, replace(settings, time_limit=settings.time_limit - share), backend, progress)
    # no kept choice meets the budgets while some left-out one may (no claim yet): those become candidates too
    unmet = first.status == SolveStatus.NO_SOLUTION and first.peak is None
    if first.status != SolveStatus.FEASIBLE and not unmet or not first.left_out:
        return start, first
    wider = start.widened(alive_left_out(problem, None if unmet else first.peak))
    seconds = settings.left_since(started, share)
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
                   bound=best.peak if optimal else bound, search_units=first.search_units + second.search_units)

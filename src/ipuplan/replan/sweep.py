"""The trade-off of peak against exchange bytes: how much exchange each KiB of memory costs.

`sweep` walks the Pareto front of the candidate space under the budgets, from the smallest peak
(the `peak` objective's plan) to the least exchange (the `fit` objective's, at its lowest peak):
each point is the smallest peak with less exchange than the point before, and the least exchange
at that peak, each solve starting from the previous point's layouts. The peaks are walked by the optimiser's
proxy (each candidate's exchange at the other side's input layout: a linear model, fast to walk); at each peak
the least exact exchange (docs/EXCHANGE.md) is then solved with every pair priced (`pipeline.exact_at`), and a
point whose exact exchange is no less than a smaller peak's is dropped (so "complete" says the proxy's walk reached
its end; the exact front between two walked peaks is not searched). Each point's `model_exchange_bytes` is the
model's exact figure and `exchange_bytes` the exchange of the plan it would write, computed again from that plan;
the two are equal (with `--exact-exchange never`, or `auto` above its cap, the walked points as they are, by the
proxy).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from ipuplan.facts.plan_exchange import plan_exchange
from ipuplan.model.exact import exact_problem
from ipuplan.model.objective import Objective
from ipuplan.model.problem import Problem, alive_within
from ipuplan.plan.format import Plan
from ipuplan.replan.options import OptimizeOptions
from ipuplan.replan.pipeline import (
    BudgetConflict,
    Prepared,
    chosen_options,
    exact_at,
    exact_choice,
    exact_wanted,
    explain_run,
    own_plan,
    prepare,
)
from ipuplan.replan.rewrite import rewrite
from ipuplan.solvers import FrontPoint, SolverSettings, SolveStatus, pareto_front, solve
from ipuplan.solvers.deadline import part

KIB = 1024


@dataclass(frozen=True)
class SweepPoint:
    peak: int
    exchange_bytes: int
    """The exact exchange of the plan this point would write (docs/EXCHANGE.md)."""
    exchange_added: int
    """Over the input plan's exact exchange (negative: the plan sends less than the input)."""
    model_exchange_bytes: int
    """The model's exchange of the point's choice: its exact exchange, equal to `exchange_bytes`, where the front is
    exact (`Sweep.model_exchange_exact`); the optimiser's proxy where it is the proxy's walk."""
    changed_values: int
    proven: bool
    exchange_per_kib: float | None
    """Exact exchange bytes each KiB of peak below this point costs, up to the next smaller peak (None on the
    first; negative where the smaller peak also sends less)."""


@dataclass(frozen=True)
class Sweep:
    scope: str
    input_peak: int
    input_exchange: int
    """The input plan's exact exchange."""
    input_model_exchange: int
    """The model's figure of the input: its exact exchange (the model prices the same definition), or the proxy's where
    the front is the proxy's walk."""
    points: tuple[SweepPoint, ...]
    complete: bool
    """The front was walked to its least-exchange end (not cut short by --points or a time limit)."""
    seconds: float
    model_fingerprint: str
    prepared: Prepared
    """The run's facts, candidate space and problem (its report reads them)."""
    model_exchange_exact: bool = True
    """The points' `model_exchange_bytes` are their plans' exact exchange; False where the front is the proxy's walk
    (`--exact-exchange never`, or `auto` above its cap): then they are the proxy's, not the plans'."""

    def summary(self) -> dict:
        return {
            "scope": self.scope, "input_peak": self.input_peak, "input_exchange_bytes": self.input_exchange,
            "input_model_exchange_bytes": self.input_model_exchange, "model_exchange_exact": self.model_exchange_exact,
            "complete": self.complete, "seconds": round(self.seconds, 3), "model_fingerprint": self.model_fingerprint,
            "points": [vars(point) for point in self.points],
        }


def sweep_points(front: list[FrontPoint], exact: list[int], input_exchange: int) -> tuple[SweepPoint, ...]:
    """The front's points with their plans' exact exchange (`exact`, point by point) and what each KiB of peak
    saved costs in it, smallest peak first.

    >>> a = FrontPoint((), 100 * KIB, 5000, 3, True, 0.1)
    >>> b = FrontPoint((), 102 * KIB, 1000, 2, True, 0.1)
    >>> [(p.exchange_added, p.exchange_per_kib) for p in sweep_points([a, b], [7000, 4000], 6000)]
    [(1000, None), (-2000, 1500.0)]
    """
    points = []
    for index, point in enumerate(front):
        per_kib = (None if index == 0
                   else (exact[index - 1] - exact[index]) / ((point.peak - front[index - 1].peak) / KIB))
        points.append(SweepPoint(point.peak, exact[index], exact[index] - input_exchange, point.exchange_bytes,
                                 point.changed_values, point.proven, per_kib))
    return tuple(points)


def point_exchange(prepared: Prepared, point: FrontPoint) -> int:
    """The exact exchange of the plan `point` would write: the input rewritten to its choice."""
    facts = rewrite(prepared.facts, prepared.space, point.choice, prepared.facts.budgets)
    return plan_exchange(facts.plan, facts).total


def sweep(plan: Plan, options: OptimizeOptions | None = None, *, max_points: int = 200,
          on_point: Callable[[FrontPoint], None] | None = None, **option_values) -> Sweep:
    """The peak / exchange front of `plan` under its budgets (`options.time_limit` per point; the objective
    and best effort do not apply; `on_point` hears each point with its exact exchange). Raises BudgetConflict,
    explained, when no layout meets the budgets."""
    started = time.perf_counter()
    plan, options = own_plan(plan, "sweep"), chosen_options(options, option_values, "sweep")
    if type(max_points) is not int or max_points < 1:
        raise TypeError(f"sweep: max_points must be a positive int, got {max_points!r}")
    prepared = prepare(plan, options)
    problem = prepared.problem
    settings = options.solver_settings()
    walked, complete = pareto_front(problem, settings, max_points, first=first_point(problem, settings, options))
    if not walked and complete:
        deadline = time.perf_counter() + options.time_limit
        raise BudgetConflict(explain_run(prepared, proven=True, deadline=deadline), prepared)
    front = exact_front(prepared, walked, settings, on_point)
    if front is None:  # --exact-exchange never, or auto above its cap: the walked front, by the proxy
        front = walked
        for point in walked if on_point is not None else ():
            on_point(point)
    exact = [point_exchange(prepared, point) for point in front]
    input_exchange = plan_exchange(plan, prepared.facts).total
    input_model = input_exchange if front is not walked else problem.exchange_of(problem.input_choice)
    return Sweep(options.scope.value, prepared.facts.estimate.raw_peak, input_exchange, input_model,
                 sweep_points(front, exact, input_exchange), complete, time.perf_counter() - started,
                 problem.fingerprint(), prepared, model_exchange_exact=front is not walked)


def first_point(problem: Problem, settings: SolverSettings, options: OptimizeOptions) -> FrontPoint | None:
    """The front's first point as `optimize` finds it (its constructive start and window bounds find the peak of a
    10,032-value plan where a plain model finds nothing in 10 s), or None when it finds nothing that fits."""
    began = time.perf_counter()
    solved = solve(problem, replace(settings, objective=Objective.PEAK), options.solver)
    if solved.peak is None or not problem.valid(solved.choice):
        return None
    return FrontPoint(solved.choice, solved.peak, problem.exchange_of(solved.choice), problem.changed_of(solved.choice),
                      solved.status == SolveStatus.OPTIMAL, time.perf_counter() - began)




def exact_front(prepared: Prepared, walked: list[FrontPoint], settings: SolverSettings,
                on_point: Callable[[FrontPoint], None] | None = None) -> list[FrontPoint] | None:
    """At each peak of the walked front, the least exact exchange (from the walked point's choice, never worse); the
    points whose exact exchange no smaller peak already beats. None where the options leave the exact exchange out
    (`--exact-exchange never`, or `auto` with more than EXACT_AUTO_CANDIDATES candidates alive at the highest peak)."""
    wanted, problem = prepared.options.exact_exchange, prepared.problem
    if not walked:
        return None
    alive = alive_within(problem, max(p.peak for p in walked))
    if not exact_wanted(wanted, alive)[0]:
        return None
    front: list[FrontPoint] = []
    # priced once, for every candidate alive at the highest peak walked; each lower peak forbids more of them
    priced = exact_problem(prepared.facts, prepared.space, problem, alive)
    for point in walked:
        began = time.perf_counter()
        point_settings = replace(settings, time_limit=part("point exchange", settings.time_limit))
        exact, found = exact_at(prepared, point.peak, point_settings, priced=priced)
        choice, proven = exact_choice(exact, point.choice, found)
        problem = exact.problem
        best = FrontPoint(choice, problem.usage(choice).peak, exact.exchange_of(choice), problem.changed_of(choice),
                          point.proven and proven, point.seconds + time.perf_counter() - began)
        if front and best.exchange_bytes >= front[-1].exchange_bytes:
            continue
        while front and front[-1].peak >= best.peak:  # the walk repeats peaks, and an exact solve may land lower
            front.pop()
        front.append(best)
        if on_point is not None:
            on_point(best)
    return front

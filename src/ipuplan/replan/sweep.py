"""The trade-off of peak against exchange bytes: how much exchange each KiB of memory costs.

`sweep` walks the Pareto front of the candidate space under the budgets, from the smallest peak
(the `peak` objective's plan) to the least exchange (the `fit` objective's, at its lowest peak):
each point is the smallest peak with less exchange than the point before, and the least exchange
at that peak, each solve starting from the previous point's layouts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ipuplan.plan.format import Plan
from ipuplan.replan.options import OptimizeOptions
from ipuplan.replan.pipeline import BudgetConflict, Prepared, explain_run, prepare
from ipuplan.solvers import FrontPoint, pareto_front

KIB = 1024


@dataclass(frozen=True)
class SweepPoint:
    peak: int
    exchange_bytes: int
    exchange_added: int
    """Over the input's layouts (negative: the movers send less than at the input)."""
    changed_values: int
    proven: bool
    exchange_per_kib: float | None
    """Exchange bytes each KiB of peak below this point costs, up to the next smaller peak (None on the first)."""


@dataclass(frozen=True)
class Sweep:
    scope: str
    input_peak: int
    input_exchange: int
    points: tuple[SweepPoint, ...]
    complete: bool
    """The front was walked to its least-exchange end (not cut short by --points or a time limit)."""
    seconds: float
    model_fingerprint: str
    prepared: Prepared
    """The run's facts, candidate space and problem (its report reads them)."""

    def summary(self) -> dict:
        return {
            "scope": self.scope, "input_peak": self.input_peak, "input_exchange_bytes": self.input_exchange,
            "complete": self.complete, "seconds": round(self.seconds, 3), "model_fingerprint": self.model_fingerprint,
            "points": [vars(point) for point in self.points],
        }


def sweep_points(front: list[FrontPoint], input_exchange: int) -> tuple[SweepPoint, ...]:
    """The front's points with the exchange each KiB of peak saved costs, smallest peak first.

    >>> a = FrontPoint((), 100 * KIB, 5000, 3, True, 0.1)
    >>> b = FrontPoint((), 102 * KIB, 1000, 2, True, 0.1)
    >>> [p.exchange_per_kib for p in sweep_points([a, b], 6000)]
    [None, 2000.0]
    """
    points = []
    for index, point in enumerate(front):
        before = front[index - 1] if index else None
        per_kib = None if before is None else (before.exchange_bytes - point.exchange_bytes) / (
            (point.peak - before.peak) / KIB)
        points.append(SweepPoint(point.peak, point.exchange_bytes, point.exchange_bytes - input_exchange,
                                 point.changed_values, point.proven, per_kib))
    return tuple(points)


def sweep(plan: Plan, options: OptimizeOptions | None = None, *, max_points: int = 200,
          on_point: Callable[[FrontPoint], None] | None = None, **option_values) -> Sweep:
    """The peak / exchange front of `plan` under its budgets (`options.time_limit` per point; the objective
    and best effort do not apply). Raises BudgetConflict, explained, when no layout meets the budgets."""
    started = time.perf_counter()
    options = (options or OptimizeOptions()).with_values(**option_values)
    prepared = prepare(plan, options)
    problem = prepared.problem
    front, complete = pareto_front(problem, options.solver_settings(), max_points, on_point)
    if not front and complete:
        deadline = time.perf_counter() + options.time_limit
        raise BudgetConflict(explain_run(prepared, proven=True, deadline=deadline), prepared)
    input_exchange = problem.exchange_of(problem.input_choice)
    return Sweep(options.scope.value, prepared.facts.estimate.raw_peak, input_exchange, sweep_points(front, input_exchange),
                 complete, time.perf_counter() - started, problem.fingerprint(), prepared)

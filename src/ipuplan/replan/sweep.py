"""The trade-off of peak against exchange bytes: how much exchange each KiB of memory costs.

`sweep` walks the Pareto front of the candidate space under the budgets, from the smallest peak
(the `peak` objective's plan) to the least exchange (the `fit` objective's, at its lowest peak):
each point is the smallest peak with less exchange than the point before, and the least exchange
at that peak, each solve starting from the previous point's layouts. The front is walked by the
optimiser's own exchange figure (its proxy, `model_exchange_bytes`); each point also carries the exact
exchange of the plan it would write (docs/EXCHANGE.md), which need not fall as the proxy does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ipuplan.facts.plan_exchange import plan_exchange
from ipuplan.plan.format import Plan
from ipuplan.replan.options import OptimizeOptions
from ipuplan.replan.pipeline import BudgetConflict, Prepared, explain_run, prepare
from ipuplan.replan.rewrite import rewrite
from ipuplan.solvers import FrontPoint, pareto_front

KIB = 1024


@dataclass(frozen=True)
class SweepPoint:
    peak: int
    exchange_bytes: int
    """The exact exchange of the plan this point would write (docs/EXCHANGE.md)."""
    exchange_added: int
    """Over the input plan's exact exchange (negative: the plan sends less than the input)."""
    model_exchange_bytes: int
    """The optimiser's own exchange figure (its proxy), by which the front is walked."""
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
    """The optimiser's proxy at the input's layouts."""
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
            "input_model_exchange_bytes": self.input_model_exchange,
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
        per_kib = None if index == 0 else (exact[index - 1] - exact[index]) / ((point.peak - front[index - 1].peak) / KIB)
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
    and best effort do not apply). Raises BudgetConflict, explained, when no layout meets the budgets."""
    started = time.perf_counter()
    options = (options or OptimizeOptions()).with_values(**option_values)
    prepared = prepare(plan, options)
    problem = prepared.problem
    front, complete = pareto_front(problem, options.solver_settings(), max_points, on_point)
    if not front and complete:
        deadline = time.perf_counter() + options.time_limit
        raise BudgetConflict(explain_run(prepared, proven=True, deadline=deadline), prepared)
    exact = [point_exchange(prepared, point) for point in front]
    input_exchange = plan_exchange(plan, prepared.facts).total
    return Sweep(options.scope.value, prepared.facts.estimate.raw_peak, input_exchange,
                 problem.exchange_of(problem.input_choice), sweep_points(front, exact, input_exchange), complete,
                 time.perf_counter() - started, problem.fingerprint(), prepared)

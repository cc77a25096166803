"""The trade-off of peak against exchange bytes: how much exchange each KiB of memory costs.

`sweep` gives a handful of points that span the Pareto front of the candidate space under the budgets (at most
`max_points`, default 8), all within one time limit: the least exact exchange (docs/EXCHANGE.md) at the smallest peak
(the `peak` objective's, found as `optimize` finds it), at any peak (the `fit` objective's), and at peaks spaced
evenly between, every pair priced once (`model.exact`) and each solve started from the point below it, so a point
never sends more than a smaller peak's (`spanned_front`). A point is kept when it sends less than the one below it,
at least `min_step` less or at a peak a granule higher (`significant`: the old walk stepped the peak by 6 bytes,
hundreds of points nobody could use, and did not finish in ten minutes). Each point's `model_exchange_bytes` is the
model's exact figure and `exchange_bytes` the exchange of the plan it would write, computed again from that plan: the
two are equal. With `--exact-exchange never`, or `auto` above its cap, the front is walked by the optimiser's proxy
instead (each candidate's exchange at the other side's input layout), peak by peak, its points as they are.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from ipuplan.facts.plan_exchange import plan_exchange
from ipuplan.model.exact import ExactProblem, exact_problem
from ipuplan.model.objective import Objective
from ipuplan.model.problem import Problem, alive_within
from ipuplan.plan.format import Plan
from ipuplan.plan.layout import GRANULE, STANDARD
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
    pricing_processes,
    run_clock,
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


MIN_STEP = 0.01
"""A point of the front is kept when it sends less than the point below it, at least this share less (`--min-step`)
or at a peak at least PEAK_STEP higher."""
PEAK_STEP = GRANULE[STANDARD]
"""Bytes of peak (a standard granule, PLAN_FORMAT.md) by which a point that sends only a little less must rise to be
kept: the walk of the old sweep stepped by 6 bytes, hundreds of points nobody can use."""


def sweep(plan: Plan, options: OptimizeOptions | None = None, *, max_points: int = 8, min_step: float = MIN_STEP,
          on_point: Callable[[FrontPoint], None] | None = None, **option_values) -> Sweep:
    """The peak / exchange front of `plan` under its budgets, a handful of points that span it (at most `max_points`,
    each sending at least `min_step` less than the one below it), all within `options.time_limit` (the objective and
    best effort do not apply; `on_point` hears each point kept, with its exact exchange). Raises BudgetConflict,
    explained, when no layout meets the budgets."""
    started = time.perf_counter()
    plan, options = own_plan(plan, "sweep"), chosen_options(options, option_values, "sweep")
    if type(max_points) is not int or max_points < 1:
        raise TypeError(f"sweep: max_points must be a positive int, got {max_points!r}")
    if isinstance(min_step, bool) or not isinstance(min_step, (int, float)) or not 0 <= min_step < 1:
        raise TypeError(f"sweep: min_step must be a share from 0 to below 1, got {min_step!r}")
    prepared = prepare(plan, options)
    problem = prepared.problem
    deadline, settings = run_clock(prepared, options.solver_settings(), started)
    path = ("peak", "exchange")
    first = first_point(problem, replace(settings, time_limit=deadline.share("peak", path)), options)
    alive = alive_within(problem, None)
    if first is not None and max_points > 1 and exact_wanted(prepared.options.exact_exchange, alive)[0]:
        seconds = deadline.share("exchange", path)
        front = spanned_front(prepared, first, alive, replace(settings, time_limit=seconds), max_points, min_step)
        walked, complete = None, True  # its least-exchange end is one of the points it solves
    else:  # --exact-exchange never, auto above its cap, or one point: the proxy's walk, then its peaks priced
        walked, complete = pareto_front(problem, settings, max_points, first=first)
        if not walked and complete:
            explained_by = time.perf_counter() + options.time_limit
            raise BudgetConflict(explain_run(prepared, proven=True, deadline=explained_by), prepared)
        front = exact_front(prepared, walked, settings) or walked
    for point in front if on_point is not None else ():
        on_point(point)
    exact = [point_exchange(prepared, point) for point in front]
    input_exchange = plan_exchange(plan, prepared.facts).total
    proxy = front is walked
    input_model = problem.exchange_of(problem.input_choice) if proxy else input_exchange
    return Sweep(options.scope.value, prepared.facts.estimate.raw_peak, input_exchange, input_model,
                 sweep_points(front, exact, input_exchange), complete, time.perf_counter() - started,
                 problem.fingerprint(), prepared, model_exchange_exact=not proxy)


def spanned_front(prepared: Prepared, first: FrontPoint, alive: list, settings: SolverSettings, max_points: int,
                  min_step: float) -> list[FrontPoint]:
    """The front by its two ends and caps between them, every pair priced once (`model.exact`) for the candidates
    that can meet the budgets at any peak: the least exact exchange at the smallest peak (`first`'s), at any peak,
    and at `max_points - 2` peaks spaced evenly between, each solved from the point below it (never worse) in an
    equal part of `settings.time_limit`; the points that are significant (`significant`). Each point's `proven` says
    whether its solve proved its exchange the least."""
    priced = exact_problem(prepared.facts, prepared.space, prepared.problem, alive, pricing_processes(prepared))
    low = _least_at(prepared, priced, first.peak, first, settings, max_points)
    high = _least_at(prepared, priced, None, low, settings, max_points)
    points = [low]
    for cap in _caps(low.peak, high.peak, max_points - 2):
        if cap > points[-1].peak:
            points.append(_least_at(prepared, priced, cap, points[-1], settings, max_points))
    points.append(high)
    return significant(points, min_step)


def _least_at(prepared: Prepared, priced: ExactProblem, cap: int | None, below: FrontPoint, settings: SolverSettings,
              count: int) -> FrontPoint:
    """The least exact exchange with a peak of at most `cap` (None: any), from `below`'s choice (it meets the cap), in
    a `count`th of the sweep's time."""
    began = time.perf_counter()
    exact, found = exact_at(prepared, cap, replace(settings, time_limit=settings.time_limit / count), priced=priced)
    choice, proven = exact_choice(exact, below.choice, found)
    problem = exact.problem
    return FrontPoint(choice, problem.usage(choice).peak, exact.exchange_of(choice), problem.changed_of(choice),
                      proven and (cap is None or below.proven), time.perf_counter() - began)


def _caps(low: int, high: int, count: int) -> list[int]:
    """`count` peaks spaced evenly strictly between `low` and `high`."""
    step = (high - low) / (count + 1)
    return sorted({round(low + step * k) for k in range(1, count + 1)} - {low, high}) if high > low + 1 else []


def significant(points: list[FrontPoint], min_step: float, peak_step: int = PEAK_STEP) -> list[FrontPoint]:
    """The points by peak, each kept when it sends less than the last one kept and either at least `min_step` (a
    share) less or at a peak at least `peak_step` higher; of points at one peak, the one that sends least.

    >>> p = lambda peak, sent: FrontPoint((), peak, sent, 0, True, 0.0)
    >>> points = [p(10, 100), p(12, 99.5), p(12, 90), p(15, 89.5), p(40, 89.4), p(41, 80)]
    >>> [(q.peak, q.exchange_bytes) for q in significant(points, 0.01, peak_step=20)]
    [(10, 100), (12, 90), (40, 89.4), (41, 80)]
    """
    kept: list[FrontPoint] = []
    for point in sorted(points, key=lambda q: (q.peak, q.exchange_bytes)):
        if not kept:
            kept.append(point)
            continue
        last = kept[-1]
        less = point.exchange_bytes < last.exchange_bytes and point.peak > last.peak
        much_less = point.exchange_bytes <= last.exchange_bytes * (1 - min_step)
        if less and (much_less or point.peak - last.peak >= peak_step):
            kept.append(point)
    return kept


def first_point(problem: Problem, settings: SolverSettings, options: OptimizeOptions) -> FrontPoint | None:
    """The front's first point as `optimize` finds it (its constructive start and window bounds find the peak of a
    10,032-value plan where a plain model finds nothing in 10 s), or None when it finds nothing that fits."""
    began = time.perf_counter()
    solved = solve(problem, replace(settings, objective=Objective.PEAK), options.solver)
    if solved.peak is None or not problem.valid(solved.choice):
        return None
    return FrontPoint(solved.choice, solved.peak, problem.exchange_of(solved.choice), problem.changed_of(solved.choice),
                      solved.status == SolveStatus.OPTIMAL, time.perf_counter() - began)




def exact_front(prepared: Prepared, walked: list[FrontPoint], settings: SolverSettings) -> list[FrontPoint] | None:
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
    priced = exact_problem(prepared.facts, prepared.space, problem, alive, pricing_processes(prepared))
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
    return front

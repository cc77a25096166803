"""Measures only the tests and the benchmarks ask for, so the library does not carry them: the changes a
solution did not need, a floor no layout of a plan goes below, and the one-line explanation of budgets
no layout of a bare `Problem` meets."""

from __future__ import annotations

from math import prod

from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.model.problem import Problem
from ipuplan.plan.layout import ceil_div
from ipuplan.solvers import conflict


def unneeded_changes(problem: Problem, choice: tuple[int, ...]) -> list[int]:
    """Changed groups that could go back to their input layout without raising the peak or the exchange (the
    problem's: its candidates' costs and its edges' pairs), and still meet the budgets."""
    peak, exchange = problem.usage(choice).peak, problem.exchange_of(choice)
    found = []
    for g, (chosen, original) in enumerate(zip(choice, problem.input_choice)):
        if chosen == original:
            continue
        reverted = tuple(original if k == g else c for k, c in enumerate(choice))
        cheaper = problem.exchange_of(reverted) <= exchange
        usage = problem.usage(reverted)
        if cheaper and usage.peak <= peak and not usage.violation(problem.limits):
            found.append(g)
    return found


def absolute_floor(facts: PlanFacts) -> int:
    """Every live value spread over all tiles with no replication and no padding, scratch left out
    (a re-split may shrink it): no layout of any freedom level goes below this."""
    plan = facts.plan
    spread = [ceil_div(prod(v.shape) * v.element_size, plan.tile_count) for v in plan.values]
    return max((sum(spread[v] for v in step.live) for step in plan.steps), default=0)


def explain_infeasible(problem: Problem, seconds: float) -> str:
    """The line `replan.explain` opens with, for a problem without a plan: a row of a minimal conflict,
    what it needs while the others hold, and the lowest reachable peak."""
    found = conflict.minimal_conflict(problem, seconds * 0.6)
    lowest = conflict.lowest_peak_outside(problem, found, seconds * 0.4)
    return conflict.conflict_line(problem, found, lowest, seconds)

"""Greedy backend: from the input, repeatedly make the single switch that lowers (forbidden picks, budget excess,
peak) most (with the `fit` objective: (forbidden picks, budget excess, exchange bytes with every edge's pair)).

Switches are tried for the groups of a forbidden pick while there is one, then for the groups live at the peak
step, or at the step most over budget. A baseline to measure CP-SAT against, on the same `Problem`; a choice
with a forbidden pick or over a budget is no solution.
"""

from __future__ import annotations

import time

import numpy as np

from ipuplan.model.objective import Objective
from ipuplan.model.problem import Problem, Usage
from ipuplan.solvers.construct import GroupRows, Pairing, repair
from ipuplan.solvers.result import Progress, SolveResult, SolverSettings, SolveStatus, model_size


def greedy_choice(problem: Problem, objective: Objective = Objective.PEAK) -> tuple[int, ...]:
    """With the peak objective, the constructive repair started from the input (scored incrementally, so it
    scales to 50k values); with `fit`, single switches scored on the whole usage."""
    choice = list(problem.input_choice)
    if not problem.rows or not problem.groups:
        return tuple(choice)
    if objective == Objective.PEAK:
        return tuple(repair(problem, choice, GroupRows(problem)))

    def score(trial: tuple[int, ...], usage: Usage) -> tuple[int, int, int]:
        second = problem.exchange_of(trial) if objective == Objective.FIT else usage.peak
        return problem.forbidden_in(trial), usage.violation(problem.limits), second

    pairing = Pairing(problem)
    current = problem.usage(tuple(choice))
    while True:
        involved = pairing.picks(choice)[1] if pairing.priced else []
        groups = involved or [g for g, _, _ in problem.rows[_focus_row(current, problem)].terms]
        best = (score(tuple(choice), current), None)
        for g in groups:
            for c in range(problem.candidate_counts[g]):
                trial = tuple(c if k == g else x for k, x in enumerate(choice))
                trial_score = score(trial, problem.usage(trial))
                if trial_score < best[0]:
                    best = (trial_score, (g, c))
        if best[1] is None:
            return tuple(choice)
        g, c = best[1]
        choice[g] = c
        current = problem.usage(tuple(choice))


def _focus_row(usage: Usage, problem: Problem) -> int:
    """The step most over budget, or the peak step when everything fits."""
    over = usage.excess(problem.limits)
    if over.any():
        return int(np.argmax(over))
    return int(np.argmax(usage.standard + usage.interleaved))


def solve(problem: Problem, settings: SolverSettings, progress: Progress | None = None) -> SolveResult:
    """The greedy choice; optimal when it meets the lower bound, no solution when it breaks a budget."""
    started = time.perf_counter()
    fit = settings.objective == Objective.FIT
    choice = greedy_choice(problem, settings.objective)
    usage = problem.usage(choice)
    bound = problem.lower_bound()
    seconds = time.perf_counter() - started
    if progress is not None:
        progress("greedy", usage.peak, bound, seconds)
    sizes = {**model_size(problem), "solve_seconds": seconds, "first_solution_seconds": seconds}
    if not problem.valid(choice):
        return SolveResult(SolveStatus.NO_SOLUTION, problem.input_choice, None, bound, objective=settings.objective,
                           **sizes)
    least_exchange = sum(min(costs) for costs in problem.exchange) + sum(int(e.costs.min()) for e in problem.edges)
    exchange = problem.exchange_of(choice)
    proven = exchange == least_exchange if fit else usage.peak == bound
    return SolveResult(SolveStatus.OPTIMAL if proven else SolveStatus.FEASIBLE, choice, usage.peak, bound,
                       exchange_bytes=exchange, changed_values=problem.changed_of(choice), objective=settings.objective,
                       exchange_bound=least_exchange if fit else None, **sizes)

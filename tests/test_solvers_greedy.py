"""The greedy baseline (`solvers.greedy`): single switches from the input, each the one that lowers (forbidden picks,
budget excess, peak or, with `fit`, exchange) most. Where it stalls on a hand-made problem, what it proves, and on
the reference plan's problem, between the bound and the optimum."""

from __future__ import annotations

import numpy as np
from problems import STALL, b, consistent, problem

from ipuplan.model.objective import Objective
from ipuplan.model.problem import FORBIDDEN, Edge, StepRow
from ipuplan.plan.budgets import Budgets
from ipuplan.solvers import SolverSettings, SolveStatus, solve
from ipuplan.solvers.greedy import greedy_choice

SETTINGS = SolverSettings(time_limit=5, workers=1, deterministic=True)


def test_greedy_stalls_where_two_groups_must_change_together():
    greedy = solve(STALL, SETTINGS, "greedy")
    assert (greedy.status, greedy.peak, greedy.choice, greedy.bound) == (SolveStatus.FEASIBLE, 100, (0, 0), 60)
    consistent(STALL, greedy)


def test_at_least_as_good_as_greedy_and_bound(storage_problem, storage_result):
    greedy = storage_problem.usage(greedy_choice(storage_problem)).peak
    assert storage_problem.lower_bound() <= storage_result.after.raw_peak <= greedy


# One group over 20 constant standard bytes: candidate 0 (input) 100 standard, 1: 40 standard, 2: 45 interleaved;
# the movers send 0, 900 and 300 bytes. Standard <= 60, interleaved <= 50, total <= 70 exclude the input.
TIGHT = problem([StepRow(7, 20, 0, ((0, b(100, 40, 0), b(0, 0, 45)),))], (3,), exchange=((0, 900, 300),),
                limits=Budgets(110, 50, 40).limits)


def test_fit_switches_to_the_least_exchange_within_the_budgets_and_peak_to_the_least_peak():
    assert greedy_choice(TIGHT, Objective.FIT) == (2,)  # 300 bytes sent, peak 65
    assert greedy_choice(TIGHT, Objective.PEAK) == (1,)  # peak 60, 900 bytes sent
    fitted = solve(TIGHT, SolverSettings(time_limit=5, workers=1, objective=Objective.FIT), "greedy")
    # the least exchange it can prove is every group's cheapest candidate's, the input's 0 that breaks the budgets
    assert (fitted.status, fitted.choice, fitted.exchange_bytes, fitted.exchange_bound) == (
        SolveStatus.FEASIBLE, (2,), 300, 0)
    consistent(TIGHT, fitted)


def test_a_forbidden_input_is_left_first_and_the_bound_it_meets_proves_the_choice():
    p = problem([StepRow(0, 0, 0, ((0, b(10, 10), b(0, 0)),))], (2,), exchange=((FORBIDDEN, 3),))
    assert p.forbidden_in(p.input_choice) and greedy_choice(p) == greedy_choice(p, Objective.FIT) == (1,)
    result = solve(p, SETTINGS, "greedy")
    assert (result.status, result.peak, result.bound, result.exchange_bytes) == (SolveStatus.OPTIMAL, 10, 10, 3)


def test_a_forbidden_pair_is_left_by_one_switch():
    p = problem([StepRow(0, 0, 0, ((0, b(10, 10), b(0, 0)), (1, b(10, 10), b(0, 0))))], (2, 2),
                edges=[Edge(0, 1, np.array([[FORBIDDEN, 0], [0, 0]]))])
    for objective in Objective:
        choice = greedy_choice(p, objective)
        assert p.forbidden_in(choice) == 0 and sum(c != i for c, i in zip(choice, p.input_choice)) == 1

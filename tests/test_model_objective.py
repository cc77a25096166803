"""The objectives (`model.objective`): each is the least of its terms in the order `OBJECTIVES` lists them, which is
what the exact backends minimise, checked by brute force on a problem where `peak` and `fit` choose differently."""

from __future__ import annotations

from dataclasses import replace
from importlib.util import find_spec

import pytest
from problems import b, problem, valid_choices

from ipuplan.model.objective import OBJECTIVES, Objective, Term
from ipuplan.model.problem import Problem, StepRow
from ipuplan.plan.budgets import Budgets
from ipuplan.solvers import SolverSettings, solve

SETTINGS = SolverSettings(time_limit=5, workers=1, deterministic=True)
HIGHS = pytest.param("highs", marks=pytest.mark.skipif(find_spec("scipy") is None, reason="HiGHS needs SciPy"))
MEASURED = {Term.PEAK: lambda p, c: p.usage(c).peak, Term.EXCHANGE: Problem.exchange_of,
            Term.CHANGED: Problem.changed_of}
"""Each term of a choice, measured on the problem itself."""

# Two groups over 20 constant standard bytes; standard <= 90, interleaved <= 50, total <= 140 exclude A's input:
#   step 0 = 20 + A[100 (input) | 40 | 45 il] + B[30 (input) | 10]; A sends 0, 900, 300; B sends 0, 50 (3 values)
TRADE = problem([StepRow(0, 20, 0, ((0, b(100, 40, 0), b(0, 0, 45)), (1, b(30, 10), b(0, 0))))], (3, 2),
                exchange=((0, 900, 300), (0, 50)), sizes=(1, 3), limits=Budgets(140, 50, 0).limits)


def terms_of(p: Problem, choice: tuple[int, ...], objective: Objective) -> tuple[int, ...]:
    return tuple(MEASURED[term](p, choice) for term in OBJECTIVES[objective])


def test_every_objective_has_its_terms_once_and_only_peak_minimises_the_peak():
    assert set(OBJECTIVES) == set(Objective)
    assert all(len(set(terms)) == len(terms) and terms[-1] == Term.CHANGED for terms in OBJECTIVES.values())
    assert [Term.PEAK in OBJECTIVES[o] for o in (Objective.PEAK, Objective.FIT)] == [True, False]


@pytest.mark.parametrize("backend", ["cpsat", HIGHS])
@pytest.mark.parametrize("objective", list(Objective))
def test_each_objective_is_the_least_of_its_terms_in_order(objective, backend):
    found = solve(TRADE, replace(SETTINGS, objective=objective), backend)
    best = min(terms_of(TRADE, choice, objective) for choice in valid_choices(TRADE))
    assert terms_of(TRADE, found.choice, objective) == best


def test_the_two_objectives_choose_differently_here():
    chosen = {o: solve(TRADE, replace(SETTINGS, objective=o)).choice for o in Objective}
    # peak: A's and B's smallest (peak 70) whatever they send; fit: A's interleaved one (300 bytes, peak 95), B kept
    assert chosen == {Objective.PEAK: (1, 1), Objective.FIT: (2, 0)}

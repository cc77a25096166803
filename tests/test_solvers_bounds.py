"""`solvers.bounds` (issue 11): a window is the problem of its rows alone, and its least peak is a lower bound
the whole problem cannot beat (or, when it cannot fit, a proof that the whole cannot)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from problems import b, problem

from ipuplan.model.problem import FORBIDDEN, Edge, StepRow
from ipuplan.plan.budgets import Budgets
from ipuplan.solvers import SolverSettings, SolveStatus, solve
from ipuplan.solvers.bounds import window, window_bound, window_key
from ipuplan.solvers.cpsat import solve_reduced

SETTINGS = SolverSettings(time_limit=5, workers=1, deterministic=True)


# A is live at both rows and must be large at one of them: per row the least is 10 + 0, but any choice
# puts 50 at one row. B, at row 2 only, is independent of A.
#   row 0 = 10 + A[0 | 40]   row 1 = 10 + A[40 | 0]   row 2 = 20 + B[5 | 3]
COUPLED = problem([StepRow(0, 10, 0, ((0, b(0, 40), b(0, 0)),)), StepRow(1, 10, 0, ((0, b(40, 0), b(0, 0)),)),
                   StepRow(2, 20, 0, ((1, b(5, 3), b(0, 0)),))], (2, 2))


def test_a_window_is_the_problem_of_its_rows_alone():
    sub = window(COUPLED, 1, 3)
    assert sub.candidate_counts == (2, 2) and [row.step for row in sub.rows] == [1, 2]
    assert [g for row in sub.rows for g, _, _ in row.terms] == [0, 1]
    assert window_key(COUPLED, 1, 3) == window_key(COUPLED, 1, 3) != window_key(COUPLED, 0, 2)


def test_windows_of_equal_bytes_share_a_key_whatever_their_groups():
    # rows 0-1 and 2-3 are copies (groups 0, 1 and 2, 3 in the same roles); row 4 differs from row 0 in one byte
    copy = [StepRow(0, 5, 0, ((0, b(1, 2), b(0, 0)), (1, b(3, 4), b(0, 0)))),
            StepRow(1, 5, 0, ((1, b(3, 4), b(0, 0)),)),
            StepRow(2, 5, 0, ((2, b(1, 2), b(0, 0)), (3, b(3, 4), b(0, 0)))),
            StepRow(3, 5, 0, ((3, b(3, 4), b(0, 0)),)),
            StepRow(4, 5, 0, ((4, b(1, 3), b(0, 0)), (5, b(3, 4), b(0, 0)))),
            StepRow(5, 5, 0, ((5, b(3, 4), b(0, 0)),))]
    copies = problem(copy, (2,) * 6)
    assert window_key(copies, 0, 2) == window_key(copies, 2, 4) != window_key(copies, 4, 6)
    # the same bytes at row 1 held by the other group is another window
    swapped = problem([copy[0], StepRow(1, 5, 0, ((0, b(3, 4), b(0, 0)),))], (2, 2))
    assert window_key(swapped, 0, 2) != window_key(copies, 0, 2)


def test_a_window_bound_beats_the_per_row_bound_and_never_the_optimum():
    found = window_bound(COUPLED, lambda sub, s: solve_reduced(sub, s, windows=False), SETTINGS, target=10**9, rows=2)
    assert COUPLED.lower_bound() == 23 and found.bound == 50 and not found.infeasible
    assert found.bound <= solve(COUPLED, SETTINGS).peak == 50


def test_a_window_that_cannot_fit_proves_the_whole_cannot():
    tight = COUPLED.with_limits(Budgets(45, 100, 0).limits)
    found = window_bound(tight, lambda sub, s: solve_reduced(sub, s, windows=False), SETTINGS, target=10**9, rows=2)
    assert found.infeasible
    assert solve(tight, SETTINGS).status == SolveStatus.INFEASIBLE


@pytest.mark.parametrize("budgets", [None, Budgets(45, 100, 0)])
def test_windows_and_the_whole_model_agree_with_brute_force(budgets):
    p = COUPLED if budgets is None else COUPLED.with_limits(budgets.limits)
    result = solve(p, SETTINGS)
    feasible = [p.usage(c).peak for c in itertools.product(range(2), range(2)) if not p.usage(c).violation(p.limits)]
    assert (result.peak, result.status) == ((min(feasible), SolveStatus.OPTIMAL) if feasible
                                            else (None, SolveStatus.INFEASIBLE))


def test_a_window_keeps_the_edges_between_its_groups_only():
    # A (row 0) and C (row 2) are joined to B (row 1): the window of rows 0-1 has A and B and their edge alone, its
    # forbidden pair (A1, B0) kept, renumbered; the window of row 2 has C alone and no edge.
    rows = [StepRow(r, 0, 0, ((r, b(1, 2), b(0, 0)),)) for r in range(3)]
    joined = problem(rows, (2, 2, 2), edges=[Edge(0, 1, np.array([[0, 1], [FORBIDDEN, 0]])),
                                             Edge(2, 1, np.array([[3, 0], [0, 3]]))])
    first = window(joined, 0, 2)
    assert [(e.a, e.b, e.costs.tolist()) for e in first.edges] == [(0, 1, [[0, 1], [FORBIDDEN, 0]])]
    assert window(joined, 2, 3).edges == ()
    assert window_key(joined, 0, 2) != window_key(joined, 1, 3)  # the same bytes, but an edge of another pair


@pytest.mark.parametrize("budgets", [None, Budgets(45, 100, 0), Budgets(50, 100, 0)])
def test_a_window_s_bound_only_solve_has_the_whole_solve_s_status_and_bound_and_runs_one_phase(monkeypatch, budgets):
    from ipuplan.solvers import cpsat

    p = COUPLED if budgets is None else COUPLED.with_limits(budgets.limits)
    whole = solve_reduced(p, SETTINGS, windows=False)
    ordered, ran = [], []
    run_phases, run = cpsat.run_phases, cpsat._run
    monkeypatch.setattr(cpsat, "run_phases",
                        lambda *a, **k: ordered.extend(f.name for f in a[1]) or run_phases(*a, **k))
    monkeypatch.setattr(cpsat, "_run", lambda *a, **k: ran.append(a[3]) or run(*a, **k))
    alone = cpsat._without_windows(p, SETTINGS)
    assert (alone.status, alone.bound) == (whole.status, whole.bound)
    assert ordered[0] == "peak" and len(ordered) > 1 and ran == ["peak"]  # the phases after it there, and not run

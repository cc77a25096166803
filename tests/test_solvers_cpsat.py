"""`solvers.cpsat`, never nothing: the solver skipped when the constructive start is proven, that start
returned when the solver finds nothing, the peak phase skipped when the hint meets the floor (issue 11)."""

from __future__ import annotations

import time

import pytest
from problems import BUDGETED, b, problem

from ipuplan.model.problem import StepRow
from ipuplan.solvers import SolverSettings, SolveStatus, cpsat
from ipuplan.solvers.cpsat import PhaseOutcome
from ipuplan.solvers.deadline import DETERMINISTIC_WALL

SETTINGS = SolverSettings(time_limit=5, workers=1, deterministic=True)


# Two groups, each with one candidate smallest at every step it is live at and cheapest in exchange (the
# input sends 5 bytes per group): every group at its smallest reaches the per-row floor and the least
# exchange, so nothing can beat it.
#   step 0 = 50 + A[30, 10] + B[40, 20]   step 1 = 10 + A[30, 10]   peak 80 (floor 80), input 120
EASY = problem([StepRow(0, 50, 0, ((0, b(30, 10), b(0, 0)), (1, b(40, 20), b(0, 0)))),
                StepRow(1, 10, 0, ((0, b(30, 10), b(0, 0)),))], (2, 2), exchange=((5, 0), (5, 0)))


def test_constructive_meets_the_floor_and_the_solver_is_skipped(monkeypatch):
    monkeypatch.setattr(cpsat, "build_model", lambda *a, **k: pytest.fail("CP-SAT must not be built"))
    result = cpsat.solve(EASY, SETTINGS)
    assert (result.status, result.choice, result.peak, result.bound) == (SolveStatus.OPTIMAL, (1, 1), 80, 80)
    assert result.constructed and result.variables == 0


def test_no_solution_from_cpsat_returns_the_constructive_plan(monkeypatch):
    # The input (0, 0) breaks the standard budget; the solver is made to find nothing in time.
    def nothing(choices, ordered, settings, progress, built, first_only=False):
        return [PhaseOutcome(ordered[0], SolveStatus.NO_SOLUTION, 0, 0)], None, None, 0.0

    monkeypatch.setattr(cpsat, "run_phases", nothing)
    result = cpsat.solve(BUDGETED, SETTINGS)
    assert result.status == SolveStatus.FEASIBLE and result.constructed
    assert result.choice == (1, 1) and BUDGETED.usage(result.choice).violation(BUDGETED.limits) == 0


def test_a_hint_that_meets_the_floor_skips_the_peak_phase(monkeypatch):
    # Same as EASY, but the input is cheaper in exchange: the peak is proven, the exchange phase still runs.
    costly = problem(EASY.rows, (2, 2), exchange=((0, 5), (0, 5)))
    seen = []
    original = cpsat.run_phases

    def spy(choices, ordered, *rest):
        seen.extend(phase.name for phase in ordered)
        return original(choices, ordered, *rest)

    monkeypatch.setattr(cpsat, "run_phases", spy)
    result = cpsat.solve(costly, SETTINGS)
    assert seen == ["exchange"] and result.status == SolveStatus.OPTIMAL and (result.peak, result.bound) == (80, 80)


def test_past_proxy_ties_entries_a_proven_peak_ends_the_solve(monkeypatch):
    # `costly` again, as if large: the exchange phase would minimise only the model's proxy, so the start is the answer
    costly = problem(EASY.rows, (2, 2), exchange=((0, 5), (0, 5)))
    monkeypatch.setattr(cpsat, "PROXY_TIES_ENTRIES", 0)
    monkeypatch.setattr(cpsat, "build_model", lambda *a, **k: pytest.fail("CP-SAT must not be built"))
    result = cpsat.solve(costly, SETTINGS)
    assert (result.status, result.choice, result.peak, result.bound) == (SolveStatus.OPTIMAL, (1, 1), 80, 80)
    assert result.constructed and result.ties_left and result.exchange_bytes == 10


def test_without_proxy_ties_a_proven_peak_ends_the_solve(monkeypatch):
    # `costly` as it is: the exact exchange stage follows (`proxy_ties` off), so the start is the answer
    costly = problem(EASY.rows, (2, 2), exchange=((0, 5), (0, 5)))
    monkeypatch.setattr(cpsat, "build_model", lambda *a, **k: pytest.fail("CP-SAT must not be built"))
    result = cpsat.solve(costly, SolverSettings(time_limit=5, workers=1, deterministic=True, proxy_ties=False))
    assert (result.status, result.choice, result.peak, result.bound) == (SolveStatus.OPTIMAL, (1, 1), 80, 80)
    assert result.constructed and result.ties_left and result.exchange_bytes == 10


def test_a_solved_model_reports_its_size():
    # BUDGETED's input breaks a budget, so the model is built: a boolean per candidate and the peak; before
    # reduction every candidate of both terms under the peak and the three budgets
    result = cpsat.solve(BUDGETED, SETTINGS)
    assert not result.constructed and (result.variables, result.entries_before) == (2 + 2 + 1, 2 * 2 * (1 + 3))
    assert (result.steps_kept, result.steps_total) == (1, 1) and 0 < result.entries < result.entries_before


def test_a_deterministic_run_counts_units_and_keeps_only_a_wall_guard():
    """With one worker the deterministic units bind (the same bytes on every machine); the wall limit is a guard
    (`deadline.DETERMINISTIC_WALL` x the units); with more workers the wall limit never passes the run's deadline."""
    solver = cpsat._solver(SolverSettings(time_limit=3, deterministic=True, ends_at=time.perf_counter()), 3)
    assert solver.parameters.max_deterministic_time == 3
    assert solver.parameters.max_time_in_seconds == 3 * DETERMINISTIC_WALL
    solver = cpsat._solver(SolverSettings(time_limit=3, ends_at=time.perf_counter() + 1.0), 3)
    assert solver.parameters.max_time_in_seconds <= 1.0

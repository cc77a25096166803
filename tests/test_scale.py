"""Never nothing: the constructive solution, the solver skipped when it is proven, the best known plan when
the solver finds nothing, and a non-fitting result never exits 0 (issue 11)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from typer.testing import CliRunner

from ipuplan.cli import app
from ipuplan.model.objective import Objective
from ipuplan.model.problem import Problem, StepRow, usage_of
from ipuplan.plan.budgets import Budgets
from ipuplan.solvers import SolverSettings, SolveStatus, cpsat
from ipuplan.solvers.construct import construct
from ipuplan.solvers.cpsat import PhaseOutcome

SETTINGS = SolverSettings(time_limit=5, workers=1, deterministic=True)


def b(*numbers: int) -> np.ndarray:
    return np.array(numbers, dtype=np.int64)


def problem(rows, counts, *, exchange=None, limits=(), input_choice=None) -> Problem:
    return Problem(candidate_counts=counts, input_choice=input_choice or (0,) * len(counts),
                   group_sizes=(1,) * len(counts), rows=tuple(rows),
                   exchange=exchange or tuple((0,) * n for n in counts), limits=limits, steps_total=len(rows))


# Two groups, each with one candidate smallest at every step it is live at and cheapest in exchange (the
# input sends 5 bytes per group): every group at its smallest reaches the per-row floor and the least
# exchange, so nothing can beat it.
#   step 0 = 50 + A[30, 10] + B[40, 20]   step 1 = 10 + A[30, 10]   peak 80 (floor 80), input 120
EASY = problem([StepRow(0, 50, 0, ((0, b(30, 10), b(0, 0)), (1, b(40, 20), b(0, 0)))),
                StepRow(1, 10, 0, ((0, b(30, 10), b(0, 0)),))], (2, 2), exchange=((5, 0), (5, 0)))

# A must trade standard for interleaved at step 0 to meet a 60-byte standard budget; its smallest
# candidate (by total bytes) is standard, so the repair has to move it. Interleaved budget 100.
#   step 0 = 20 std + A[std 50 | il 55] + B[std 30, 10]
BUDGETED = problem([StepRow(0, 20, 0, ((0, b(50, 0), b(0, 55)), (1, b(30, 10), b(0, 0))))], (2, 2),
                   limits=Budgets(160, 100, 0).limits)


def test_constructive_meets_the_floor_and_the_solver_is_skipped(monkeypatch):
    monkeypatch.setattr(cpsat, "build_model", lambda *a, **k: pytest.fail("CP-SAT must not be built"))
    result = cpsat.solve(EASY, SETTINGS)
    assert (result.status, result.choice, result.peak, result.bound) == (SolveStatus.OPTIMAL, (1, 1), 80, 80)
    assert result.constructed and result.variables == 0


def test_constructive_repairs_a_budget_the_smallest_candidates_break():
    # Smallest by bytes is A=0 (50 std): standard 20 + 50 + 10 = 80 > 60. A=1 puts 55 in interleaved: fits.
    choice = construct(BUDGETED)
    usage = usage_of(BUDGETED.rows, choice)
    assert choice == (1, 1) and usage.violation(BUDGETED.limits) == 0


def test_no_solution_from_cpsat_returns_the_constructive_plan(monkeypatch):
    # The input (0, 0) breaks the standard budget; the solver is made to find nothing in time.
    def nothing(choices, ordered, settings, progress, built):
        return [PhaseOutcome(ordered[0], SolveStatus.NO_SOLUTION, 0, 0)], None, None

    monkeypatch.setattr(cpsat, "run_phases", nothing)
    result = cpsat.solve(BUDGETED, SETTINGS)
    assert result.status == SolveStatus.FEASIBLE and result.constructed
    assert result.choice == (1, 1) and usage_of(BUDGETED.rows, result.choice).violation(BUDGETED.limits) == 0


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


def test_deterministic_run_keeps_the_wall_clock_limit():
    solver = cpsat._solver(SolverSettings(time_limit=3, deterministic=True), 3)
    assert solver.parameters.max_time_in_seconds == 3 and solver.parameters.max_deterministic_time == 3


def test_constructive_is_fast_on_many_rows():
    # 2,000 groups over 3,000 rows, 8 candidates each: the numpy repair stays well under a second.
    rng = np.random.default_rng(0)
    rows = []
    for r in range(3000):
        groups = sorted(set(rng.integers(0, 2000, 30).tolist()))
        rows.append(StepRow(r, 100, 0, tuple((g, rng.integers(1, 100, 8), np.zeros(8, dtype=np.int64)) for g in groups)))
    big = problem(rows, (8,) * 2000)
    started = time.perf_counter()
    choice = construct(big)
    assert time.perf_counter() - started < 5
    assert usage_of(big.rows, choice).peak < usage_of(big.rows, big.input_choice).peak


def test_a_result_over_its_budgets_exits_non_zero(tmp_path, monkeypatch):
    # The 6-layer chip plan overflows its budgets; a solver that finds nothing leaves it over them.
    from ipuplan.replan import pipeline as optimizer
    from ipuplan.solvers.result import SolveResult

    def nothing(problem, settings, backend, progress):
        return SolveResult(SolveStatus.NO_SOLUTION, problem.input_choice, None, 0, 0.0, 0.0, None, 0, 0,
                           len(problem.rows), problem.steps_total)

    monkeypatch.setattr(optimizer, "solve", nothing)
    out = tmp_path / "out.json"
    result = CliRunner().invoke(app, ["optimize", "models/vit-so400m-6layers-chip.json", "-o", str(out)])
    assert result.exit_code == 3, result.output
    assert "does not fit" in result.output


def test_fit_objective_constructive_fits():
    choice = construct(BUDGETED, Objective.FIT)
    assert usage_of(BUDGETED.rows, choice).violation(BUDGETED.limits) == 0

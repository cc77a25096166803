"""`solvers`: every backend by name on small hand-made `Problem`s whose answers are worked out by hand; a
backend registered from a test runs like a built-in; no backend loads the facts or the candidate space."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest
from problems import STALL, b, consistent, problem
from typer.testing import CliRunner

import ipuplan
from ipuplan import solvers
from ipuplan.cli import app
from ipuplan.facts.check import check
from ipuplan.model.objective import Objective
from ipuplan.model.problem import Problem, StepRow
from ipuplan.plan.budgets import Budgets
from ipuplan.replan.options import BadOption
from ipuplan.solvers import SolveResult, SolverSettings, SolveStatus, model_size, register_backend, solve
from ipuplan.solvers.construct import construct

SETTINGS = SolverSettings(time_limit=5, workers=1, deterministic=True)
HIGHS = pytest.param("highs", marks=pytest.mark.skipif(find_spec("scipy") is None, reason="HiGHS needs SciPy"))
EXACT = ["cpsat", HIGHS]
ALL = ["cpsat", HIGHS, "greedy"]


# Group A (3 candidates, standard) and group B (2 candidates, interleaved); A's candidate 2 is
# small at step 0 but brings 70 bytes of scratch to step 1.
#   step 0 = 100 + A[60, 40, 20] + B[50, 30]     step 1 = 80 + A[0, 0, 70] + B[50, 30]
#   (0,0): 210/130  (0,1): 190/110  (1,0): 190/130  (1,1): 170/110  (2,0): 170/200  (2,1): 150/180
# so the optimum is (1, 1) with peak 170; the per-row floor is max(100+20+30, 80+0+30) = 150.
KNOWN = problem(
    [
        StepRow(0, 100, 0, ((0, b(60, 40, 20), b(0, 0, 0)), (1, b(0, 0), b(50, 30)))),
        StepRow(1, 80, 0, ((0, b(0, 0, 70), b(0, 0, 0)), (1, b(0, 0), b(50, 30)))),
    ],
    (3, 2),
)


@pytest.mark.parametrize("backend", ALL)
def test_finds_the_known_optimum(backend):
    result = solve(KNOWN, SETTINGS, backend)
    assert (result.peak, result.choice) == (170, (1, 1))
    consistent(KNOWN, result)
    # greedy cannot prove 170 optimal: it only knows the floor 150
    assert result.status == (SolveStatus.FEASIBLE if backend == "greedy" else SolveStatus.OPTIMAL)


@pytest.mark.parametrize("backend", EXACT)
def test_equal_peaks_are_broken_by_exchange_bytes_before_changed_values(backend):
    # peak = 10 + A + B; A's candidates 1 and 2 both give 60, candidate 2 sends less (200 < 500).
    # B's candidates are the same size, but leaving the input (5 values changed) saves 3 exchange
    # bytes, and exchange comes before changed values.
    p = problem(
        [StepRow(0, 10, 0, ((0, b(100, 60, 60), b(0, 0, 0)), (1, b(0, 0), b(50, 50))))],
        (3, 2),
        sizes=(1, 5),
        exchange=((0, 500, 200), (3, 0)),
    )
    result = solve(p, SETTINGS, backend)
    assert (result.peak, result.choice) == (10 + 60 + 50, (2, 1))
    assert (result.exchange_bytes, result.changed_values) == (200, 1 + 5)
    consistent(p, result)


@pytest.mark.parametrize("backend", EXACT)
def test_equal_peaks_and_exchange_are_broken_by_fewest_changed_values(backend):
    # step 0 = 100 + A[40, 20] + B[40, 20], step 1 = 160: changing A, B or both reaches 160;
    # changing only B (1 value, not A's 3) is the least change.
    p = problem(
        [StepRow(0, 100, 0, ((0, b(40, 20), b(0, 0)), (1, b(40, 20), b(0, 0)))), StepRow(1, 160, 0, ())],
        (2, 2),
        sizes=(3, 1),
    )
    result = solve(p, SETTINGS, backend)
    assert (result.peak, result.choice, result.changed_values) == (160, (0, 1), 1)
    consistent(p, result)


@pytest.mark.parametrize("backend", ALL)
def test_input_choice_other_than_zero_is_kept_and_changes_counted_against_it(backend):
    # A's three candidates are the same size: only the input (2) changes nothing.
    # B must leave its input (0) to lower the peak from 10+10+50 = 70 to 40.
    p = problem(
        [StepRow(0, 10, 0, ((0, b(10, 10, 10), b(0, 0, 0)), (1, b(50, 20), b(0, 0))))],
        (3, 2),
        sizes=(4, 2),
        input_choice=(2, 0),
    )
    result = solve(p, SETTINGS, backend)
    assert (result.peak, result.choice, result.changed_values) == (40, (2, 1), 2)
    consistent(p, result)


# One group over 20 constant standard bytes: candidate 0 (input) 100 standard, 1: 40 standard,
# 2: 45 interleaved. Peaks: 120, 60, 65.
ONE_GROUP = problem([StepRow(7, 20, 0, ((0, b(100, 40, 0), b(0, 0, 45)),))], (3,), steps_total=8)


@pytest.mark.parametrize("backend", ALL)
def test_budgets_exclude_the_unconstrained_optimum(backend):
    free = solve(ONE_GROUP, SETTINGS, backend)
    assert (free.peak, free.choice) == (60, (1,))
    # standard limit 200 - 150 = 50 < 60: only candidate 2 (standard 20, interleaved 45) fits
    budgeted = Budgets(budget_bytes=200, interleaved_budget_bytes=150, support_reserve_bytes=0)
    p = problem(ONE_GROUP.rows, (3,), limits=budgeted.limits, steps_total=8)
    result = solve(p, SETTINGS, backend)
    assert (result.peak, result.choice) == (65, (2,))
    assert p.usage(result.choice).violation(p.limits) == 0
    consistent(p, result)
    if backend != "greedy":
        assert result.status == SolveStatus.OPTIMAL


# Budgets(60, 30, 0): standard <= 30, interleaved <= 30, total <= 60. Every candidate breaks one:
#   0: standard 120 (90 over), total 120 (60 over)  -> 150
#   1: standard 60 (30 over), total 60              -> 30
#   2: interleaved 45 (15 over), total 65 (5 over)  -> 20, the least slack
INFEASIBLE = problem(ONE_GROUP.rows, (3,), limits=Budgets(60, 30, 0).limits, steps_total=8)


@pytest.mark.parametrize("backend", ALL)
def test_infeasible_budgets_give_no_choice(backend):
    result = solve(INFEASIBLE, SETTINGS, backend)
    expected = SolveStatus.NO_SOLUTION if backend == "greedy" else SolveStatus.INFEASIBLE
    assert (result.status, result.peak, result.choice) == (expected, None, INFEASIBLE.input_choice)


@pytest.mark.parametrize("backend", EXACT)
def test_exact_backends_change_both_groups_where_greedy_stalls(backend):
    result = solve(STALL, SETTINGS, backend)
    assert (result.status, result.peak, result.choice) == (SolveStatus.OPTIMAL, 80, (1, 1))
    consistent(STALL, result)


# A plan with no steps (and so no free group) gives a problem with no rows: peak 0, nothing to choose.
EMPTY = problem([], ())


@pytest.mark.parametrize(
    "backend",
    ["cpsat", HIGHS, "greedy"],
)
def test_a_problem_without_rows_is_solved_with_peak_zero(backend):
    result = solve(EMPTY, SETTINGS, backend)
    assert (result.status, result.peak, result.choice) == (SolveStatus.OPTIMAL, 0, ())


def the_constructive_start(problem: Problem, settings: SolverSettings, progress) -> SolveResult:
    """A stub backend: the constructive start as it is, no model written."""
    choice = construct(problem, settings.objective)
    return SolveResult(SolveStatus.FEASIBLE, choice, problem.usage(choice).peak, problem.lower_bound(),
                       solve_seconds=0.0, first_solution_seconds=0.0, exchange_bytes=problem.exchange_of(choice),
                       changed_values=problem.changed_of(choice), objective=settings.objective, **model_size(problem))


@pytest.fixture
def stub(monkeypatch) -> list[Problem]:
    """The stub registered as `stub` for one test (the registry is restored after it); the problems it saw."""
    monkeypatch.setattr(solvers, "BACKENDS", dict(solvers.BACKENDS))
    seen: list[Problem] = []
    register_backend("stub", lambda problem, settings, progress: seen.append(problem) or the_constructive_start(
        problem, settings, progress))
    return seen


def test_a_registered_backend_solves_by_name(stub):
    result = solve(KNOWN, SETTINGS, "stub")
    assert stub == [KNOWN] and result.choice == construct(KNOWN)
    consistent(KNOWN, result)


def test_a_registered_backend_optimises_a_plan(stub, reference_plan):
    result = ipuplan.optimize(reference_plan, solver="stub", workers=1)
    assert result.options.solver.value == "stub"
    # the plan's problem without the Gemm splits a cap left out (none of them can beat the constructive choice's
    # peak: the relaxation's per-row floor already reaches it), then the exact exchange at the peak found: pairwise
    # costs, a cap on the peak, nothing left out
    assert not stub[0].left_out and not stub[0].edges and len(stub) == 2
    assert stub[1].edges and not stub[1].left_out and stub[1].limits[-1].bytes == result.after.raw_peak
    assert result.status.value == "optimal" and result.solve.left_out > 0
    first, exact = construct(stub[0]), construct(stub[1], Objective.FIT)
    assert result.solve.choice in (first, exact) and result.after.raw_peak == stub[0].usage(first).peak
    assert check(result.plan) == []


def test_an_unknown_backend_is_a_bad_option_naming_the_registered_ones(reference_plan):
    with pytest.raises(BadOption, match="option solver: no solver backend 'stub': one of cpsat, highs, greedy$"):
        ipuplan.optimize(reference_plan, solver="stub")
    with pytest.raises(ValueError, match="no solver backend 'stub'"):
        solve(KNOWN, SETTINGS, "stub")


def test_a_backend_that_finds_nothing_exits_3_unless_the_constructive_choice_known_before_fits(tmp_path, monkeypatch):
    # The 6-layer chip plan overflows its budgets; a backend that finds nothing leaves it over them.
    def nothing(problem, settings, progress):
        return SolveResult(SolveStatus.NO_SOLUTION, problem.input_choice, None, 0, solve_seconds=0.0,
                           first_solution_seconds=None, **model_size(problem))

    monkeypatch.setitem(solvers.BACKENDS, "cpsat", nothing)
    out = tmp_path / "out.json"
    result = CliRunner().invoke(app, ["optimize", "models/vit-so400m-6layers-chip.json", "-o", str(out),
                                      "--scope", "storage"])
    assert result.exit_code == 3, result.output
    # the words are the CLI's (it now says no fitting layout was found in time, and that nothing was written)
    assert "does not fit" in result.output or "nothing written" in result.output
    # In scope full a cap left Gemm splits out: the constructive choice that told which of them may beat its peak
    # fits, and is what a solve that finds nothing leaves (replan.widen.solve_space), said so.
    result = CliRunner().invoke(app, ["optimize", "models/vit-so400m-6layers-chip.json", "-o", str(out), "--json"])
    summary = json.loads(result.stdout)
    assert result.exit_code == 0 and summary["fits_after"] and summary["status"] == "feasible"
    assert summary["note"] == "no solver solution within the time limit: the constructive plan is returned"


FORBIDDEN = ("ipuplan.facts", "ipuplan.space", "ipuplan.model.build")
LOADS = f"""
import importlib, json, sys
loaded = {{}}
for name in sys.argv[1:]:
    importlib.import_module(name)
    loaded[name] = sorted(m for m in sys.modules if m.startswith({FORBIDDEN!r}))
print(json.dumps(loaded))
"""
"""Imports each module named on its command line in turn; per module, the forbidden ones loaded by then."""


def test_no_backend_loads_the_facts_the_candidate_space_or_the_builder():
    """A backend sees a `Problem` of indices and integers: importing any solvers module, in a fresh process,
    loads nothing of the plan's facts, its candidate space or the builder of a `Problem`."""
    folder = Path(solvers.__file__).parent
    modules = sorted(f"ipuplan.solvers.{path.stem}".removesuffix(".__init__") for path in folder.glob("*.py"))
    done = subprocess.run([sys.executable, "-c", LOADS, *modules], capture_output=True, text=True, check=True)
    loaded = json.loads(done.stdout)
    assert len(modules) > 5 and loaded == {name: [] for name in modules}

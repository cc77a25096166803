"""The HiGHS backend (`solvers.highs`): the same model as CP-SAT's, as a MIP through SciPy. It agrees with CP-SAT on
the reference plan's problem and with brute force on hand-made ones, and without SciPy it says what to install."""

from __future__ import annotations

from dataclasses import replace
from importlib.util import find_spec

import pytest
from measures import absolute_floor
from problems import BUDGETED, TWO_STEPS, best_by_brute_force
from reference import without_module

from ipuplan.model.objective import Objective
from ipuplan.solvers import SolverSettings, SolveStatus, highs, solve
from ipuplan.solvers.highs import HighsMissing, solve_reduced

needs_scipy = pytest.mark.skipif(find_spec("scipy") is None, reason="HiGHS needs SciPy")
SETTINGS = SolverSettings(time_limit=5, workers=1, deterministic=True)


@needs_scipy
def test_highs_and_floor_agree_with_cp_sat(facts, storage_problem, storage_result):
    mip = solve(storage_problem, SolverSettings(time_limit=30), "highs")
    assert mip.status == SolveStatus.OPTIMAL and mip.peak == storage_result.after.raw_peak == mip.bound
    assert absolute_floor(facts) <= storage_problem.lower_bound()


@needs_scipy
@pytest.mark.parametrize("p", [TWO_STEPS, BUDGETED], ids=["two steps", "budgeted"])
@pytest.mark.parametrize("objective", list(Objective))
def test_the_model_without_reduction_reaches_the_brute_force_optimum(p, objective):
    """`solve_reduced` is the MIP on every candidate (`solve` drops the dominated ones first): both give the optimum
    of every term of the objective, in order."""
    settings = replace(SETTINGS, objective=objective)
    for result in (solve_reduced(p, settings), highs.solve(p, settings)):
        terms = ((result.peak,) if objective == Objective.PEAK else ()) + (result.exchange_bytes,
                                                                          result.changed_values)
        assert result.status == SolveStatus.OPTIMAL and terms == best_by_brute_force(p, objective)


def test_without_scipy_the_backend_names_what_to_install(monkeypatch):
    without_module(monkeypatch, "scipy")
    with pytest.raises(HighsMissing, match=r"--solver highs needs SciPy: pip install 'ipuplan\[highs\]'"):
        solve(TWO_STEPS, SETTINGS, "highs")

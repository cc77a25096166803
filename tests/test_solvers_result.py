"""What every backend takes and returns (`solvers.result`): the gaps a result states of its objective's first term, the
size fields every backend fills alike, and the limits a later solve of one run is given."""

from __future__ import annotations

import time

import pytest
from problems import BUDGETED, TWO_STEPS

from ipuplan.model.objective import Objective
from ipuplan.solvers import SolveResult, SolverSettings, SolveStatus, model_size, solve
from ipuplan.solvers.linear import linear_rows


def result(peak, bound, exchange=0, exchange_bound=None, objective=Objective.PEAK) -> SolveResult:
    return SolveResult(SolveStatus.FEASIBLE, (0,), peak, bound, 0.0, 0.0, None, 0, 0, 1, 1, exchange_bytes=exchange,
                       exchange_bound=exchange_bound, objective=objective)


def test_the_gap_is_of_the_peak_or_with_fit_of_the_exchange():
    peak = result(200, 150, exchange=400, exchange_bound=300)
    assert (peak.gap, peak.peak_gap, peak.exchange_gap) == (0.25, 0.25, 0.25)
    fit = result(200, 200, exchange=400, exchange_bound=100, objective=Objective.FIT)
    assert (fit.gap, fit.peak_gap) == (0.75, 0.0)


def test_without_a_solution_there_is_no_gap_and_with_nothing_sent_none_left():
    assert result(None, 150).gap is None and result(None, 150, objective=Objective.FIT).gap is None
    assert result(0, 0).peak_gap is None  # an empty plan: nothing to measure against
    assert result(200, 150, exchange=0, exchange_bound=0, objective=Objective.FIT).gap == 0.0  # nothing sent


@pytest.mark.parametrize("p", [TWO_STEPS, BUDGETED], ids=["two steps", "budgeted"])
def test_every_backend_reports_the_problems_size_alike(p):
    sizes = model_size(p)
    assert (sizes["steps_kept"], sizes["steps_total"]) == (len(p.rows), p.steps_total)
    assert (sizes["variables"], sizes["constraints"]) == (0, 0) and "entries" not in sizes
    rows = linear_rows(p)
    written = model_size(p, 7, 3, 0.5, rows)
    assert (written["variables"], written["constraints"], written["build_seconds"]) == (7, 3, 0.5)
    assert (written["entries_before"], written["entries"], written["terms_merged"]) == (
        rows.plain_entries, rows.entries, rows.merged_terms)
    for backend in ("cpsat", "greedy"):
        solved = solve(p, SolverSettings(time_limit=5, workers=1, deterministic=True), backend)
        assert (solved.steps_kept, solved.steps_total) == (len(p.rows), p.steps_total)


def test_a_later_solve_is_given_what_the_limit_leaves_or_with_one_worker_its_share():
    started = time.perf_counter() - 4.0  # 4 s of the run's 10 spent
    assert 5.9 < SolverSettings(time_limit=10.0).left_since(started, 1.0) <= 6.0
    assert SolverSettings(time_limit=10.0).left_since(started - 20.0, 1.0) == 1.0  # past the limit: its share
    assert SolverSettings(time_limit=10.0, deterministic=True).left_since(started, 1.0) == 1.0  # units, not the clock

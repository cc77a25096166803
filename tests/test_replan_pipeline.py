"""`time_limit` bounds the whole run: the solve, the explanation of budgets no layout meets and the best
effort's soft solve share one deadline, `time_limit` after the solve starts."""

from __future__ import annotations

import time

import pytest

from ipuplan.replan import pipeline
from ipuplan.replan.pipeline import BudgetConflict, optimize

TIGHT = {"scope": "kernels", "budget": 200_000, "interleaved_budget": 72_831}
"""No layout of the kernels scope meets these budgets (tests/test_objectives.py)."""


@pytest.fixture()
def spans(monkeypatch) -> dict:
    """Stage name -> (started, ended, args, kwargs) of its last call in the pipeline."""
    found: dict = {}

    def timed(name: str, stage):
        def run(*args, **kwargs):
            started = time.perf_counter()
            try:
                return stage(*args, **kwargs)
            finally:
                found[name] = (started, time.perf_counter(), args, kwargs)

        return run

    for name in ("solve_space", "explain_run", "solve_soft"):
        monkeypatch.setattr(pipeline, name, timed(name, getattr(pipeline, name)))
    return found


@pytest.mark.parametrize("workers", [1, 2])
def test_the_explanation_and_the_soft_solve_share_the_solves_deadline(reference_plan, spans, workers):
    limit = 2.0
    result = optimize(reference_plan, workers=workers, time_limit=limit, best_effort=True, **TIGHT)
    assert result.best_effort and not result.after.fits_budget
    deadline = spans["solve_space"][0] + limit
    explained_by, explained = spans["explain_run"][3]["deadline"], spans["explain_run"][1]
    soft_seconds = spans["solve_soft"][2][1].time_limit
    assert explained_by <= deadline and explained < explained_by + 1.0  # a solver's floor of a few hundredths
    assert explained + soft_seconds <= deadline + 1.0  # what the explanation left, or the share set aside for it
    assert spans["solve_soft"][1] < deadline + 1.5


def test_without_best_effort_the_explanation_has_all_the_solve_left(reference_plan, spans):
    limit = 2.0
    with pytest.raises(BudgetConflict):
        optimize(reference_plan, workers=1, time_limit=limit, **TIGHT)
    deadline = spans["solve_space"][0] + limit
    assert deadline - 0.1 <= spans["explain_run"][3]["deadline"] <= deadline
    assert "solve_soft" not in spans


def test_an_infeasible_best_effort_run_keeps_to_its_time_limit(reference_plan):
    limit = 1.0
    started = time.perf_counter()
    result = optimize(reference_plan, workers=1, time_limit=limit, best_effort=True, **TIGHT)
    assert result.best_effort and time.perf_counter() - started < limit + 5  # 5 s: loading and preparing, generously

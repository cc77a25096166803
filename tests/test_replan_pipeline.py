"""`time_limit` bounds the whole run: its preparation, the solve, the exact exchange, the explanation of budgets no
layout meets and the best effort's soft solve share one deadline, `time_limit` after `optimize` is called."""

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
    deadline = time.perf_counter() + limit  # the run's deadline, from its start (a hair before optimize's)
    result = optimize(reference_plan, workers=workers, time_limit=limit, best_effort=True, **TIGHT)
    assert result.best_effort and not result.after.fits_budget
    explained_by, explained = spans["explain_run"][3]["deadline"], spans["explain_run"][1]
    soft_seconds = spans["solve_soft"][2][1].time_limit
    assert explained_by <= deadline and explained < explained_by + 1.0  # a solver's floor of a few hundredths
    assert explained + soft_seconds <= deadline + 1.0  # what the explanation left, or the share set aside for it
    assert spans["solve_soft"][1] < deadline + 1.5


def test_without_best_effort_the_explanation_has_all_the_solve_left(reference_plan, spans):
    limit = 2.0
    deadline = time.perf_counter() + limit
    with pytest.raises(BudgetConflict):
        optimize(reference_plan, workers=1, time_limit=limit, **TIGHT)
    assert deadline <= spans["explain_run"][3]["deadline"] <= deadline + 0.1
    assert "solve_soft" not in spans


def test_an_infeasible_best_effort_run_keeps_to_its_time_limit(reference_plan):
    limit = 1.0
    started = time.perf_counter()
    result = optimize(reference_plan, workers=1, time_limit=limit, best_effort=True, **TIGHT)
    # the preparation counts in the limit; past it only the solvers' floors (a few tenths) and the rewrite
    assert result.best_effort and time.perf_counter() - started < limit + 2.5


def test_the_exact_exchange_stage_can_be_left_out(reference_plan, monkeypatch):
    """`exact_exchange`: never (the proxy only), and auto above EXACT_AUTO_CANDIDATES candidates at the peak; each
    says so, and what is written is the first solve's choice, no worse in peak."""
    exact = optimize(reference_plan, workers=1, scope="storage")
    never = optimize(reference_plan, workers=1, scope="storage", exact_exchange="never")
    assert exact.exact and not never.exact
    assert never.after.raw_peak == exact.after.raw_peak and never.exchange_after >= exact.exchange_after
    assert never.model_exchange_after != never.exchange_after  # the proxy, under its own name
    heard = []
    monkeypatch.setattr(pipeline, "EXACT_AUTO_CANDIDATES", 10)
    auto = optimize(reference_plan, workers=1, scope="storage", on_phase=lambda name, detail: heard.append(detail))
    assert not auto.exact and auto.solution_fingerprint == never.solution_fingerprint
    assert any(detail.startswith("left out: ") and "more than 10 (--exact-exchange always" in detail
               for detail in heard)
    always = optimize(reference_plan, workers=1, scope="storage", exact_exchange="always")
    assert always.exact and always.solution_fingerprint == exact.solution_fingerprint

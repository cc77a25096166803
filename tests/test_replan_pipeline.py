"""`time_limit` bounds the whole run: its preparation, the solve, the exact exchange, the explanation of budgets no
layout meets and the best effort's soft solve share one deadline, `time_limit` after `optimize` is called."""

from __future__ import annotations

import time
from dataclasses import replace
from types import SimpleNamespace

import pytest

from ipuplan import dump_plan
from ipuplan.facts.plan_exchange import plan_exchange
from ipuplan.replan import pipeline
from ipuplan.replan.options import OptimizeOptions
from ipuplan.replan.pipeline import BudgetConflict, optimize
from ipuplan.replan.size import run_size
from ipuplan.solvers import cpsat

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
    # the phases end where the rewrite's time, set aside at the end, begins (`replan.size.RunSize.tail_seconds`)
    deadline = time.perf_counter() + limit - run_size(reference_plan, OptimizeOptions()).tail_seconds
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
    assert never.after.raw_peak == exact.after.raw_peak
    # the proxy's plan may send less only by views that read two ways (docs/EXCHANGE.md), which the exact stage avoids
    assert not exact.output_exchange.other_readings
    assert never.exchange_after >= exact.exchange_after or never.output_exchange.other_readings
    assert never.model_exchange_after != never.exchange_after  # the proxy, under its own name
    heard = []
    monkeypatch.setattr(pipeline, "EXACT_AUTO_CANDIDATES", 10)
    auto = optimize(reference_plan, workers=1, scope="storage", on_phase=lambda name, detail: heard.append(detail))
    assert not auto.exact and auto.solution_fingerprint == never.solution_fingerprint
    assert any(detail.startswith("left out: ") and "more than 10 (--exact-exchange always" in detail
               for detail in heard)
    always = optimize(reference_plan, workers=1, scope="storage", exact_exchange="always")
    assert always.exact and always.solution_fingerprint == exact.solution_fingerprint


def test_the_peak_phase_leaves_the_proxys_ties_to_an_exact_stage_that_follows(reference_plan, monkeypatch):
    """Where the exact stage will price the candidates (auto, no more of them than it prices), the peak phase ends at
    its proven peak and only the exact solve minimises the exchange, the written plan's own: nothing is said left;
    where it will not (never, or auto past EXACT_AUTO_CANDIDATES), the peak phase minimises the proxy; where it was to
    but is left out after all, the note says so."""
    solved = []
    run_phases = cpsat.run_phases

    def spy(choices, ordered, settings, *rest, **options):
        solved.append((settings.objective.value, [phase.name for phase in ordered]))
        return run_phases(choices, ordered, settings, *rest, **options)

    monkeypatch.setattr(cpsat, "run_phases", spy)
    exact = optimize(reference_plan, workers=1)
    assert exact.exact and solved == [("fit", ["exchange"])]
    assert not exact.solve.ties_left and not exact.note
    assert exact.solve.variables > 0 and exact.solve.solve_seconds > 0  # the model solved is the exact solve's
    for options in ({"exact_exchange": "never"}, {"exact_exchange": "auto", "scope": "storage"}):
        solved.clear()
        with monkeypatch.context() as patched:
            patched.setattr(pipeline, "EXACT_AUTO_CANDIDATES", 10)
            proxy = optimize(reference_plan, workers=1, **options)
        assert not proxy.exact and solved[0] == ("peak", ["exchange"]) and not proxy.solve.ties_left
    monkeypatch.setattr(pipeline, "EXACT_MIN_SECONDS", 1e9)  # the exact stage finds no time left after all: said
    late = optimize(reference_plan, workers=2)
    assert not late.exact and late.solve.ties_left and late.note == pipeline.TIES_LEFT_TO_EXACT


def test_fit_judges_the_input_by_the_exchange_the_choice_was_made_by():
    """After the exact stage, `fit` may keep the input only if the input sends no more *exactly*: the proxy once
    threw away an exact choice that sent less than the input (and said "optimal" of a bound below what it wrote)."""
    from types import SimpleNamespace

    from problems import b, problem

    from ipuplan.model.objective import Objective
    from ipuplan.model.problem import StepRow
    from ipuplan.solvers import SolveResult, SolveStatus

    p = problem([StepRow(0, 0, 0, ((0, b(10, 10), b(0, 0)),))], (2,), exchange=((5, 9),))  # the proxy: the input
    solved = SolveResult(SolveStatus.OPTIMAL, (1,), 10, 10, 0.0, 0.0, None, 0, 0, 1, 1, objective=Objective.FIT)
    facts = SimpleNamespace(estimate=SimpleNamespace(fits_budget=True))
    exact = {(0,): 700, (1,): 600}.__getitem__  # exactly, the choice sends less
    assert pipeline.no_better_than_input(p, solved, facts)  # by the proxy the input would stand
    assert not pipeline.no_better_than_input(p, solved, facts, exact)


def test_an_exact_solve_that_breaks_a_limit_is_not_taken():
    """A constructive answer may break the peak found or a budget: the kept choice stands, and nothing is proven."""
    from problems import b, problem

    from ipuplan.model.exact import ExactProblem
    from ipuplan.model.objective import Objective
    from ipuplan.model.problem import StepRow
    from ipuplan.plan.budgets import Limit
    from ipuplan.solvers import SolveResult, SolveStatus

    p = problem([StepRow(0, 0, 0, ((0, b(10, 20), b(0, 0)),))], (2,), exchange=((9, 1),),
                limits=(Limit("peak found", 1, 1, 15),))
    exact = ExactProblem(p, 100, p)
    breaking = SolveResult(SolveStatus.OPTIMAL, (1,), 20, 20, 0.0, 0.0, None, 0, 0, 1, 1, objective=Objective.FIT)
    assert pipeline.exact_choice(exact, (0,), breaking) == ((0,), False)
    within = problem([StepRow(0, 0, 0, ((0, b(10, 12), b(0, 0)),))], (2,), exchange=((9, 1),),
                    limits=(Limit("peak found", 1, 1, 15),))
    found = SolveResult(SolveStatus.OPTIMAL, (1,), 12, 12, 0.0, 0.0, None, 0, 0, 1, 1, objective=Objective.FIT)
    assert pipeline.exact_choice(ExactProblem(within, 100, within), (0,), found) == ((1,), True)


@pytest.mark.parametrize("workers", [1, 2])
def test_the_phases_limits_are_shares_of_one_deadline_that_sum_to_at_most_the_limit(reference_plan, monkeypatch,
                                                                                      workers):
    """With one worker the peak's and the exchange's deterministic units sum to the limit, whatever the machine (the
    shares of `solvers.deadline.RUN_SHARES`); with more, each is at most what the deadline left, and no solve may run
    past it."""
    given: dict[str, object] = {}

    def spied(name, stage):
        def run(*args, **kwargs):
            given[name] = args[1] if name == "solve_space" else args[2]
            return stage(*args, **kwargs)
        return run

    monkeypatch.setattr(pipeline, "solve_space", spied("solve_space", pipeline.solve_space))
    monkeypatch.setattr(pipeline, "exact_at", spied("exact_at", pipeline.exact_at))
    limit = 10.0
    started = time.perf_counter()
    result = optimize(reference_plan, workers=workers, time_limit=limit)
    assert result.exact
    peak, exchange = given["solve_space"], given["exact_at"]
    if workers == 1:
        assert (peak.time_limit, exchange.time_limit) == pytest.approx((6.0, 4.0))
    else:
        assert peak.time_limit <= limit and exchange.time_limit <= limit
        assert peak.ends_at == exchange.ends_at == pytest.approx(started + limit, abs=0.1)


def test_the_search_a_run_got_is_said_in_deterministic_units_the_same_twice(reference_plan):
    """Issue 36, item 3: how much search a run got, as a figure that does not hang on the machine: with one worker
    two runs report the same units (and the same bytes)."""
    from ipuplan.report.text import optimize_summary

    first, second = (optimize(reference_plan, workers=1, scope="kernels") for _ in range(2))
    assert first.solve.search_units > 0 and first.solve.search_units == second.solve.search_units
    summary = optimize_summary(first, "in.json", None)["search"]
    assert summary == {"deterministic_units": round(first.solve.search_units, 3), "workers": 1, "deterministic": True,
                       "time_limit": 10.0}


def test_a_large_plans_check_in_a_forked_copy_returns_the_same_plan_and_its_exchange_counted_meanwhile(
        reference_plan, monkeypatch, forks_allowed):
    """The reference plan taken for a large one (`forks`): the same plan comes back, and both plans' exact
    exchange, counted while the copies checked (the input's in the input's check), is what counting them again
    gives."""
    alone = optimize(reference_plan, workers=1, time_limit=10)
    monkeypatch.setattr(pipeline, "forks", lambda size, options: True)
    beside = optimize(reference_plan, workers=1, time_limit=10)
    assert alone.priced_output is None and beside.priced_output is not None
    assert alone.prepared.priced_input is None and beside.prepared.priced_input is not None
    assert dump_plan(beside.plan) == dump_plan(alone.plan)
    assert beside.output_exchange.total == plan_exchange(beside.plan, beside.facts).total == alone.exchange_after
    assert beside.input_exchange.total == alone.exchange_before


@pytest.mark.parametrize(("values", "workers", "cores", "forked"), [
    (5_000, 2, 2, True), (4_999, 2, 2, False), (5_000, 1, 2, False), (5_000, 2, 1, False)])
def test_a_run_forks_its_checks_from_5000_values_with_two_workers_on_two_cores(monkeypatch, values, workers, cores,
                                                                              forked):
    monkeypatch.setattr(pipeline, "usable_cores", lambda: cores)
    size = pipeline.RunSize(values=values, steps=1, live=1, tiles=1472, bytes=1 << 20)
    assert pipeline.forks(size, OptimizeOptions(workers=workers)) == forked
    assert pipeline.forks(size, OptimizeOptions()) == (values >= 5_000 and cores > 1)  # the default: every core
    assert not pipeline.forks(replace(size, bytes=1 << 60), OptimizeOptions(workers=workers))


@pytest.mark.parametrize(("allowed", "workers", "cores", "processes"), [
    (True, 2, 2, 2), (True, 1, 2, 1), (True, 2, 1, 1), (False, 2, 2, 1)])
def test_the_exact_exchange_is_priced_in_two_processes_where_forks_and_two_cores_are(monkeypatch, allowed, workers,
                                                                                     cores, processes):
    """Whatever the plan's size (its pairs decide, `exchange_cost.FORK_PAIRS`): forks allowed (the program, not the
    library), two workers and two cores, and a copy that fits."""
    monkeypatch.setattr(pipeline, "usable_cores", lambda: cores)
    monkeypatch.setattr(pipeline, "forks_allowed", lambda: allowed)
    size = pipeline.RunSize(values=176, steps=1, live=1, tiles=1472, bytes=1 << 20)
    options = OptimizeOptions(workers=workers)
    assert pipeline.pricing_processes(SimpleNamespace(size=size, options=options)) == processes
    assert pipeline.pricing_processes(SimpleNamespace(size=None, options=options)) == 1
    assert pipeline.pricing_processes(SimpleNamespace(size=replace(size, bytes=1 << 60), options=options)) == 1

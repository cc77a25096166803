"""The peak phase's solve over a scope a cap left partly out (`replan.widen`): the left-out splits that may beat the
peak known are made candidates and solved, so a better split outside the cap is found rather than only admitted;
a solve that finds nothing gives the constructive choice it began from."""

from __future__ import annotations

from problems import BUDGETED, b, problem
from reference import CHIP6, MODELS

from ipuplan import load_plan, solvers
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.model.build import problem_of
from ipuplan.model.problem import StepRow
from ipuplan.plan.budgets import Budgets
from ipuplan.replan.options import OptimizeOptions
from ipuplan.replan.pipeline import optimize, prepare
from ipuplan.replan.widen import Known, Widening, constructed, solve_space
from ipuplan.solvers import SolveResult, SolverSettings, SolveStatus, model_size, register_backend, solve
from ipuplan.solvers.construct import construct
from ipuplan.space.scopes import candidate_space
from ipuplan.workbench.synth import repeat_layers

SETTINGS = SolverSettings(time_limit=5, workers=1, deterministic=True)


def test_the_best_split_outside_the_cap_is_found_and_only_then_optimal_is_said():
    """On the 6-layer chip plan, scope kernels: the best Gemm splits lie outside the 48 kept per family. Over the
    kept list alone the least peak is 357,492 and the whole scope's bound is far below it, so "optimal" is not
    said; solving again with the splits that may beat it finds 311,412, proven optimal for the scope (as with no
    cap at all)."""
    facts = plan_facts(load_plan(CHIP6))
    space = candidate_space(facts, "kernels")
    start = Widening(facts, space, problem_of(facts, space))
    capped = solve(start.problem, SETTINGS)
    assert (capped.peak, capped.status) == (357_492, SolveStatus.FEASIBLE) and capped.bound <= 311_412
    wider, found = solve_space(start, SETTINGS)
    assert (found.peak, found.status, found.bound) == (311_412, SolveStatus.OPTIMAL, 311_412)
    promoted = [g for g, c in enumerate(found.choice) if c >= len(space.free[g].candidates)]
    assert promoted and all(space.free[g].kind == "kernel" for g in promoted)
    assert wider.problem.usage(found.choice).peak == 311_412
    result = optimize(load_plan(CHIP6), scope="kernels", workers=1, time_limit=10)
    assert (result.after.raw_peak, result.status) == (311_412, SolveStatus.OPTIMAL)


def test_a_solve_that_finds_nothing_gives_the_constructive_choice_it_was_widened_from(monkeypatch):
    # The same plan and scope; a backend that finds nothing in time. The widened problem's answer is then the
    # constructive choice of the kept candidates (its indexes hold there), feasible, bound capped at its peak.
    facts = plan_facts(load_plan(CHIP6))
    space = candidate_space(facts, "kernels")
    start = Widening(facts, space, problem_of(facts, space))
    monkeypatch.setattr(solvers, "BACKENDS", dict(solvers.BACKENDS))
    register_backend("nothing", lambda problem, settings, progress: SolveResult(
        SolveStatus.NO_SOLUTION, problem.input_choice, None, 0, solve_seconds=0.0, first_solution_seconds=None,
        objective=settings.objective, **model_size(problem)))
    wider, found = solve_space(start, SETTINGS, "nothing")
    chosen = construct(start.problem)
    assert found.choice == chosen and found.constructed and found.status == SolveStatus.FEASIBLE
    assert found.peak == wider.problem.usage(chosen).peak == start.problem.usage(chosen).peak > found.bound
    assert found.exchange_bytes == wider.problem.exchange_of(chosen)


def test_when_no_kept_choice_meets_the_budgets_the_left_out_ones_that_may_are_solved_too():
    """42 layers of the reference plan (`synth --layers 42`) on the real chip's budgets, scope program: no choice of
    the kept candidates meets them, and the relaxation cannot say that no choice of the scope does (no claim); the
    left-out splits that may meet them are then made candidates, and one does, proven optimal."""
    plan = repeat_layers(load_plan(MODELS / "vit-so400m-finalist-5.json"), 42)
    chip = {"budget": 586_960, "interleaved_budget": 424_880, "support_reserve": 49_152}
    prepared = prepare(plan, OptimizeOptions(scope="program", workers=1, **chip))
    assert solve(prepared.problem, SETTINGS).status == SolveStatus.NO_SOLUTION
    result = optimize(plan, scope="program", workers=1, time_limit=10, **chip)
    assert (result.after.raw_peak, result.status, result.after.fits_budget) == (535_650, SolveStatus.OPTIMAL, True)


def test_the_peak_known_before_the_solve_is_the_lower_of_the_constructive_choice_and_the_input():
    assert constructed(BUDGETED) == Known(construct(BUDGETED), BUDGETED.usage(construct(BUDGETED)).peak)
    assert BUDGETED.valid(constructed(BUDGETED).choice) and not BUDGETED.valid(BUDGETED.input_choice)
    # the input (candidate 0, 60 bytes) is already the least: no construction lowers it
    kept = problem([StepRow(0, 0, 0, ((0, b(60, 80), b(0, 0)),))], (2,))
    assert constructed(kept) == Known((0,), 60)
    # no choice meets a 50-byte standard budget: nothing is known
    assert constructed(problem(kept.rows, (2,), limits=Budgets(100, 50, 0).limits)) is None

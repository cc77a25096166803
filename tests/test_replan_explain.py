"""Why a plan cannot fit, in plain words (`replan.explain`): the minimal conflict's steps and what holds them, per
budget the least that fits and the options that give it, and the wider freedoms that would fit."""

from __future__ import annotations

import time

import pytest
from reference import CHIP6

from ipuplan import InfeasibleBudget, load_plan
from ipuplan.plan.budgets import Budgets
from ipuplan.replan.explain import raise_options, wider_freedoms, within
from ipuplan.replan.options import OptimizeOptions
from ipuplan.replan.pipeline import BudgetConflict, optimize
from ipuplan.space.scopes import Scope


def test_reference_one_byte_under_the_optimum_is_explained_in_plain_words(reference_plan):
    with pytest.raises(BudgetConflict) as caught:
        optimize(reference_plan, workers=1, scope="kernels", budget=208_227, interleaved_budget=80_000, time_limit=5)
    explanation = caught.value.explanation
    assert isinstance(caught.value, InfeasibleBudget) and caught.value.exit_code == 3
    assert explanation.minimal
    (step,) = explanation.steps
    assert (step.step, step.needs, step.budget_bytes) == (47, 159_076, 159_075)
    assert step.holders and all(h.frozen for h in step.holders) and step.fixed_bytes + step.free_least_bytes <= 159_076
    (raised,) = explanation.raises
    assert (raised.least, raised.options) == (159_076, "--budget 208228")
    assert optimize(reference_plan, workers=1, scope="kernels", budget=208_228,
                    interleaved_budget=80_000).after.fits_budget


def test_a_budget_that_cannot_fit_alone_is_said_so_in_words_and_html(reference_plan):
    from ipuplan.report.html import explanation_html
    from ipuplan.report.text import explanation_lines

    with pytest.raises(BudgetConflict) as caught:
        optimize(reference_plan, workers=1, scope="kernels", budget=200_000, interleaved_budget=72_831, time_limit=5)
    explanation = caught.value.explanation
    # the total (150,848 B) is below the lowest peak (159,076 B): neither class budget fits by itself
    assert [(r.budget, r.least, r.enough_alone) for r in explanation.raises] == [
        ("standard budget", None, False), ("interleaved budget", None, False)]
    words = explanation_lines(explanation)
    assert "  interleaved budget (now 72,831 B): raising it alone is not enough" in words
    assert "the lowest raw peak any layout reaches: 159,076 B" in words[-2]
    assert explanation_html(explanation, words).count("<tr>") == 2 + len(explanation.steps) + sum(
        len(s.holders) for s in explanation.steps)


def test_wider_freedom_is_named_when_it_fits():
    with pytest.raises(BudgetConflict) as caught:
        optimize(load_plan(CHIP6), workers=1, scope="storage", time_limit=5)
    explanation = caught.value.explanation
    assert [(f.options, f.fits) for f in explanation.freedoms] == [("--scope kernels", True), ("--scope full", True)]
    assert explanation.steps[0].budget == "standard budget"


def test_a_raise_lifts_its_own_limit_without_lowering_another():
    budgets = Budgets(600_000, 400_000, 50_000)  # standard region 200,000; total less the reserve 550,000
    standard, interleaved, total = budgets.limits
    assert raise_options(budgets, standard, 210_000) == "--budget 610000"
    assert raise_options(budgets, total, 551_000) == "--budget 601000"
    # the interleaved budget alone: raising it takes as much from the standard region, so the whole budget goes up too
    assert raise_options(budgets, interleaved, 400_500) == "--budget 600500 --interleaved-budget 400500"
    for limit, least in ((standard, 210_000), (interleaved, 400_500), (total, 551_000)):
        words = raise_options(budgets, limit, least).split()
        raised = Budgets(int(words[1]), int(words[3]) if len(words) > 2 else budgets.interleaved_budget_bytes,
                         budgets.support_reserve_bytes)
        assert all(new.bytes >= old.bytes for new, old in zip(raised.limits, budgets.limits))
        assert next(new for new in raised.limits if new.name == limit.name).bytes == least


def test_the_wider_freedoms_are_the_wider_scopes_then_classes_then_no_pins(tmp_path):
    assert [flags for flags, *_ in wider_freedoms(OptimizeOptions(scope="storage"))] == ["--scope kernels",
                                                                                        "--scope full"]
    assert wider_freedoms(OptimizeOptions(scope="full")) == []
    pins = tmp_path / "pins.json"
    kept = wider_freedoms(OptimizeOptions(scope="full", keep_classes=True, pin_file=pins))
    assert kept == [("--scope full --no-keep-classes", Scope.FULL, False, True),
                    ("without --freeze and --pin-file", Scope.FULL, True, False)]


def test_a_part_never_runs_past_the_deadline_but_is_given_a_few_hundredths():
    now = time.perf_counter()
    assert within(now + 100.0, 2.0) == 2.0
    assert 0.9 < within(now + 1.0, 2.0) <= 1.0
    assert within(now - 5.0, 2.0) == 0.05

"""Costs and budgets: hand-computed excesses and bounds, and step rows that reproduce the estimate."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ipuplan.errors import BudgetError
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.model.build import problem_of, step_rows, unneeded_changes
from ipuplan.model.problem import Problem, StepRow, Usage, term_table, usage_of
from ipuplan.plan.budgets import Budgets, Limit, excess
from ipuplan.space.scopes import candidate_space


def b(*numbers: int) -> np.ndarray:
    return np.array(numbers, dtype=np.int64)


# standard limit 150 - 50 = 100, interleaved limit 50, total limit 150 - 30 = 120
BUDGETS = Budgets(budget_bytes=150, interleaved_budget_bytes=50, support_reserve_bytes=30)
USAGE = Usage(standard=b(110, 20, 70), interleaved=b(0, 80, 60))


def test_each_limit_measures_its_own_excess():
    standard, interleaved, total = BUDGETS.limits
    assert (standard.bytes, interleaved.bytes, total.bytes) == (100, 50, 120)
    assert excess(standard, USAGE.standard, USAGE.interleaved).tolist() == [110 - 100, 0, 0]
    assert excess(interleaved, USAGE.standard, USAGE.interleaved).tolist() == [0, 80 - 50, 60 - 50]
    assert excess(total, USAGE.standard, USAGE.interleaved).tolist() == [0, 0, 70 + 60 - 120]


def test_usage_excess_sums_the_limits_per_row():
    # row 0: 10 standard; row 1: 30 interleaved; row 2: 10 interleaved + 10 total
    assert USAGE.excess(BUDGETS.limits).tolist() == [10, 30, 20]
    assert USAGE.violation(BUDGETS.limits) == 60
    assert USAGE.violation(()) == 0
    assert USAGE.peak == 130  # row 2: 70 + 60


def test_excess_on_ints():
    assert excess(Limit("standard", 1, 0, 100), 120, 999) == 20
    assert excess(Limit("standard", 1, 0, 100), 80, 999) == 0
    assert excess(Limit("interleaved", 0, 1, 50), 999, 70) == 20
    assert excess(Limit("total", 1, 1, 100), 60, 50) == 10
    assert excess(Limit("total", 1, 1, 100), 60, 40) == 0


def test_overridden_replaces_only_the_given_budgets():
    assert BUDGETS.overridden(200, None, 5) == Budgets(200, 50, 5)
    assert BUDGETS.overridden(None, None, None) == BUDGETS


@pytest.mark.parametrize(
    "budget, interleaved, reserve",
    [(-1, None, None), (None, -1, None), (None, None, -1), (None, 151, None), (40, None, None)],
    ids=["negative budget", "negative interleaved", "negative reserve", "interleaved above budget", "budget below interleaved"],
)
def test_overridden_refuses_contradicting_budgets(budget, interleaved, reserve):
    with pytest.raises(BudgetError):
        BUDGETS.overridden(budget, interleaved, reserve)


# step 0 = 100 + A[50, 20] (the peak step), step 1 = 10 + B[30, 10]
TWO_STEPS = Problem(
    candidate_counts=(2, 2),
    input_choice=(0, 0),
    group_sizes=(1, 1),
    rows=(StepRow(0, 100, 0, ((0, b(50, 20), b(0, 0)),)), StepRow(1, 10, 0, ((1, b(30, 10), b(0, 0)),))),
    exchange=((0, 0), (0, 0)),
    limits=(),
    steps_total=2,
)


def test_problem_bounds_take_every_group_at_its_smallest_and_largest():
    assert TWO_STEPS.lower_bound() == max(100 + 20, 10 + 10)
    assert TWO_STEPS.upper_bound() == max(100 + 50, 10 + 30)
    low, high = TWO_STEPS.table.row_bounds()
    assert (low[0], high[0]) == (120, 150)


def test_bounds_count_both_classes():
    row = StepRow(0, 5, 7, ((0, b(10, 0), b(0, 4)),))
    low, high = term_table((row,)).row_bounds()
    assert (low[0], high[0]) == (5 + 7 + 4, 5 + 7 + 10)


def test_unneeded_changes_finds_a_change_that_does_not_lower_the_peak():
    # (1, 1): step 0 = 120, step 1 = 20. Reverting B makes step 1 = 40, still below 120;
    # reverting A makes step 0 = 150.
    assert usage_of(TWO_STEPS.rows, (1, 1)).peak == 120
    assert unneeded_changes(TWO_STEPS, (1, 1)) == [1]
    assert unneeded_changes(TWO_STEPS, (1, 0)) == []


def test_a_change_that_meets_a_budget_is_needed():
    # input: 60 standard; the other candidate: 60 interleaved, the same peak.
    # Budgets(100, 60, 0): standard <= 100 - 60 = 40, so only the interleaved candidate fits;
    # reverting it would break the standard budget by 20.
    p = Problem(
        candidate_counts=(2,),
        input_choice=(0,),
        group_sizes=(1,),
        rows=(StepRow(0, 0, 0, ((0, b(60, 0), b(0, 60)),)),),
        exchange=((0, 0),),
        limits=Budgets(100, 60, 0).limits,
        steps_total=1,
    )
    assert usage_of(p.rows, (0,)).violation(p.limits) == 20
    assert unneeded_changes(p, (1,)) == []


def test_limit_usage_is_the_weighted_sum_it_documents():
    # `standard * std + interleaved * il`: 2 * 30 + 1 * 5
    assert Limit("weighted", 2, 1, 100).usage(30, 5) == 65


def test_a_change_that_saves_exchange_is_needed():
    # B's input candidate sends 5 bytes, the changed one none: reverting would cost exchange
    p = replace(TWO_STEPS, exchange=((0, 0), (5, 0)))
    assert unneeded_changes(p, (1, 1)) == []


@pytest.fixture(scope="module")
def facts(reference_plan):
    return plan_facts(reference_plan)


@pytest.mark.parametrize("scope", ["storage", "kernels"])
def test_step_rows_at_the_input_reproduce_the_estimate(facts, scope):
    space = candidate_space(facts, scope)
    problem = problem_of(facts, space)
    usage = usage_of(problem.rows, problem.input_choice)
    for position, row in enumerate(problem.rows):
        expected = (facts.estimate.standard[row.step], facts.estimate.interleaved[row.step])
        assert (int(usage.standard[position]), int(usage.interleaved[position])) == expected, row.step
    # the dropped steps are dominated: the kept ones still hold the peak
    assert usage.peak == facts.estimate.raw_peak
    assert len(problem.rows) < problem.steps_total == len(facts.plan.steps)


def test_step_rows_drop_only_dominated_steps(facts):
    space = candidate_space(facts, "storage")
    kept = {row.step for row in step_rows(facts, space)}
    estimate = facts.estimate
    for step in range(len(facts.plan.steps)):
        if step not in kept:
            # a dropped step never exceeds the kept step that dominates it, at the input
            assert any(
                estimate.standard[k] >= estimate.standard[step] and estimate.interleaved[k] >= estimate.interleaved[step]
                for k in kept
            ), step

"""The measures tests and benchmarks ask for (`measures`): an unneeded change is found, a needed one is not."""

from __future__ import annotations

from dataclasses import replace

from measures import absolute_floor, unneeded_changes
from problems import TWO_STEPS, b

from ipuplan.model.build import problem_of
from ipuplan.model.problem import Problem, StepRow
from ipuplan.plan.budgets import Budgets


def test_unneeded_changes_finds_a_change_that_does_not_lower_the_peak():
    # (1, 1): step 0 = 120, step 1 = 20. Reverting B makes step 1 = 40, still below 120;
    # reverting A makes step 0 = 150.
    assert TWO_STEPS.usage((1, 1)).peak == 120
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
    assert p.usage((0,)).violation(p.limits) == 20
    assert unneeded_changes(p, (1,)) == []


def test_a_change_that_saves_exchange_is_needed():
    # B's input candidate sends 5 bytes, the changed one none: reverting would cost exchange
    p = replace(TWO_STEPS, exchange=((0, 0), (5, 0)))
    assert unneeded_changes(p, (1, 1)) == []


def test_the_absolute_floor_is_positive_and_below_every_scope_s_bound(facts, spaces):
    floor = absolute_floor(facts)
    assert 0 < floor <= min(problem_of(facts, space).lower_bound() for space in spaces.values())

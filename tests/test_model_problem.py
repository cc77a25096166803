"""`model.problem`: per-row usage and its excess over the budget rules, the bounds of a `Problem` and its term
table, on hand-computed numbers."""

from __future__ import annotations

import itertools

from problems import TWO_STEPS, b

from ipuplan.model.problem import StepRow, Usage, term_table
from ipuplan.plan.budgets import Budgets

# standard limit 150 - 50 = 100, interleaved limit 50, total limit 150 - 30 = 120
BUDGETS = Budgets(budget_bytes=150, interleaved_budget_bytes=50, support_reserve_bytes=30)
USAGE = Usage(standard=b(110, 20, 70), interleaved=b(0, 80, 60))


def test_usage_excess_sums_the_limits_per_row():
    # row 0: 10 standard; row 1: 30 interleaved; row 2: 10 interleaved + 10 total
    assert USAGE.excess(BUDGETS.limits).tolist() == [10, 30, 20]
    assert USAGE.violation(BUDGETS.limits) == 60
    assert USAGE.violation(()) == 0
    assert USAGE.peak == 130  # row 2: 70 + 60


def test_worst_excess_is_per_limit_the_most_any_row_lacks():
    # standard: row 0 is 10 over; interleaved: row 1 is 30 over; total: row 2 is 130 - 120 = 10 over
    assert USAGE.worst_excess(BUDGETS.limits) == (10, 30, 10)


def test_problem_bounds_take_every_group_at_its_smallest_and_largest():
    assert TWO_STEPS.lower_bound() == max(100 + 20, 10 + 10)
    assert TWO_STEPS.upper_bound() == max(100 + 50, 10 + 30)
    low, high = TWO_STEPS.table.row_bounds()
    assert (low[0], high[0]) == (120, 150)


def test_bounds_count_both_classes():
    row = StepRow(0, 5, 7, ((0, b(10, 0), b(0, 4)),))
    low, high = term_table((row,)).row_bounds()
    assert (low[0], high[0]) == (5 + 7 + 4, 5 + 7 + 10)


def test_usage_of_every_choice_is_the_rows_summed_by_hand():
    for a, c in itertools.product(range(2), range(2)):
        usage = TWO_STEPS.usage((a, c))
        assert usage.standard.tolist() == [100 + (50, 20)[a], 10 + (30, 10)[c]]
        assert usage.interleaved.tolist() == [0, 0]


def test_equal_terms_are_stored_once():
    shared = (0, b(3, 4), b(0, 1))
    rows = (StepRow(0, 1, 0, (shared,)), StepRow(1, 2, 0, ((0, b(3, 4), b(0, 1)), (1, b(5), b(6)))))
    table = term_table(rows)
    assert (table.terms, table.term.tolist(), table.row.tolist()) == (2, [0, 0, 1], [0, 1, 1])


def test_with_limits_shares_the_table_and_changes_only_the_budgets():
    table = TWO_STEPS.table
    budgeted = TWO_STEPS.with_limits(BUDGETS.limits)
    assert budgeted.table is table and budgeted.limits == BUDGETS.limits
    assert budgeted.without_budgets() == TWO_STEPS


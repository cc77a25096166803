"""`model.problem`: per-row usage and its excess over the budget rules, the bounds of a `Problem` and its term
table, on hand-computed numbers."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from problems import TWO_STEPS, b

from ipuplan.model.problem import FORBIDDEN, Edge, StepRow, Usage, term_table
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



# TWO_STEPS with an edge between its groups: the pair (A, B) = (1, 0) is forbidden, (1, 1) costs 7.
PAIRED = replace(TWO_STEPS, exchange=((0, 3), (2, 0)), edges=(Edge(0, 1, b(0, 1, FORBIDDEN, 7).reshape(2, 2)),))


def test_exchange_of_adds_each_edge_s_pair_to_the_candidates_exchange():
    assert [PAIRED.exchange_of(c) for c in itertools.product(range(2), range(2))] == [2, 1, 3 + FORBIDDEN + 2, 3 + 7]
    assert [PAIRED.forbidden_in(c) for c in itertools.product(range(2), range(2))] == [0, 0, 1, 0]


def test_forbidden_candidates_are_counted_too():
    forbidden = replace(PAIRED, exchange=((0, 3), (FORBIDDEN, 0)))
    assert forbidden.forbidden_in((1, 0)) == 2 and forbidden.forbidden_in((0, 1)) == 0


def test_an_edge_must_join_two_groups_with_a_matrix_of_their_candidates():
    with pytest.raises(ValueError):
        Edge(1, 1, b(0).reshape(1, 1))
    with pytest.raises(ValueError):
        replace(TWO_STEPS, edges=(Edge(0, 1, b(0, 1, 2).reshape(1, 3)),))


def test_edges_are_in_the_fingerprint_and_kept_by_other_budgets():
    assert PAIRED.fingerprint() != replace(PAIRED, edges=()).fingerprint()
    other = replace(PAIRED, edges=(Edge(0, 1, b(0, 1, FORBIDDEN, 8).reshape(2, 2)),))
    assert PAIRED.fingerprint() != other.fingerprint()
    assert PAIRED.with_limits(BUDGETS.limits).edges == PAIRED.edges


def test_a_relaxation_s_virtual_candidate_costs_nothing_on_its_edges():
    left = replace(PAIRED, left_out=(((0, b(5), b(0)),), ()))
    relaxed = left.relaxation({0: np.array([True])})
    assert relaxed.candidate_counts == (3, 2)
    assert relaxed.edges[0].costs.tolist() == [[0, 1], [FORBIDDEN, 7], [0, 0]]
    assert relaxed.exchange_of((2, 0)) == 2 and relaxed.forbidden_in((2, 0)) == 0

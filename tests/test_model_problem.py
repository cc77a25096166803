"""`model.problem`: per-row usage and its excess over the budget rules, the bounds of a `Problem` and its term
table, on hand-computed numbers."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from problems import TWO_STEPS, b, problem

from ipuplan.model.problem import (
    FORBIDDEN,
    Edge,
    StepRow,
    TableRows,
    Usage,
    ranges,
    span_maxima,
    spread,
    term_table,
)
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


def test_the_candidates_laid_end_to_end_are_each_group_s_in_turn():
    uneven = replace(TWO_STEPS, candidate_counts=(3, 1, 2), input_choice=(0, 0, 0), group_sizes=(1, 1, 1),
                     exchange=((5, FORBIDDEN, 0), (7,), (1, 2)), rows=())
    assert uneven.candidate_starts.tolist() == [0, 3, 4]
    assert uneven.candidate_groups.tolist() == [0, 0, 0, 1, 2, 2]
    assert uneven.flat_exchange.tolist() == [5, FORBIDDEN, 0, 7, 1, 2] and uneven.flat_exchange.dtype == np.int64
    empty = replace(uneven, candidate_counts=(), input_choice=(), group_sizes=(), exchange=())
    assert [len(empty.candidate_starts), len(empty.candidate_groups), len(empty.flat_exchange)] == [0, 0, 0]


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


# Rows as spans (issue 36, item 4): a table keeps each term's runs of consecutive rows, and sums over rows are running
# totals over them; rows read from a table (`TableRows`) are the rows it was laid out from.


def random_rows(seed: int, rows: int = 25, groups: int = 6) -> tuple[StepRow, ...]:
    """Groups live over runs of rows with gaps, each run one term object (so a term recurs over a run, and a group
    may hold two terms: its bytes change between runs), two classes."""
    rng = np.random.default_rng(seed)
    per_row: list[list] = [[] for _ in range(rows)]
    for g in range(groups):
        count = int(rng.integers(1, 4))
        at = 0
        while at < rows:
            at += int(rng.integers(0, 4))
            length = int(rng.integers(1, 8))
            term = (g, rng.integers(0, 50, count), rng.integers(0, 20, count) * int(rng.random() < 0.5))
            for r in range(at, min(at + length, rows)):
                per_row[r].append(term)
            at += length
    return tuple(StepRow(10 * r, int(rng.integers(0, 30)), int(rng.integers(0, 9)), tuple(terms))
                 for r, terms in enumerate(per_row))


@pytest.mark.parametrize("seed", range(12))
def test_running_totals_and_range_maxima_equal_a_row_by_row_count(seed):
    rng = np.random.default_rng(seed)
    first = rng.integers(0, 30, 40)
    end = first + rng.integers(1, 10, 40)
    rows = int(end.max())
    weights = rng.integers(-(2**40), 2**40, 40)
    per_row = rng.integers(-1000, 1000, rows)
    expected = [sum(int(w) for f, e, w in zip(first, end, weights) if f <= r < e) for r in range(rows)]
    assert spread(first, end, weights, rows).tolist() == expected
    assert span_maxima(per_row, first, end).tolist() == [int(per_row[f:e].max()) for f, e in zip(first, end)]


@pytest.mark.parametrize("seed", range(12))
def test_a_tables_spans_are_its_occurrences_and_sum_as_they_do(seed):
    table = term_table(random_rows(seed))
    covered = sorted((r, int(t)) for t, f, e in zip(table.span_term, table.span_first, table.span_end)
                     for r in range(f, e))
    assert covered == sorted(zip(table.row.tolist(), table.term.tolist()))
    assert len(table.span_term) < len(table.term)  # runs, not one entry per row
    # laid out again from the spans alone: the rows' own order (by row, then group)
    assert all(np.array_equal(a, b) for a, b in zip(replace(table).occurrences, table.occurrences))
    per_term = np.random.default_rng(seed).integers(0, 1000, table.terms)
    assert table.term_sums(per_term).tolist() == table.row_sums(per_term[table.term]).tolist()
    assert table.live_rows.tolist() == np.bincount(table.term, minlength=table.terms).tolist()
    per_row = np.random.default_rng(seed + 1).integers(-500, 500, table.rows)
    for t in range(table.terms):
        assert table.term_totals(per_row)[t] == per_row[table.row[table.term == t]].sum()
    assert table.candidate_entries == int(table.counts[table.term].sum())


@pytest.mark.parametrize("seed", range(8))
def test_rows_read_from_their_table_are_the_rows_it_was_laid_out_from(seed):
    rows = random_rows(seed)
    table = term_table(rows)
    read = TableRows(table, np.array([row.step for row in rows]))
    assert len(read) == len(rows)
    for r, (mine, theirs) in enumerate(zip(read, rows)):
        assert (mine.step, mine.standard, mine.interleaved) == (theirs.step, theirs.standard, theirs.interleaved)
        expected = sorted(theirs.terms, key=lambda term: term[0])
        assert [g for g, _, _ in mine.terms] == [g for g, _, _ in expected]
        assert all(np.array_equal(s, es) and np.array_equal(i, ei)
                   for (_, s, i), (_, es, ei) in zip(mine.terms, expected))
        assert [g for g, _, _ in read[r].terms] == [g for g, _, _ in mine.terms]
        assert table.groups_at(r).tolist() == [g for g, _, _ in mine.terms]
        assert sorted(table.terms_at(r).tolist()) == sorted(table.term[table.row == r].tolist())
    assert [row.step for row in read[3:7]] == [row.step for row in rows[3:7]]
    counts = tuple(int(table.counts[table.group == g].max()) for g in range(6))
    laid_out = problem(rows, counts)
    spans = replace(laid_out, rows=read)
    assert spans.table is table
    choice = tuple(int(x) for x in np.random.default_rng(seed).integers(0, 3, 6) % np.array(counts))
    assert spans.usage(choice).standard.tolist() == laid_out.usage(choice).standard.tolist()
    assert spans.fingerprint() == laid_out.fingerprint()


def test_table_rows_need_a_step_per_row():
    with pytest.raises(ValueError, match="2 steps for 1 rows"):
        TableRows(term_table(TWO_STEPS.rows[:1]), np.array([0, 1]))


def test_ranges_write_each_run_out_end_to_end():
    assert ranges(b(5, 0, 9), b(2, 3, 1)).tolist() == [5, 6, 0, 1, 2, 9]
    assert ranges(b(), b()).tolist() == []

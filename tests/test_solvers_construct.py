"""`solvers.construct`: the constructive start repairs budgets, is fast on many rows, and its tie costs
order exchange bytes before changed values."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
from problems import BUDGETED, problem

from ipuplan.model.objective import Objective
from ipuplan.model.problem import FORBIDDEN, Edge, Problem, StepRow
from ipuplan.plan.budgets import Budgets
from ipuplan.solvers import construct as construct_module
from ipuplan.solvers.construct import (
    GroupRows,
    Standing,
    _scores,
    changed_costs,
    construct,
    repair,
    tie_bound,
    tie_ranks,
    tie_value,
)


def test_constructive_repairs_a_budget_the_smallest_candidates_break():
    # Smallest by bytes is A=0 (50 std): standard 20 + 50 + 10 = 80 > 60. A=1 puts 55 in interleaved: fits.
    choice = construct(BUDGETED)
    assert choice == (1, 1) and BUDGETED.usage(choice).violation(BUDGETED.limits) == 0


def test_fit_objective_constructive_fits():
    choice = construct(BUDGETED, Objective.FIT)
    assert BUDGETED.usage(choice).violation(BUDGETED.limits) == 0


def test_constructive_lowers_the_peak_of_a_large_problem():
    # 2,000 groups over 3,000 rows, 8 candidates each (its speed is benchmarks/scaling.py's to measure).
    rng = np.random.default_rng(0)
    rows = []
    for r in range(3000):
        groups = sorted(set(rng.integers(0, 2000, 30).tolist()))
        rows.append(StepRow(r, 100, 0, tuple((g, rng.integers(1, 100, 8), np.zeros(8, dtype=np.int64))
                                             for g in groups)))
    big = problem(rows, (8,) * 2000)
    choice = construct(big)
    assert big.usage(choice).peak < big.usage(big.input_choice).peak


def test_the_least_tie_value_sums_past_int64_exactly_and_counts_edges():
    """IOPDDL's costs run to 1e18: two groups at 6e18 each sum past int64's end, as Python integers; an edge adds
    its cheapest pair; the first group's input is not among its cheapest (its 3 values change), the second's is."""
    big = 6 * 10**18
    ties = problem([StepRow(0, 0, 0, ())], (2, 2), exchange=((big, big + 1), (big, big)), sizes=(3, 4),
                   input_choice=(1, 0), edges=(Edge(0, 1, np.array([[5, 7], [9, 11]])),))
    assert tie_bound(ties) == (2 * big + 5, 3)


def test_tie_costs_order_exchange_bytes_before_changed_values():
    # Three groups of 3, 4 and 5 values whose candidates send 0, 1 or 2 bytes: one byte less beats every
    # value changing, so the tie value ranks the choices as (exchange bytes, changed values) does.
    ties = problem([StepRow(0, 0, 0, ())], (3, 3, 3), exchange=((2, 0, 1), (1, 2, 0), (0, 1, 2)), sizes=(3, 4, 5))
    choices = list(itertools.product(range(3), repeat=3))
    by_tie = sorted(choices, key=lambda c: (tie_value(ties, c), c))
    assert by_tie == sorted(choices, key=lambda c: (ties.exchange_of(c), ties.changed_of(c), c))
    # the least: no exchange, by changing the first two groups (3 + 4 values); the third's input sends nothing
    assert tie_bound(ties) == min(tie_value(ties, c) for c in choices) == tie_value(ties, (1, 2, 0)) == (0, 3 + 4)
    # the ranks order each group's candidates as the weighted sum does, without a product that could overflow
    for ranks, exchange, changed in zip(tie_ranks(ties), ties.exchange, changed_costs(ties)):
        weighted = np.array(exchange) * ties.tie_weight + changed
        assert (ranks[:, None] <= ranks[None, :]).tolist() == (weighted[:, None] <= weighted[None, :]).tolist()


def test_a_group_live_at_no_row_is_moved_off_a_forbidden_pair():
    # Group 1 holds no bytes anywhere (an IOPDDL node of one usage); the pair (0, 0) is forbidden. Switching group 0
    # raises the peak (10 -> 30), switching group 1 changes no row: the repair takes the latter.
    rows = (StepRow(0, 0, 0, ((0, np.array([10, 30]), np.array([0, 0])),)),)
    edge = Edge(0, 1, np.array([[FORBIDDEN, 0], [0, FORBIDDEN]]))
    start = replace(problem(rows, (2, 2)), edges=(edge,))
    assert repair(start, [0, 0], GroupRows(start)) == [0, 1]


def test_each_switch_is_scored_as_the_usage_after_it_says_though_rows_that_tell_nothing_are_skipped():
    # Random rows, under budgets that some rows break and under none: every (group, candidate) column of `_scores` is
    # the (total excess, peak, rows at the peak) of the choice with that one switch, computed from scratch.
    rng = np.random.default_rng(7)
    for trial in range(20):
        counts = tuple(int(n) for n in rng.integers(1, 5, 12))
        rows = []
        for r in range(40):
            groups = sorted(set(rng.integers(0, 12, 5).tolist()))
            rows.append(StepRow(r, int(rng.integers(0, 60)), int(rng.integers(0, 20)), tuple(
                (g, rng.integers(0, 40, counts[g]), rng.integers(0, 25, counts[g]) * int(rng.integers(0, 2)))
                for g in groups)))
        random = problem(rows, counts, limits=Budgets(150 + 5 * trial, 60, 10).limits if trial % 2 else ())
        choice = [int(rng.integers(0, n)) for n in counts]
        usage = random.usage(tuple(choice))
        focus = int(np.argmax(usage.standard + usage.interleaved))
        groups = [g for g, _, _ in random.rows[focus].terms]
        assert scored(random, GroupRows(random), groups, choice) == rescored(random, groups, choice)


def scored(p: Problem, index: GroupRows, groups: list[int], choice: list[int]) -> list[tuple[int, ...]]:
    """`_scores` of `groups` at `choice`, a tuple per (group, candidate)."""
    usage = p.usage(tuple(choice))
    standard, interleaved = usage.standard.copy(), usage.interleaved.copy()
    scores = _scores(p, index, groups, choice, standard, interleaved, Standing(p, standard.copy(), interleaved.copy()))
    return [tuple(int(x) for x in column) for column in scores.T]


def rescored(p: Problem, groups: list[int], choice: list[int]) -> list[tuple[int, ...]]:
    """Per (group, candidate) of `groups`: (total excess, peak, rows at the peak) of `choice` with that one switch,
    computed from scratch."""
    found = []
    for g in groups:
        for c in range(p.candidate_counts[g]):
            after = p.usage(tuple(c if h == g else pick for h, pick in enumerate(choice)))
            total = after.standard + after.interleaved
            found.append((after.violation(p.limits), int(total.max()), int((total == total.max()).sum())))
    return found


def unrolled(block: Problem, copies: int) -> Problem:
    """`copies` copies of `block`, each one's groups and steps numbered after the last one's (an unrolled program)."""
    groups, steps = len(block.candidate_counts), block.steps_total
    return replace(
        block, candidate_counts=block.candidate_counts * copies, input_choice=block.input_choice * copies,
        group_sizes=block.group_sizes * copies, exchange=block.exchange * copies, steps_total=steps * copies,
        rows=tuple(StepRow(row.step + k * steps, row.standard, row.interleaved,
                           tuple((g + k * groups, std, il) for g, std, il in row.terms))
                   for k in range(copies) for row in block.rows),
        edges=tuple(Edge(e.a + k * groups, e.b + k * groups, e.costs) for k in range(copies) for e in block.edges))


def with_one_figure_more(p: Problem, row: int, term: int, candidate: int, more: int = 1) -> Problem:
    """`p` with the standard bytes of one candidate of one term of one row raised by `more`."""
    rows = list(p.rows)
    terms = list(rows[row].terms)
    g, standard, interleaved = terms[term]
    standard = standard.copy()
    standard[candidate] += more
    terms[term] = (g, standard, interleaved)
    rows[row] = replace(rows[row], terms=tuple(terms))
    return replace(p, rows=tuple(rows))


def random_block(rng: np.random.Generator) -> Problem:
    """Six groups of 1-4 candidates over eight rows of random bytes, some in interleaved memory."""
    counts = tuple(int(n) for n in rng.integers(1, 5, 6))
    rows = [StepRow(r, int(rng.integers(0, 60)), int(rng.integers(0, 20)), tuple(
        (g, rng.integers(0, 40, counts[g]), rng.integers(0, 25, counts[g]) * int(rng.integers(0, 2)))
        for g in sorted(set(rng.integers(0, 6, 3).tolist())))) for r in range(8)]
    return problem(rows, counts, limits=Budgets(150, 60, 10).limits)


def test_a_group_set_s_kept_frame_scores_every_copy_and_choice_as_a_fresh_count_does():
    # Copies of one block (the same group sets, shifted), the last with one byte more: each row's group set is
    # scored at three choices with one `GroupRows` (its frame kept from the first), each as the usage after the
    # switch says, and its frame is its groups' rows and terms (`located`) end to end.
    rng = np.random.default_rng(11)
    for _ in range(5):
        block = random_block(rng)
        row = int(rng.integers(0, len(block.rows)))
        p = with_one_figure_more(unrolled(block, 4), 3 * len(block.rows) + row, 0, 0)
        index = GroupRows(p)
        for _ in range(3):
            choice = [int(rng.integers(0, n)) for n in p.candidate_counts]
            for r in range(len(p.rows)):
                groups = [g for g, _, _ in p.rows[r].terms]
                assert scored(p, index, groups, choice) == rescored(p, groups, choice)
                frame = index.frame(groups)
                located = [index.located(g) for g in groups]
                assert frame.lengths.tolist() == [len(rows) for rows, _ in located]
                for kept, fresh in zip(frame[:2], zip(*located)):
                    assert kept.tolist() == np.concatenate(fresh).tolist()


def test_a_repair_with_frames_kept_moves_as_one_without(monkeypatch):
    rng = np.random.default_rng(12)
    for _ in range(5):
        p = with_one_figure_more(unrolled(random_block(rng), 6), 0, 0, 0, 7)
        start = [0] * p.groups
        kept = repair(p, start, GroupRows(p))
        monkeypatch.setattr(construct_module, "FRAMED_ROWS", 0)
        assert repair(p, start, GroupRows(p)) == kept
        monkeypatch.undo()


def test_a_given_choice_is_repaired_not_rebuilt():
    # BUDGETED's smallest candidates break the standard budget; given the input (also over it) the repair still
    # meets it, and given the repaired choice it moves nothing.
    repaired = construct(BUDGETED, given=BUDGETED.input_choice)
    assert BUDGETED.usage(repaired).violation(BUDGETED.limits) == 0
    assert construct(BUDGETED, given=repaired) == repaired

"""`solvers.linear`, model reduction (issue 11): the reduced rows every backend writes are the same
inequalities as the problem's rows, exactly, and fewer entries."""

from __future__ import annotations

import itertools
from importlib.util import find_spec

import numpy as np
import pytest
from problems import problem

from ipuplan.model.build import problem_of
from ipuplan.model.problem import Problem, StepRow
from ipuplan.plan.budgets import Budgets
from ipuplan.solvers import SolverSettings, SolveStatus, solve
from ipuplan.solvers.linear import linear_rows
from ipuplan.solvers.reduce import reduce

SETTINGS = SolverSettings(time_limit=5, workers=1, deterministic=True)
HIGHS = pytest.param("highs", marks=pytest.mark.skipif(find_spec("scipy") is None, reason="HiGHS needs SciPy"))


def always_together(seed: int = 3) -> Problem:
    """Three groups of six candidates live at the same eight rows (merged), one group live at two of them
    (written directly), under budgets that some choices break."""
    rng = np.random.default_rng(seed)
    shared = [(g, rng.integers(0, 90, 6), rng.integers(0, 90, 6)) for g in range(3)]
    alone = (3, rng.integers(0, 50, 4), rng.integers(0, 50, 4))
    rows = [StepRow(r, 10 * r, 5 * r, tuple(shared) + ((alone,) if r in (2, 5) else ())) for r in range(8)]
    return problem(rows, (6, 6, 6, 4), limits=Budgets(420, 200, 0).limits)


def left_hand_sides(p: Problem, choice: tuple[int, ...]):
    """Per written rule, (kept rows, constant + coefficients . columns) with the columns of `choice`."""
    rows = linear_rows(p)
    booleans = rows.booleans_of(choice)
    columns = np.concatenate([booleans, rows.sums.values(booleans)])
    for rule_rows in rows.rules:
        sums = np.add.reduceat(np.append(rule_rows.coefficients * columns[rule_rows.columns], 0),
                               rule_rows.indptr[:-1]) if rule_rows.entries else np.zeros(len(rule_rows.rows), np.int64)
        empty = rule_rows.indptr[:-1] == rule_rows.indptr[1:]
        yield rule_rows, rule_rows.constant + np.where(empty, 0, sums)


def test_merged_rows_are_the_same_inequalities_for_every_choice():
    p = always_together()
    rows = linear_rows(p)
    assert rows.merged_terms == 3 and rows.sums.count == 2 and rows.entries < rows.plain_entries
    total_budget = next(limit for limit in p.limits if (limit.standard, limit.interleaved) == (1, 1))
    assert rows.peak_cap == total_budget.bytes and all(r.rule.limit != p.limits.index(total_budget) for r in rows.rules)
    for choice in itertools.product(range(6), range(6), range(6), range(4)):
        usage = p.usage(choice)
        for rule_rows, lhs in left_hand_sides(p, choice):
            rule = rule_rows.rule
            exact = rule.standard * usage.standard + rule.interleaved * usage.interleaved
            assert np.array_equal(lhs, exact[rule_rows.rows])
            cap = p.lower_bound() if rule.limit is None else p.limits[rule.limit].bytes
            left_out = np.setdiff1d(np.arange(len(p.rows)), rule_rows.rows)
            assert (exact[left_out] <= cap).all()


def test_the_reference_model_is_smaller_and_its_rows_exact(facts, spaces):
    p = reduce(problem_of(facts, spaces["full"])).problem
    rows = linear_rows(p)
    assert rows.entries < rows.plain_entries
    choice = p.input_choice
    usage = p.usage(choice)
    for rule_rows, lhs in left_hand_sides(p, choice):
        exact = rule_rows.rule.standard * usage.standard + rule_rows.rule.interleaved * usage.interleaved
        assert np.array_equal(lhs, exact[rule_rows.rows])


@pytest.mark.parametrize("backend", ["cpsat", HIGHS])
def test_both_backends_reach_the_brute_force_optimum_over_the_merged_rows(backend):
    p = always_together()
    feasible = [(p.usage(c).peak, c) for c in itertools.product(range(6), range(6), range(6), range(4))
                if not p.usage(c).violation(p.limits)]
    result = solve(p, SETTINGS, backend)
    assert result.status == SolveStatus.OPTIMAL and result.peak == min(feasible)[0]
    assert result.terms_merged == 3 and result.entries < result.entries_before

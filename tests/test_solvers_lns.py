"""The neighbourhood search of a `fit` with edges (`solvers.lns`), on small random problems against brute-force
enumeration: a neighbourhood's problem prices every choice of its groups as the whole problem does, the search ends no
worse than it began, and with one worker it counts deterministic units, not the clock."""

from __future__ import annotations

import itertools
import time
from dataclasses import replace

import numpy as np
import pytest
from problems import b, problem, valid_choices
from test_model_problem import random_rows
from test_solvers_lagrange import FITTING, valid

from ipuplan.model.problem import Edge, Problem, StepRow, term_table
from ipuplan.plan.budgets import Limit
from ipuplan.solvers import cpsat
from ipuplan.solvers.construct import GroupRows
from ipuplan.solvers.lns import grown, neighbourhood, search


@pytest.mark.parametrize("p", FITTING[:8])
def test_a_neighbourhood_prices_every_choice_of_its_groups_as_the_whole_problem(p):
    index = GroupRows(p)
    base = next(valid_choices(p))
    free = grown(index, 0, 2, np.random.default_rng(0))
    part = neighbourhood(p, index, base, free, p.usage(base))
    fixed = sum(int(p.exchange[g][c]) for g, c in enumerate(base) if g not in free.tolist()) + sum(
        int(e.costs[base[e.a], base[e.b]]) for e in p.edges if e.a not in free.tolist() and e.b not in free.tolist())
    for local in itertools.product(*(range(n) for n in part.problem.candidate_counts)):
        whole = list(base)
        for g, c in zip(free.tolist(), local):
            whole[g] = c
        assert valid(part.problem, local) == valid(p, tuple(whole))
        if valid(p, tuple(whole)):
            assert part.problem.exchange_of(local) + fixed == p.exchange_of(tuple(whole))


@pytest.mark.parametrize("p", FITTING[:6])
def test_search_ends_no_worse_and_valid(p):
    base = next(valid_choices(p))
    found = search(p, base, 0.5, cpsat.solve_part)
    assert valid(p, found) and p.exchange_of(found) <= p.exchange_of(base)


def test_a_deterministic_search_counts_units_not_the_clock():
    """With one worker the neighbourhoods are counted by the deterministic units they used (at least PART_UNITS
    each), so the same ones are solved on a quiet machine and a busy one (issue 36, item 3)."""
    p = FITTING[0]
    base = next(valid_choices(p))
    calls: list[float] = []

    def slow_part(problem, seconds, seed):
        calls.append(seconds)
        time.sleep(0.02)  # wall time passes; only the units count
        return False, None, 0.3

    assert search(p, base, 1.0, slow_part, deterministic=True) == tuple(base)
    assert calls == pytest.approx([1.0, 0.7, 0.4, 0.1])


def spanned(seed: int) -> Problem:
    """Six groups over runs of 25 rows (`test_model_problem.random_rows`), a budget on both classes halfway between
    the least and the most any choice gives, and a chain of edges."""
    rows = random_rows(seed)
    table = term_table(rows)
    counts = tuple(int(table.counts[table.group == g].max()) for g in range(6))
    rng = np.random.default_rng(seed)
    edges = [Edge(g, g + 1, rng.integers(0, 9, (counts[g], counts[g + 1]))) for g in range(5)]
    loose = problem(rows, counts, edges=edges, exchange=tuple(tuple(rng.integers(0, 9, n).tolist()) for n in counts))
    low, high = loose.lower_bound(), loose.upper_bound()
    return replace(loose, limits=(Limit("total", 1, 1, (low + high) // 2), Limit("standard", 1, 0, high)))


@pytest.mark.parametrize("seed", range(10))
def test_a_neighbourhood_keeps_one_row_per_run_and_limit_and_decides_as_the_whole_problem(seed):
    """Of the rows between two of the free groups' span ends (the same terms), only the most loaded per limit is kept:
    every choice of the free groups is valid in the neighbourhood exactly when it is in the whole problem."""
    p = spanned(seed)
    choices = list(valid_choices(p))
    if not choices:
        pytest.skip("no valid choice")
    base = choices[len(choices) // 2]
    index = GroupRows(p)
    free = np.array([1, 2, 3])
    part = neighbourhood(p, index, base, free, p.usage(base))
    runs = len(np.unique(np.concatenate([np.concatenate([[r.min(), r.max() + 1] for _, r in index.segments(g)])
                                         for g in free.tolist()])))
    assert len(part.problem.rows) <= runs * len(p.limits)
    for local in itertools.product(*(range(n) for n in part.problem.candidate_counts)):
        whole = list(base)
        for g, c in zip(free.tolist(), local):
            whole[g] = c
        assert valid(part.problem, local) == valid(p, tuple(whole))


def test_a_run_of_rows_with_the_same_free_terms_is_one_row_per_limit():
    """Group 0 (free) and group 1 (fixed) live over ten rows whose constants differ: the neighbourhood keeps the one
    row of the most fixed bytes, which decides every choice of group 0 as the ten rows do."""
    a, c = (0, b(5, 30), b(0, 0)), (1, b(7, 1), b(0, 0))
    rows = [StepRow(r, 10 + (r * 7) % 11, 0, (a, c)) for r in range(10)]
    p = problem(rows, (2, 2), limits=(Limit("total", 1, 1, 45),), edges=[Edge(0, 1, b(0, 1, 2, 3).reshape(2, 2))])
    part = neighbourhood(p, GroupRows(p), (0, 0), np.array([0]), p.usage((0, 0)))
    assert [row.step for row in part.problem.rows] == [int(np.argmax([row.standard for row in rows]))]
    assert [valid(part.problem, (k,)) for k in range(2)] == [valid(p, (k, 0)) for k in range(2)] == [True, False]

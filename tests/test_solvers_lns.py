"""The neighbourhood search of a `fit` with edges (`solvers.lns`), on small random problems against brute-force
enumeration: a neighbourhood's problem prices every choice of its groups as the whole problem does, the search ends no
worse than it began, and with one worker it counts deterministic units, not the clock."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
from problems import valid_choices
from test_solvers_lagrange import FITTING, valid

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

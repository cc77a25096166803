"""The neighbourhood search of a `fit` with edges (`solvers.lns`), on small random problems against brute-force
enumeration: a neighbourhood's problem prices every choice of its groups as the whole problem does, the search ends no
worse than it began, and with one worker it counts deterministic units, not the clock; a repair moves a choice over a
limit within it where one-group moves cannot, never further over nor to a forbidden pick."""

from __future__ import annotations

import functools
import itertools
import time
from dataclasses import replace

import numpy as np
import pytest
from problems import b, problem, valid_choices
from test_model_problem import random_rows
from test_pairwise import PROBLEMS
from test_solvers_lagrange import FITTING, valid

from ipuplan.model.problem import FORBIDDEN, Edge, Problem, StepRow, term_table
from ipuplan.plan.budgets import Budgets, Limit
from ipuplan.solvers import cpsat
from ipuplan.solvers.construct import GroupRows, Pairing
from ipuplan.solvers.lagrange import lagrangian, relieve
from ipuplan.solvers.lns import _seeds, grown, neighbourhood, repaired, search


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


@pytest.mark.parametrize("p", FITTING)
def test_a_neighbourhood_is_solved_for_the_least_exchange_no_dearer_than_its_input(p):
    """`solve_part` solves the problem reduced (`solvers.reduce`) and lifts its choice back: the brute-force least
    exchange of the valid choices, from each valid input; from an input with a forbidden pick (which the reduction
    drops) the problem as it is, no dearer than that input."""
    choices = list(itertools.product(*(range(n) for n in p.candidate_counts)))
    least = min(p.exchange_of(c) for c in choices if valid(p, c))
    for start in [c for c in choices if valid(p, c)][:3] + [c for c in choices if p.forbidden_in(c)][:2]:
        optimal, found, _ = cpsat.solve_part(replace(p, input_choice=start), 10.0, 0)
        assert optimal and found is not None and not p.usage(found).violation(p.limits)
        assert p.exchange_of(found) == min(least, p.exchange_of(start)) if valid(p, start) else (
            p.exchange_of(found) <= p.exchange_of(start))


@pytest.mark.parametrize("p", PROBLEMS[:12])
def test_the_seeds_are_the_groups_dearer_than_their_least_pairs_dearest_first_the_tried_left_out(p):
    choice = p.input_choice
    excess = np.zeros(p.groups)
    for edge in p.edges:
        excess[[edge.a, edge.b]] += float(edge.costs[choice[edge.a], choice[edge.b]] - edge.costs.min())
    excess += [float(costs[c] - min(costs)) for costs, c in zip(p.exchange, choice)]
    assert Pairing(p).excess(choice, p.groups) + [float(costs[c] - min(costs)) for costs, c in zip(
        p.exchange, choice)] == pytest.approx(excess)
    tried = np.zeros(p.groups, dtype=bool)
    tried[::2] = True
    seeds = _seeds(p, GroupRows(p), choice, tried).tolist()
    assert sorted(seeds) == [g for g in range(p.groups) if excess[g] > 0 and not tried[g]]
    assert excess[seeds].tolist() == sorted(excess[seeds].tolist(), reverse=True)


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


def _pairs_that_must_agree() -> Problem:
    """One row, limit 100, three groups at 60 bytes each (180): each may drop to 10 bytes, groups 0 and 1 for 1 of
    exchange each but only together (their edge forbids the mixed pairs), group 2 for 50. The least exchange within
    the limit moves 0 and 1 (80 bytes, exchange 2); one-group moves can only move 2 (130 bytes)."""
    row = StepRow(0, 0, 0, tuple((g, b(60, 10), b(0, 0)) for g in range(3)))
    return problem([row], (2, 2, 2), exchange=((0, 1), (0, 1), (0, 50)), sizes=(0, 0, 0),
                   limits=Budgets(100, 0, 0).limits[:1], edges=[Edge(0, 1, np.array([[0, FORBIDDEN], [FORBIDDEN, 0]]))])


def test_a_repair_moves_a_choice_over_the_limit_within_it_where_one_group_moves_cannot():
    p = _pairs_that_must_agree()
    assert not valid(p, tuple(relieve(p, (0, 0, 0), GroupRows(p))))
    assert tuple(repaired(p, (0, 0, 0), cpsat.repair_part, time.perf_counter() + 30)) == (1, 1, 0)


def test_the_lagrangian_rounds_repair_a_choice_over_the_limit():
    p = _pairs_that_must_agree()
    repair = functools.partial(repaired, p, repair_part=cpsat.repair_part)
    assert lagrangian(p, (0, 0, 0), rounds=3, repair=repair) == (1, 1, 0)


def test_a_repair_gives_up_where_no_neighbourhood_lightens_the_choice():
    p = _pairs_that_must_agree()
    tight = replace(p, limits=Budgets(20, 0, 0).limits[:1])  # 30 bytes at least: nothing fits
    least = (1, 1, 1)
    assert tuple(repaired(tight, least, cpsat.repair_part, time.perf_counter() + 30)) == least


@pytest.mark.parametrize("p", [p for p in PROBLEMS if p.limits][:12])
def test_a_repair_never_leaves_a_choice_further_over_nor_makes_a_forbidden_pick(p):
    choices = itertools.product(*(range(n) for n in p.candidate_counts))
    over = [c for c in choices if not p.forbidden_in(c) and p.usage(c).violation(p.limits)][:3]
    for choice in over:
        fixed = tuple(repaired(p, choice, cpsat.repair_part, time.perf_counter() + 30))
        assert not p.forbidden_in(fixed)
        assert p.usage(fixed).violation(p.limits) <= p.usage(choice).violation(p.limits)


def test_a_repair_neighbourhood_counts_its_work_and_its_exchange_gets_what_the_excess_leaves(monkeypatch):
    # beside busy loops a neighbourhood's wall seconds did a quarter of the work: the work is counted, not the clock
    asked, solver_of = [], cpsat._solver_of_units

    def recorded(settings, units, guard):
        solver = solver_of(settings, units, guard)
        asked.append((units, guard, solver))
        return solver
    monkeypatch.setattr(cpsat, "_solver_of_units", recorded)
    p = next(p for p in PROBLEMS if p.limits)
    began = time.perf_counter()
    cpsat._least_excess(p, 9.0, 0, None)
    (excess, guard, first), (exchange, same_guard, _) = asked
    assert excess == pytest.approx(cpsat.EXCESS_SHARE * cpsat.REPAIR_UNITS * 9.0)
    assert exchange == pytest.approx(cpsat.REPAIR_UNITS * 9.0 - first.response_proto.deterministic_time)
    assert guard == same_guard == pytest.approx(began + cpsat.REPAIR_STRETCH * 9.0, abs=0.05)
    assert first.parameters.max_deterministic_time == pytest.approx(excess)


@pytest.mark.parametrize("p", [p for p in PROBLEMS if p.limits][:12])
def test_a_repair_neighbourhood_is_solved_for_the_least_excess_then_the_least_exchange_there(p):
    def excess(choice) -> int:
        return sum(p.usage(choice).worst_excess(p.limits))

    allowed = [c for c in itertools.product(*(range(n) for n in p.candidate_counts)) if not p.forbidden_in(c)]
    found = cpsat.repair_part(p, 10.0, 0)
    if not allowed:
        assert found is None
        return
    least = min((excess(c), p.exchange_of(c)) for c in allowed)
    assert found is not None and (excess(found), p.exchange_of(found)) == least
    for start in allowed[::max(1, len(allowed) // 3)]:  # inputs the reduction keeps: solved reduced
        found = cpsat.repair_part(replace(p, input_choice=start), 10.0, 0)
        assert found is not None and (excess(found), p.exchange_of(found)) == least

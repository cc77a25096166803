"""Pairwise costs (`model.problem.Edge`): each exact reduction on a small hand-made problem, and every backend on
random small problems with edges, forbidden pairs and budgets, against brute-force enumeration of every choice;
the lexicographic phases on weights that would overflow a combined objective (issue 20)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from importlib.util import find_spec

import numpy as np
import pytest
from problems import b, best_by_brute_force, problem, valid_choices

from ipuplan.model.objective import Objective
from ipuplan.model.problem import FORBIDDEN, Edge, Problem, StepRow
from ipuplan.plan.budgets import Budgets
from ipuplan.solvers import SolverSettings, SolveStatus, cpsat, pareto_front, solve
from ipuplan.solvers.construct import construct
from ipuplan.solvers.reduce import dominance, pairwise, reduce

SETTINGS = SolverSettings(time_limit=5, workers=1, deterministic=True)
HIGHS = pytest.param("highs", marks=pytest.mark.skipif(find_spec("scipy") is None, reason="HiGHS needs SciPy"))
F = FORBIDDEN


def matrix(*rows) -> np.ndarray:
    return np.array(rows, dtype=np.int64)


def flat(counts, bytes_=None) -> list[StepRow]:
    """One row where every group is live, each candidate `bytes_[g][c]` standard bytes (default 10 x index)."""
    return [StepRow(0, 0, 0, tuple((g, b(*(bytes_[g] if bytes_ else [10 * c for c in range(n)])), b(*[0] * n))
                                   for g, n in enumerate(counts)))]


def assert_exact(original: Problem, reduced) -> None:
    """Every valid choice of `original` is a lifted choice of the reduction, and every reduced choice lifts to one with
    the same bytes, exchange, forbidden picks or none, and changed values up to one constant; the optimum is equal."""
    counts = reduced.problem.candidate_counts
    lifted = {c: reduced.lift(c) for c in itertools.product(*(range(n) for n in counts))}
    assert set(valid_choices(original)) <= set(lifted.values())
    offsets = set()
    for mine, theirs in lifted.items():
        assert reduced.problem.exchange_of(mine) == original.exchange_of(theirs) or original.forbidden_in(theirs)
        assert bool(reduced.problem.forbidden_in(mine)) == bool(original.forbidden_in(theirs))
        assert reduced.problem.usage(mine).standard.tolist() == original.usage(theirs).standard.tolist()
        offsets.add(original.changed_of(theirs) - reduced.problem.changed_of(mine))
    assert len(offsets) == 1
    for objective in Objective:
        best = best_by_brute_force(reduced.problem, objective)
        assert best_by_brute_force(original, objective) == (best[:-1] + (best[-1] + offsets.pop(),) if best else None)
        offsets.add(original.changed_of(lifted[next(iter(lifted))]) - reduced.problem.changed_of(next(iter(lifted))))


def test_an_edge_with_one_candidate_on_a_side_becomes_exchange_of_the_other():
    # A has one candidate: the edge is B's exchange (1, 5, forbidden); B's candidate 2 goes.
    p = problem(flat((1, 3)), (1, 3), exchange=((0,), (2, 2, 2)), edges=[Edge(0, 1, matrix([1, 5, F]))])
    reduced = pairwise(p)
    assert reduced.problem.edges == () and reduced.kept[1].tolist() == [0, 1]
    assert reduced.problem.exchange == ((0,), (3, 7))
    assert_exact(p, reduced)


def test_an_edge_that_separates_becomes_exchange_of_both_sides():
    # costs[i, j] = r[i] + c[j] with r = (1, 4), c = (0, 2, 7): no pair variable needed.
    p = problem(flat((2, 3)), (2, 3), edges=[Edge(0, 1, matrix([1, 3, 8], [4, 6, 11]))])
    reduced = pairwise(p)
    assert reduced.problem.edges == () and reduced.problem.exchange == ((1, 4), (0, 2, 7))
    assert_exact(p, reduced)
    # one entry off by one does not separate: the edge stays
    assert len(pairwise(problem(flat((2, 3)), (2, 3),
                                edges=[Edge(0, 1, matrix([1, 3, 8], [4, 6, 12]))])).problem.edges) == 1


def test_edges_between_the_same_groups_are_one_matrix_in_either_orientation():
    first, second = matrix([0, 5], [3, 0]), matrix([1, 0], [0, 9])  # second is (B, A)
    p = problem(flat((2, 2)), (2, 2), edges=[Edge(0, 1, first), Edge(1, 0, second)])
    reduced = pairwise(p)
    assert len(reduced.problem.edges) == 1 and reduced.problem.edges[0].costs.tolist() == [[1, 5], [3, 9]]
    assert_exact(p, reduced)


def test_forbidden_candidates_are_dropped_until_none_is_left():
    # A1 is forbidden alone; B0 pairs only with A1, so it goes; C2 pairs only with B0, so it goes too.
    p = problem(flat((2, 3, 3)), (2, 3, 3), exchange=((0, F), (0, 0, 0), (0, 0, 0)), input_choice=(1, 0, 2),
                sizes=(2, 3, 4), edges=[Edge(0, 1, matrix([F, 1, 2], [0, F, F])),
                                        Edge(1, 2, matrix([F, F, 0], [1, 0, F], [0, 3, F]))])
    reduced = pairwise(p)
    assert [k.tolist() for k in reduced.kept] == [[0], [1, 2], [0, 1]]
    # every group's input went: their changes are a constant, left out
    assert reduced.problem.group_sizes == (0, 0, 0)
    assert_exact(p, reduced)
    result = solve(p, SETTINGS)
    assert (result.exchange_bytes, result.changed_values) == best_by_brute_force(p, Objective.PEAK)[1:]


def test_a_group_with_every_candidate_forbidden_is_infeasible_without_a_solve(monkeypatch):
    p = problem(flat((2, 2)), (2, 2), edges=[Edge(0, 1, matrix([F, 0], [F, 0])), Edge(0, 1, matrix([0, F], [0, F]))])
    assert pairwise(p).infeasible
    monkeypatch.setattr(cpsat, "build_model", lambda *a, **k: pytest.fail("no model for an infeasible problem"))
    assert solve(p, SETTINGS).status == SolveStatus.INFEASIBLE


def test_dominance_keeps_a_candidate_its_edges_make_cheaper():
    # B1 (B's input) has fewer bytes and no more exchange than B0, but costs more with A0 on the edge: both stay.
    # With the edge's row no dearer anywhere, B1 dominates B0.
    costs = matrix([0, 6], [9, 1])
    p = problem(flat((2, 2), [[0, 10], [20, 10]]), (2, 2), input_choice=(0, 1), edges=[Edge(0, 1, costs)])
    assert dominance(p).kept[1].tolist() == [0, 1]
    cheaper = replace(p, edges=(Edge(0, 1, matrix([5, 0], [9, 1])),))
    assert dominance(cheaper).kept[1].tolist() == [1]
    for q in (p, cheaper):  # an optimum survives: the reduced problem's is the problem's
        reduced = reduce(q)
        assert best_by_brute_force(reduced.problem, Objective.PEAK) == best_by_brute_force(q, Objective.PEAK)


def random_problem(rng: np.random.Generator) -> Problem:
    """A few groups of 2-4 candidates over three rows, random exchange, edges (some forbidden pairs, some forbidden
    candidates, some parallel or separable), and budgets that some choices break."""
    groups = int(rng.integers(3, 6))
    counts = tuple(int(n) for n in rng.integers(2, 5, groups))
    rows = []
    for step in range(3):
        live = sorted(rng.choice(groups, size=int(rng.integers(1, groups + 1)), replace=False).tolist())
        rows.append(StepRow(step, int(rng.integers(0, 20)), int(rng.integers(0, 20)), tuple(
            (g, rng.integers(0, 40, counts[g]), rng.integers(0, 40, counts[g]) * rng.integers(0, 2)) for g in live)))
    exchange = tuple(tuple(int(x) for x in np.where(rng.random(n) < 0.1, F, rng.integers(0, 30, n))) for n in counts)
    edges = []
    for _ in range(int(rng.integers(1, groups + 2))):
        a, other = (int(x) for x in rng.choice(groups, size=2, replace=False))
        if rng.random() < 0.2:
            costs = rng.integers(0, 20, counts[a])[:, None] + rng.integers(0, 20, counts[other])[None, :]
        else:
            costs = np.where(rng.random((counts[a], counts[other])) < 0.2, F,
                             rng.integers(0, 50, (counts[a], counts[other])))
        edges.append(Edge(a, other, costs))
    p = problem(rows, counts, exchange=exchange, sizes=tuple(int(x) for x in rng.integers(1, 4, groups)),
                input_choice=tuple(int(rng.integers(0, n)) for n in counts), edges=edges)
    low, high = p.lower_bound(), p.upper_bound()
    total = int(rng.integers(low, high + 1))
    return replace(p, limits=Budgets(total + 10, int(rng.integers(total // 3, total + 1)), 10).limits)


PROBLEMS = [random_problem(np.random.default_rng(seed)) for seed in range(24)]


@pytest.mark.parametrize("objective", list(Objective))
@pytest.mark.parametrize("backend", ["cpsat", HIGHS])
def test_exact_backends_reach_the_brute_force_optimum(backend, objective):
    settings = replace(SETTINGS, objective=objective)
    for p in PROBLEMS:
        best = best_by_brute_force(p, objective)
        result = solve(p, settings, backend)
        if best is None:
            assert result.status == SolveStatus.INFEASIBLE and result.peak is None
            continue
        figures = (((result.peak,) if objective == Objective.PEAK else ())
                   + (result.exchange_bytes, result.changed_values))
        assert result.status == SolveStatus.OPTIMAL and figures == best
        assert p.forbidden_in(result.choice) == 0 and not p.usage(result.choice).violation(p.limits)
        assert result.exchange_bytes == p.exchange_of(result.choice)


@pytest.mark.parametrize("objective", list(Objective))
def test_constructive_and_greedy_never_make_a_forbidden_pick(objective):
    for p in PROBLEMS:
        choice = construct(p, objective)
        if best_by_brute_force(replace(p, limits=()), objective) is not None:
            assert p.forbidden_in(choice) == 0
        result = solve(p, replace(SETTINGS, objective=objective), "greedy")
        if result.peak is not None:
            assert p.forbidden_in(result.choice) == 0 and not p.usage(result.choice).violation(p.limits)
        else:
            assert result.choice == p.input_choice


def test_the_front_prices_the_edges():
    # Two groups, the smaller peak needs the dearer pair: the front has both points, each priced with its pair.
    p = problem(flat((2, 2), [[20, 0], [20, 0]]), (2, 2), edges=[Edge(0, 1, matrix([0, 9], [9, 40]))])
    points, ended = pareto_front(p, SETTINGS, 5)
    assert ended and [(q.peak, q.exchange_bytes) for q in points] == [(0, 40), (20, 9), (40, 0)]
    assert all(q.exchange_bytes == p.exchange_of(q.choice) for q in points)


# Issue 20: values of 10^7 each, exchange about 10^12 per candidate: exchange x (sum of sizes + 1) alone passes int64.
HUGE = problem([StepRow(0, 5, 0, ((0, b(10, 10, 10), b(0, 0, 0)), (1, b(30, 10, 10), b(0, 0, 0)))),
                StepRow(1, 0, 0, ((2, b(20, 20), b(0, 0)),))], (3, 3, 2), sizes=(10**7, 3 * 10**7, 2 * 10**7),
               exchange=((4 * 10**12, 10**12, 10**12), (10**12, 2 * 10**12, 2 * 10**12), (10**12, 10**12)),
               input_choice=(0, 2, 0), edges=[Edge(0, 2, matrix([0, 7 * 10**11], [5 * 10**11, 0], [5 * 10**11, 0]))])


@pytest.mark.parametrize("objective", list(Objective))
@pytest.mark.parametrize("backend", ["cpsat", HIGHS])
def test_weights_past_int64_are_solved_one_term_after_the_other(backend, objective, monkeypatch):
    assert not HUGE.ties_combine and PROBLEMS[0].ties_combine
    seen = []
    original = cpsat.run_phases

    def spy(choices, ordered, *rest):
        seen.extend(phase.name for phase in ordered)
        return original(choices, ordered, *rest)

    monkeypatch.setattr(cpsat, "run_phases", spy)
    result = solve(HUGE, replace(SETTINGS, objective=objective), backend)
    figures = ((result.peak,) if objective == Objective.PEAK else ()) + (result.exchange_bytes, result.changed_values)
    assert result.status == SolveStatus.OPTIMAL and figures == best_by_brute_force(HUGE, objective)
    if backend == "cpsat":
        assert seen[-2:] == ["exchange", "changed"]

"""workbench.rigid: IOPDDL nodes that follow others over determining edges merged into one group each; exact against
brute force on instances small enough to try every solution."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_iopddl import brute_force, document, per_time_point

from ipuplan.model.problem import FORBIDDEN
from ipuplan.workbench.iopddl import evaluate, instance_of, merged_problem, row_times, solve_instance, usage_over_time
from ipuplan.workbench.rigid import determining


def rigid_instance(seed: int, nodes: int = 6):
    """A small instance whose edges mostly determine one node's strategy from the other's: a random bijection of
    allowed pairs where the nodes have as many strategies (rigid), else one allowed strategy of the second per
    strategy of the first at most (or of the first per the second's), so that nodes follow others, in chains and
    cycles; the other edges have random costs."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(2, 4, nodes)
    intervals = [(int(s), int(s + rng.integers(1, 4))) for s in rng.integers(0, 5, nodes)]
    costs = [rng.integers(0, 20, n).tolist() for n in counts]
    usages = [rng.integers(0, 10, n).tolist() for n in counts]
    edges = []
    for u, v in itertools.combinations(range(nodes), 2):
        kind = rng.random()
        matrix = np.full((counts[u], counts[v]), FORBIDDEN * 1000)
        if counts[u] == counts[v] and kind < 0.25:
            matrix[np.arange(counts[u]), rng.permutation(counts[v])] = rng.integers(0, 15, counts[u])
        elif kind < 0.4:
            rows = np.flatnonzero(rng.random(counts[u]) < 0.9)  # a strategy of u may allow none of v
            matrix[rows, rng.integers(0, counts[v], len(rows))] = rng.integers(0, 15, len(rows))
            matrix = matrix if rng.random() < 0.5 else matrix.T
            u, v = (u, v) if matrix.shape == (counts[u], counts[v]) else (v, u)
        elif kind < 0.7:
            matrix = rng.integers(0, 15, (counts[u], counts[v]))
        else:
            continue
        edges.append(((int(u), int(v)), matrix.reshape(-1).tolist()))
    least = instance_of(document(intervals, costs, usages, edges))
    floor = usage_over_time(least, np.array([int(np.argmin(u)) for u in usages]))[1].max(initial=0)
    ceiling = usage_over_time(least, np.array([int(np.argmax(u)) for u in usages]))[1].max(initial=0)
    return instance_of(document(intervals, costs, usages, edges, limit=int((floor + ceiling) // 2)))


def allowed_solutions(instance) -> set[tuple[int, ...]]:
    """Every solution that pays no forbidden cost, by trying every one."""
    return {solution for solution in itertools.product(*(range(n) for n in instance.strategy_counts.tolist()))
            if not evaluate(instance, solution).forbidden}


@pytest.mark.parametrize("seed", range(30))
def test_merged_rigid_sets_lift_to_every_allowed_solution_at_its_cost_and_usage(seed):
    instance = rigid_instance(seed)
    joined = merged_problem(instance)
    if joined is None:  # no determining edge, or a group that agrees on no strategy: nothing is allowed then
        assert not any(True for _ in determining(instance)) or not allowed_solutions(instance)
        return
    problem, times = joined.problem, row_times(instance)
    assert problem.groups < instance.nodes and [row.step for row in problem.rows] == times.tolist()
    lifted = set()
    for choice in itertools.product(*(range(n) for n in problem.candidate_counts)):
        solution = tuple(joined.lift(choice).tolist())
        scored = evaluate(instance, solution)
        if scored.cost < FORBIDDEN:
            assert problem.exchange_of(choice) == scored.cost
        assert problem.usage(choice).standard.tolist() == per_time_point(instance, np.array(solution))[times].tolist()
        if not scored.forbidden:
            lifted.add(solution)
    assert lifted == allowed_solutions(instance)  # no allowed solution is lost, none is made twice


def test_a_rigid_cycle_that_agrees_on_no_strategy_is_not_merged():
    swap, keep = [FORBIDDEN, 0, 0, FORBIDDEN], [0, FORBIDDEN, FORBIDDEN, 0]
    odd = instance_of(document([(0, 1)] * 3, [(1, 2)] * 3, [(1, 1)] * 3,
                               edges=[((0, 1), swap), ((1, 2), swap), ((0, 2), swap)]))
    even = instance_of(document([(0, 1)] * 3, [(1, 2)] * 3, [(1, 1)] * 3,
                                edges=[((0, 1), swap), ((1, 2), swap), ((0, 2), keep)]))
    assert merged_problem(odd) is None and not allowed_solutions(odd)
    assert merged_problem(even).problem.candidate_counts == (2,)
    assert not solve_instance(odd, 5.0).solved


@pytest.mark.parametrize("seed", range(12))
def test_the_run_on_merged_rigid_sets_finds_the_brute_force_optimum(seed):
    instance = rigid_instance(seed)
    best = brute_force(instance)
    run = solve_instance(instance, 5.0, workers=1)
    assert run.solved == (best is not None)
    if best is not None:
        assert run.evaluation.cost == best[0] == run.solver_cost
        assert run.groups == (instance.nodes if merged_problem(instance) is None
                              else merged_problem(instance).problem.groups)


def test_where_the_merged_model_is_too_large_the_run_solves_the_nodes(monkeypatch):
    from ipuplan.workbench import iopddl

    instance = next(rigid_instance(seed) for seed in range(30) if merged_problem(rigid_instance(seed)) is not None
                    and brute_force(rigid_instance(seed)) is not None)
    monkeypatch.setattr(iopddl, "whole_model_fits", lambda problem: False)
    run = solve_instance(instance, 5.0, workers=1)
    assert run.groups == instance.nodes and run.solved and run.evaluation.cost == brute_force(instance)[0]


@pytest.mark.parametrize("seed", range(30))
def test_a_merge_whose_pairs_may_pass_the_whole_model_s_bound_is_not_built(monkeypatch, seed):
    from ipuplan.workbench import iopddl

    instance = rigid_instance(seed)
    joined = merged_problem(instance)
    if joined is None or not joined.problem.edges:
        return
    pairs = sum(int(np.count_nonzero(edge.costs < FORBIDDEN)) for edge in joined.problem.edges)
    monkeypatch.setattr(iopddl, "WHOLE_MODEL_PAIRS", pairs - 1)  # told from an upper bound, before the costs
    assert merged_problem(instance) is None
    monkeypatch.setattr(iopddl, "WHOLE_MODEL_PAIRS", 10 * pairs)
    assert merged_problem(instance) is not None

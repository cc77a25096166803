"""workbench.iopddl: the contest's instances read, scored by its own definition, and solved by the core.

The instances are written here, a few nodes each, so that every optimum is known by brute force."""

from __future__ import annotations

import gzip
import itertools
import json
import time

import numpy as np
import pytest

from ipuplan.errors import PlanError
from ipuplan.model.objective import Objective
from ipuplan.model.problem import FORBIDDEN
from ipuplan.solvers import SolverSettings, SolveStatus, solve
from ipuplan.workbench.iopddl import (
    evaluate,
    instance_of,
    problem_of,
    read_instance,
    row_times,
    solve_instance,
    usage_over_time,
)


def document(intervals, costs, usages, edges=(), limit=None) -> dict:
    """A contest document; `edges` as ((u, v), flat costs) pairs."""
    problem = {"nodes": {"intervals": [list(i) for i in intervals], "costs": [list(c) for c in costs],
                         "usages": [list(u) for u in usages]},
               "edges": {"nodes": [list(n) for n, _ in edges], "costs": [list(c) for _, c in edges]}}
    if limit is not None:
        problem["usage_limit"] = limit
    return {"problem": problem}


# t:        0   1   2   3   4
# node 0:  [0,          3)        costs 10, 0   usages 1, 4
# node 1:      [1,          4)    costs 0, 5    usages 4, 1
# node 2:              [3,     5) costs 3, 3, 1 usages 2, 2, 6
# edge 0-1: 0 on the diagonal, 7 off it; edge 1-2: pairs (s1, s2) at s1 * 3 + s2
CHAIN = document(intervals=[(0, 3), (1, 4), (3, 5)], costs=[(10, 0), (0, 5), (3, 3, 1)],
                 usages=[(1, 4), (4, 1), (2, 2, 6)],
                 edges=[((0, 1), (0, 7, 7, 0)), ((1, 2), (0, 1, 2, 4, 0, 0))], limit=6)
CHAIN_OPTIMUM = 8
"""(1, 1, 1): node costs 0 + 5 + 3, edges 0 + 0; usage 4, 5, 5, 3, 2. The only cheaper solution, (1, 1, 2) at 6, uses
1 + 6 = 7 at t = 3. The optimum's 3 at t = 3 holds only because node 0 ends there: were it live at 3, 4 + 3 = 7
would break the limit as well (and the optimum would be (1, 1, 0) at 12)."""


def brute_force(instance) -> tuple[int, tuple[int, ...]] | None:
    """The least cost of a valid solution that pays no forbidden cost, and the solution (the first in index order), by
    trying every one; None when there is none."""
    found = None
    for solution in itertools.product(*(range(n) for n in instance.strategy_counts.tolist())):
        scored = evaluate(instance, solution)
        if scored.valid and not scored.forbidden and (found is None or scored.cost < found[0]):
            found = (scored.cost, solution)
    return found


def per_time_point(instance, chosen) -> np.ndarray:
    """`usage_over_time` (per event) spread over every time point from 0 to the last end (exclusive)."""
    times, usage = usage_over_time(instance, chosen)
    horizon = int(instance.intervals[:, 1].max(initial=0))
    at = np.searchsorted(times, np.arange(horizon), side="right") - 1
    return np.where(at >= 0, usage[np.maximum(at, 0)] if len(usage) else 0, 0)


def test_the_chain_is_scored_by_hand():
    chain = instance_of(CHAIN)
    scored = evaluate(chain, (0, 0, 0))
    assert (scored.cost, scored.valid, scored.peak_time, scored.peak_usage, scored.forbidden) == (13, True, 3, 6, 0)
    scored = evaluate(chain, (1, 1, 2))
    assert (scored.cost, scored.valid, scored.peak_time, scored.peak_usage) == (6, False, 3, 7)
    assert per_time_point(chain, np.array([1, 1, 1])).tolist() == [4, 5, 5, 3, 2]
    assert brute_force(chain) == (CHAIN_OPTIMUM, (1, 1, 1))


def test_a_node_ending_at_t_is_not_live_at_t():
    back_to_back = instance_of(document([(0, 2), (2, 4)], [(0,), (0,)], [(5,), (5,)], limit=5))
    assert per_time_point(back_to_back, np.array([0, 0])).tolist() == [5, 5, 5, 5]
    assert evaluate(back_to_back, [0, 0]).valid
    overlapping = instance_of(document([(0, 3), (2, 4)], [(0,), (0,)], [(5,), (5,)], limit=5))
    assert per_time_point(overlapping, np.array([0, 0])).tolist() == [5, 5, 10, 5]
    assert not evaluate(overlapping, [0, 0]).valid


def test_an_empty_interval_is_never_live():
    empty = instance_of(document([(3, 3), (0, 1)], [(0,), (0,)], [(100,), (1,)], limit=1))
    assert evaluate(empty, [0, 0]).valid
    assert evaluate(empty, [0, 0]).peak_usage == 1


def test_the_pair_index_is_s_u_times_the_strategies_of_v_plus_s_v():
    # u has 2 strategies, v 3: pair (1, 0) is entry 3; read the other way round it would be entry 1
    pairs = instance_of(document([(0, 1), (0, 1)], [(0, 0), (0, 0, 0)], [(0, 0), (0, 0, 0)],
                                 edges=[((0, 1), (0, 10, 20, 30, 40, 50))]))
    assert [evaluate(pairs, (su, sv)).cost for su in range(2) for sv in range(3)] == [0, 10, 20, 30, 40, 50]
    # the edge written v -> u reads the same flat costs with v's strategies as rows
    reversed_pairs = instance_of(document([(0, 1), (0, 1)], [(0, 0), (0, 0, 0)], [(0, 0), (0, 0, 0)],
                                          edges=[((1, 0), (0, 10, 20, 30, 40, 50))]))
    assert evaluate(reversed_pairs, (1, 2)).cost == 50
    assert evaluate(reversed_pairs, (0, 1)).cost == 20


def test_forbidden_costs_are_counted_exactly():
    huge = 10**18 + 7
    forbidding = instance_of(document([(0, 1), (0, 1)], [(huge, 1), (0, 2)], [(0, 0), (0, 0)],
                                      edges=[((0, 1), (huge, 0, 0, 3))]))
    scored = evaluate(forbidding, (0, 0))
    assert (scored.cost, scored.forbidden) == (2 * huge, 2)
    assert evaluate(forbidding, (1, 0)).forbidden == 0
    assert brute_force(forbidding)[0] == 1


def test_no_limit_means_every_solution_is_valid():
    unlimited = instance_of(document([(0, 2)], [(0,)], [(10**12,)]))
    assert unlimited.usage_limit is None
    assert evaluate(unlimited, [0]).valid


@pytest.mark.parametrize("solution, message", [([0, 0], "<solution>: 2 strategies for 3 nodes"),
                                               ([0, 2, 0], r"<solution>: \[1\]: expected a strategy index below 2"),
                                               ([0, -1, 0], r"\[1\]"), ([0, 1.0, 0], r"\[1\]"),
                                               ([0, True, 0], r"\[1\]")])
def test_a_malformed_solution_is_refused(solution, message):
    with pytest.raises(PlanError, match=message):
        evaluate(instance_of(CHAIN), solution)


def test_the_file_is_read_as_given(tmp_path):
    plain, packed = tmp_path / "chain.json", tmp_path / "chain.json.gz"
    plain.write_text(json.dumps(CHAIN))
    packed.write_bytes(gzip.compress(json.dumps(CHAIN).encode()))
    read = [read_instance(path) for path in (plain, packed)]
    for instance in read:
        assert instance.nodes == 3 and instance.edges == 2 and instance.usage_limit == 6
        assert instance.edge_matrix(1).tolist() == [[0, 1, 2], [4, 0, 0]]
        assert not instance.costs.flags.writeable
        assert evaluate(instance, (1, 1, 1)).cost == CHAIN_OPTIMUM


def damaged(path, field: str, value) -> None:
    """CHAIN with one field replaced: `field` is a path of keys and indices."""
    raw = json.loads(json.dumps(CHAIN))
    *parents, last = field.split(".")
    node = raw
    for key in parents:
        node = node[int(key)] if key.isdigit() else node[key]
    if value is KeyError:
        del node[last]
    else:
        node[int(last) if last.isdigit() else last] = value
    path.write_text(json.dumps(raw))


@pytest.mark.parametrize("field, value, location", [
    ("problem.nodes.costs.1", [0, 1.5], "problem.nodes.costs[1][1]"),
    ("problem.nodes.costs.1", [0, True], "problem.nodes.costs[1][1]"),
    ("problem.nodes.costs.2", [], "problem.nodes.costs[2]"),
    ("problem.nodes.usages.0", [1, -4], "problem.nodes.usages[0][1]"),
    ("problem.nodes.usages.2", [1, 2], "problem.nodes.usages[2]"),
    ("problem.nodes.intervals.1", [4, 1], "problem.nodes.intervals[1]"),
    ("problem.nodes.intervals.1", [1], "problem.nodes.intervals[1]"),
    ("problem.nodes.intervals", KeyError, "problem.nodes"),
    ("problem.edges.nodes.0", [0, 3], "problem.edges.nodes[0]"),
    ("problem.edges.costs.1", [0, 1, 2], "problem.edges.costs[1]"),
    ("problem.edges", [], "problem.edges"),
    ("problem.usage_limit", "6", "problem.usage_limit"),
    ("problem.usage_limit", 2**63, "problem.usage_limit"),
])
def test_a_malformed_field_is_one_line_naming_the_file_and_the_field(tmp_path, field, value, location):
    path = tmp_path / "bad.json"
    damaged(path, field, value)
    with pytest.raises(PlanError) as error:
        read_instance(path)
    assert str(error.value).startswith(f"{path}: {location}: ")
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("content, message", [
    (b'{"problem": {"nodes": ', "invalid JSON"),
    (gzip.compress(b'{"problem": 1}')[:-6], "damaged gzip"),
    (b"\xff\xfe", "not UTF-8"),
    (b"[]", "expected a JSON object"),
])
def test_an_unreadable_file_is_one_line_naming_it(tmp_path, content, message):
    path = tmp_path / "bad.json.gz"
    path.write_bytes(content)
    with pytest.raises(PlanError, match=message) as error:
        read_instance(path)
    assert str(error.value).startswith(f"{path}: ") and "\n" not in str(error.value)


def test_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(PlanError, match="cannot read"):
        read_instance(tmp_path / "absent.json.gz")


def random_instance(seed: int, nodes: int = 5):
    """A small instance: random intervals over 6 time points, 1-3 strategies, a few edges, a limit that binds."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 4, nodes)
    starts = rng.integers(0, 5, nodes)
    intervals = [(int(s), int(s + rng.integers(0, 4))) for s in starts]
    costs = [rng.integers(0, 20, n).tolist() for n in counts]
    usages = [rng.integers(0, 10, n).tolist() for n in counts]
    pairs = [(int(u), int(v)) for u, v in itertools.combinations(range(nodes), 2) if rng.random() < 0.4]
    edges = [((u, v), [FORBIDDEN * 1000 if rng.random() < 0.15 else int(x)
                       for x in rng.integers(0, 15, counts[u] * counts[v])])
             for u, v in pairs]
    least = instance_of(document(intervals, costs, usages, edges))
    floor = usage_over_time(least, np.array([int(np.argmin(u)) for u in usages]))[1].max(initial=0)
    ceiling = usage_over_time(least, np.array([int(np.argmax(u)) for u in usages]))[1].max(initial=0)
    return instance_of(document(intervals, costs, usages, edges, limit=int((floor + ceiling) // 2)))


@pytest.mark.parametrize("seed", range(40))
def test_the_rows_hold_every_time_point_that_can_break_the_limit(seed):
    instance = random_instance(seed)
    problem = problem_of(instance)
    times = row_times(instance)
    assert [row.step for row in problem.rows] == times.tolist()
    for solution in itertools.islice(itertools.product(*(range(n) for n in instance.strategy_counts.tolist())), 50):
        over_time = per_time_point(instance, np.array(solution))
        rows = problem.usage(solution).standard
        assert rows.tolist() == over_time[times].tolist()
        assert (rows.max(initial=0) > instance.usage_limit) == (not evaluate(instance, solution).valid)


def test_the_problem_carries_the_costs_capped_at_forbidden():
    forbidding = instance_of(document([(0, 1), (0, 1)], [(10**18, 1), (0, 2)], [(0, 0), (0, 0)],
                                      edges=[((0, 1), (10**18, 0, 0, 3))]))
    problem = problem_of(forbidding)
    assert problem.exchange == ((FORBIDDEN, 1), (0, 2))
    assert problem.edges[0].costs.tolist() == [[FORBIDDEN, 0], [0, 3]]
    assert (problem.limits, tuple(problem.rows), problem.input_choice) == ((), (), (0, 0))


def solved(instance):
    settings = SolverSettings(time_limit=5, workers=1, deterministic=True, objective=Objective.FIT)
    return solve(problem_of(instance), settings)


def test_the_core_finds_the_chain_optimum():
    chain = instance_of(CHAIN)
    result = solved(chain)
    assert result.status == SolveStatus.OPTIMAL
    assert evaluate(chain, result.choice).cost == CHAIN_OPTIMUM == result.exchange_bytes


@pytest.mark.parametrize("seed", range(12))
def test_the_core_finds_the_brute_force_optimum(seed):
    instance = random_instance(seed, nodes=6)
    best = brute_force(instance)
    result = solved(instance)
    if best is None:
        assert result.status == SolveStatus.INFEASIBLE
        return
    assert result.status == SolveStatus.OPTIMAL
    scored = evaluate(instance, result.choice)
    assert (scored.cost, scored.valid, scored.forbidden) == (best[0], True, 0)


def test_time_is_counted_in_events_so_an_interval_end_of_1e12_costs_nothing():
    """Issue 36: an end of 1e8 took 821 MB and 1e12 a MemoryError, one entry per time point."""
    import tracemalloc

    tracemalloc.start()
    try:
        instance = instance_of(document([[0, 10**12], [5, 10**12]], [[1, 2], [3]], [[4, 6], [5]], [], limit=10))
        scored = [evaluate(instance, solution) for solution in ([0, 0], [1, 0])]
        rows = problem_of(instance).rows
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [(s.valid, s.peak_time, s.peak_usage) for s in scored] == [(True, 5, 9), (False, 5, 11)]
    assert [row.step for row in rows] == [5] and peak < 20_000_000


def test_usages_whose_sum_could_wrap_int64_are_refused_in_one_line():
    """Two usages of 2**62 live at once summed to -2**63 in int64, and the limit looked met ("optimal")."""
    with pytest.raises(PlanError, match=r"problem.nodes.usages: .*2\*\*63"):
        instance_of(document([[0, 5], [0, 5]], [[1], [1]], [[2**62], [2**62]], [], limit=10))


def test_the_run_keeps_to_its_deadline_reading_included():
    started = time.perf_counter()
    run = solve_instance(instance_of(CHAIN), 5.0, started=started - 2.0)  # 2 s already spent reading
    assert run.solved and run.evaluation.cost == CHAIN_OPTIMUM and run.seconds < 3.5


def test_each_better_solution_is_told_once_it_takes_half_a_percent_off(monkeypatch):
    from ipuplan.workbench import iopddl

    def solving(problem, settings, progress):
        for name, cost in (("start", 1000), ("start", 998), ("start", 990), ("neighbourhoods", 989),
                           ("neighbourhoods", 900)):
            progress(name, cost, 0, 0.0)
        return solve(problem, settings)

    monkeypatch.setattr(iopddl, "solve", solving)
    heard = []
    solve_instance(instance_of(CHAIN), 2.0, on_phase=lambda name, detail: heard.append(detail))
    told = [detail for detail in heard if "solution (" in detail]
    assert told == ["first solution (start), cost 1,000: improving", "better solution (start), cost 990",
                    "better solution (neighbourhoods), cost 900"]

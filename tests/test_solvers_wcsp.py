"""The penalised start (`solvers.wcsp`): its weights' brackets, its prices, and its place in the core's start."""

from __future__ import annotations

import itertools
import os
import time

import numpy as np
import pytest
from test_iopddl import brute_force, document, random_instance

from ipuplan.solvers import cpsat, wcsp
from ipuplan.solvers.lagrange import choice_key
from ipuplan.solvers.wcsp import UP, Weights, _timed, broken_groups, penalised, spreads
from ipuplan.workbench.iopddl import evaluate, instance_of, problem_of, solve_instance


def stepped(weights: Weights, broken: np.ndarray) -> None:
    """One round at the weights now: what it broke learnt, the weights moved."""
    weights.learn(broken, weights.now)
    weights.move()


def test_a_weight_rises_until_broken_falls_until_whole_and_then_halves_its_bracket():
    weights = Weights(np.array([1.0, 1.0, 0.0]))
    stepped(weights, np.array([True, False, False]))
    assert weights.now.tolist() == [UP, 0.8, 0.0]  # open above: up; open below: down; no spread: never priced
    stepped(weights, np.array([False, True, False]))
    assert weights.now[0] == pytest.approx(np.sqrt(1.0 * UP))  # broken at 1, whole at UP: the geometric middle
    assert weights.now[1] == pytest.approx(np.sqrt(0.8 * 1.0))
    middle = weights.now[0]
    stepped(weights, np.array([True, False, False]))
    assert weights.broken_at[0] == middle and weights.whole_at[0] == UP
    assert middle < weights.now[0] < UP


def test_a_bracket_the_other_groups_made_wrong_opens_on_its_wrong_side():
    weights = Weights(np.array([1.0]))
    stepped(weights, np.array([False]))  # whole at 1
    weights.now = np.array([1.0])
    stepped(weights, np.array([True]))  # broken at 1 after all: whole only above
    assert weights.whole_at[0] == UP and weights.broken_at[0] == 1.0


LIMITED = document([(0, 2), (1, 3), (3, 4)], [(0, 5, 1), (0, 0), (0,)], [(5, 2, 9), (4, 1), (3,)], limit=7)


def test_the_spread_is_each_candidate_s_bytes_above_the_group_s_least():
    problem = problem_of(instance_of(LIMITED))
    assert [s.tolist() for s in spreads(problem)] == [[3, 0, 7], [3, 0], [0]]


def test_the_broken_groups_are_those_live_at_a_row_over_the_limit():
    instance = instance_of(LIMITED)
    problem = problem_of(instance)
    assert broken_groups(problem, (0, 0, 0)).tolist() == [True, True, False]  # 5 + 4 at time 1
    assert broken_groups(problem, (1, 0, 0)).tolist() == [False, False, False]
    assert evaluate(instance, (1, 0, 0)).valid and not evaluate(instance, (0, 0, 0)).valid


@pytest.mark.parametrize("seed, processes", [(seed, 1) for seed in range(20)] + [(seed, 2) for seed in range(4)])
def test_the_penalised_rounds_are_valid_where_a_solution_is(monkeypatch, seed, processes):
    monkeypatch.setattr(wcsp, "shed_least_bytes", lambda *a: None)  # the rounds alone: valid here on every seed
    instance = random_instance(seed, nodes=6)
    problem = problem_of(instance)
    best = brute_force(instance)
    found = penalised(problem, deadline=float("inf"), rounds=4, processes=processes)
    if best is None:  # none is valid: at most a choice over the limit or with a forbidden pick
        assert found is None or not problem.valid(found)
        return
    assert found is not None and choice_key(problem, found)[:2] == (0, 0) and evaluate(instance, found).valid
    assert evaluate(instance, found).cost >= best[0]


@pytest.mark.parametrize("seed", range(2))
def test_where_the_whole_model_does_not_fit_the_run_starts_from_the_penalised_network(monkeypatch, seed):
    instance = next(random_instance(s, nodes=6) for s in range(seed, 100) if brute_force(random_instance(s, nodes=6)))
    calls = []
    monkeypatch.setattr(cpsat, "whole_model_fits", lambda problem: False)
    monkeypatch.setattr(wcsp, "penalised", lambda *a, **k: calls.append(1) or penalised(*a, **k, rounds=3))
    run = solve_instance(instance, 3.0, workers=1)
    assert calls and run.solved and run.evaluation.cost == brute_force(instance)[0]


def test_without_toulbar2_the_lagrangian_start_serves_alone(monkeypatch):
    instance = next(random_instance(s, nodes=6) for s in range(100) if brute_force(random_instance(s, nodes=6)))
    monkeypatch.setattr(cpsat, "whole_model_fits", lambda problem: False)
    monkeypatch.setattr(wcsp, "available", lambda: False)
    monkeypatch.setattr(wcsp, "penalised", lambda *a, **k: pytest.fail("toulbar2 called where it is not installed"))
    run = solve_instance(instance, 3.0, workers=1)
    assert run.solved and run.evaluation.cost == brute_force(instance)[0]


def test_a_large_run_without_toulbar2_says_so_once(monkeypatch):
    from ipuplan.workbench import iopddl

    instance = next(random_instance(s, nodes=6) for s in range(100) if brute_force(random_instance(s, nodes=6)))
    monkeypatch.setattr(iopddl, "whole_model_fits", lambda problem: False)
    monkeypatch.setattr(wcsp, "available", lambda: False)
    heard = []
    solve_instance(instance, 2.0, workers=1, on_phase=lambda name, detail: heard.append((name, detail)))
    notes = [detail for name, detail in heard if name == "note"]
    assert len(notes) == 1 and "ipuplan[toulbar2]" in notes[0]


def test_a_weight_broken_at_every_try_stops_at_its_most():
    weights = Weights(np.array([1.0]))
    for _ in range(40):
        stepped(weights, np.array([True]))
    assert weights.now[0] == wcsp.MOST



@pytest.mark.parametrize(("processes", "fork"), [(1, True), (2, True), (1, False), (2, False)])
def test_every_round_s_choices_are_repaired_the_last_round_s_after_the_rounds(monkeypatch, processes, fork):
    # with two processes a round's choices are repaired while the next round's solves run: none may be left unrepaired
    monkeypatch.setattr(wcsp, "shed_least_bytes", lambda *a: None)
    monkeypatch.setattr(wcsp, "_can_fork", lambda: fork)
    problem = problem_of(random_instance(3, nodes=6))
    repaired, found = [], []
    solve = wcsp.Network.solved
    monkeypatch.setattr(wcsp.Network, "solved", lambda *a: found.append(1) or solve(*a))
    monkeypatch.setattr(wcsp, "repaired", lambda problem, choice, *a, **k: repaired.append(choice) or tuple(choice))
    penalised(problem, deadline=float("inf"), rounds=3, processes=processes)
    # one solve in the first round, then one per level (one level where the solves cannot run beside this process);
    # a forked child's solves are its own
    assert len(repaired) == (1 + 2 * 2 if processes == 2 and fork else 3)
    assert fork or len(found) == 3


def _dying_at_odd_rounds(network, penalty, seconds, seed, start, unpriced=None):
    if seed // 10 % 2:  # a round's seeds are the run's plus 10 times its number
        os._exit(1)  # as toulbar2 does on some errors
    return _timed(network, penalty, seconds, seed, start, unpriced)


@pytest.mark.parametrize("processes", [1, 2])
def test_a_solve_whose_process_exits_gives_no_choice_and_the_rounds_go_on(monkeypatch, processes):
    monkeypatch.setattr(wcsp, "shed_least_bytes", lambda *a: None)
    monkeypatch.setattr(wcsp, "_timed", _dying_at_odd_rounds)
    instance = next(random_instance(s, nodes=6) for s in range(100) if brute_force(random_instance(s, nodes=6)))
    problem = problem_of(instance)
    found = penalised(problem, deadline=float("inf"), rounds=3, processes=processes, seed=0)
    assert found is not None and evaluate(instance, found).valid


def test_a_solve_that_hangs_is_killed_past_the_deadline(monkeypatch):
    monkeypatch.setattr(wcsp, "GRACE", 0.2)
    monkeypatch.setattr(wcsp, "_timed", lambda *a: time.sleep(60))
    problem = problem_of(instance_of(LIMITED))
    solvers = wcsp.Solvers(wcsp.Network(problem), 2, deadline=time.perf_counter())
    began = time.perf_counter()
    try:
        found = solvers.submitted([[np.zeros(k) for k in problem.candidate_counts]] * 2, 1, 0, [None, None])()
    finally:
        solvers.close()
    assert [choice for choice, _ in found] == [None, None] and time.perf_counter() - began < 30
    assert not solvers.running


@pytest.mark.parametrize("seed", range(6))
def test_each_better_valid_choice_is_told_and_the_last_told_is_the_answer(seed):
    instance = next(random_instance(s, nodes=6) for s in range(seed, 100) if brute_force(random_instance(s, nodes=6)))
    problem = problem_of(instance)
    told = []
    found = penalised(problem, deadline=float("inf"), rounds=4, on_valid=told.append)
    costs = [choice_key(problem, choice) for choice in told]
    assert told and all(key[:2] == (0, 0) for key in costs) and costs == sorted(set(costs), reverse=True)
    assert told[-1] == found


@pytest.mark.parametrize("far", [0.02, 0.5])
def test_a_choice_far_over_the_limit_is_repaired_only_while_no_valid_choice_is_known(monkeypatch, far):
    monkeypatch.setattr(wcsp, "shed_least_bytes", lambda *a: None)
    monkeypatch.setattr(wcsp, "FAR_OVER", far)
    monkeypatch.setattr(wcsp, "_can_fork", lambda: False)  # the answers scripted in this process
    problem = problem_of(instance_of(LIMITED))
    over, valid = (0, 0, 0), (1, 0, 0)  # over: 9 bytes at time 1, 2 over the limit of 7
    assert wcsp.far_over(problem, over) == (far < 2 / 7) and not wcsp.far_over(problem, valid)
    answers = iter([over, valid, over])
    monkeypatch.setattr(wcsp.Network, "solved", lambda *a: next(answers))
    repaired = []
    monkeypatch.setattr(wcsp, "repaired", lambda problem, choice, *a, **k: repaired.append(choice) or tuple(choice))
    assert penalised(problem, deadline=float("inf"), rounds=3, processes=1) == valid
    # the first over choice is repaired (nothing valid is known yet); the last only when it is not far over
    assert repaired == ([over, valid] if far < 2 / 7 else [over, valid, over])


def test_a_solve_from_a_start_finds_a_choice_no_dearer():
    problem = problem_of(instance_of(LIMITED))
    network, flat = wcsp.Network(problem), [np.zeros(k) for k in problem.candidate_counts]
    every = list(itertools.product(*(range(k) for k in problem.candidate_counts)))
    cheapest = network.solved(flat, 1, 0)
    assert problem.exchange_of(cheapest) == min(map(problem.exchange_of, every))
    for start in every:
        found = network.solved(flat, 1, 0, start=start)
        assert found is not None and problem.exchange_of(found) == problem.exchange_of(cheapest)


def test_once_a_choice_is_valid_every_other_round_starts_from_the_best_so_far(monkeypatch):
    monkeypatch.setattr(wcsp, "shed_least_bytes", lambda *a: None)
    monkeypatch.setattr(wcsp, "_can_fork", lambda: False)  # the answers scripted in this process
    monkeypatch.setattr(wcsp, "repaired", lambda problem, choice, *a, **k: tuple(choice))
    problem = problem_of(instance_of(LIMITED))
    over, valid, better = (0, 0, 0), (1, 0, 0), (0, 1, 0)
    assert problem.valid(better) and problem.exchange_of(better) < problem.exchange_of(valid)
    answers, starts = iter([over, valid, better, over, over]), []
    monkeypatch.setattr(wcsp, "_timed", lambda network, penalty, seconds, seed, start, unpriced=None: (
        starts.append(start), (next(answers), 0.0))[1])
    assert penalised(problem, deadline=float("inf"), rounds=5, processes=1) == better
    # one process solves a round when it waits for it, after the round before's choices are offered: the start of
    # the fourth (an odd one) is the best of the second; the fifth starts cold
    assert starts == [None, None, None, valid, None]


def test_a_round_starts_its_lower_level_only():
    problem = problem_of(instance_of(LIMITED))

    class Recorded:
        def submitted(self, penalties, seconds, seed, starts):
            self.starts = starts
            return lambda: [((1, 0, 0), 0.0)] * len(penalties)

    solvers, start = Recorded(), (1, 1, 0)
    spread = spreads(problem)
    wcsp._round(problem, solvers, Weights(np.ones(problem.groups)), spread, wcsp.LEVELS, 1, 0, start)()
    assert solvers.starts == [start, None]


@pytest.mark.parametrize(("processes", "fork"), [(1, True), (2, True), (1, False)])
def test_a_solve_that_raises_gives_no_choice_and_the_rounds_go_on(monkeypatch, processes, fork):
    monkeypatch.setattr(wcsp, "shed_least_bytes", lambda *a: None)
    monkeypatch.setattr(wcsp, "_can_fork", lambda: fork)
    instance = next(random_instance(s, nodes=6) for s in range(100) if brute_force(random_instance(s, nodes=6)))
    problem = problem_of(instance)
    solve = wcsp.Network.solved

    def raises_at_odd_rounds(self, penalty, seconds, seed, *args):
        if seed // 10 % 2:
            raise RuntimeError("toulbar2 failed")
        return solve(self, penalty, seconds, seed, *args)

    monkeypatch.setattr(wcsp.Network, "solved", raises_at_odd_rounds)
    found = penalised(problem, deadline=float("inf"), rounds=4, processes=processes, seed=0)
    assert found is not None and evaluate(instance, found).valid


@pytest.mark.parametrize("beside_valid", [False, True])
def test_beside_a_valid_choice_one_over_gets_the_neighbourhoods_alone(monkeypatch, beside_valid):
    problem = problem_of(instance_of(LIMITED))
    over = (0, 0, 0)
    assert wcsp.far_over(problem, over)  # 2 over a limit of 7: the moves come first where nothing valid is known
    moved, asked = [], []
    relieve = wcsp.relieve
    monkeypatch.setattr(wcsp, "relieve", lambda *a, **k: moved.append(1) or relieve(*a, **k))
    found = wcsp.repaired(problem, over, wcsp.group_rows(problem), float("inf"),
                          repair=lambda choice, deadline: asked.append(1) or choice, beside_valid=beside_valid)
    if beside_valid:  # the neighbourhoods left it over: given back as it is, no moves, no descent
        assert (moved, asked, found) == ([], [1], over)
    else:
        assert moved and problem.valid(found)


def test_the_rounds_are_short_and_longer_each_time_a_solve_from_no_start_finds_nothing(monkeypatch):
    monkeypatch.setattr(wcsp, "shed_least_bytes", lambda *a: None)
    monkeypatch.setattr(wcsp, "repaired", lambda problem, choice, *a, **k: tuple(choice))
    monkeypatch.setattr(wcsp, "_can_fork", lambda: False)  # the answers scripted in this process
    problem = problem_of(instance_of(LIMITED))
    valid = (1, 0, 0)
    # one process offers a round's choices after the next round's solve: round 3 starts from round 1's valid choice
    # and finds none cheaper (still short); round 4, from no start, finds none: twice as long from then on; round 6
    # finds none again: twice again, and no longer after round 8's miss
    answers, asked = iter([valid, valid, valid, None, None, valid, None, valid, None, valid]), []
    monkeypatch.setattr(wcsp, "_timed", lambda network, penalty, seconds, seed, start, unpriced=None: (
        asked.append((seconds, start)), (next(answers), 0.0))[1])
    penalised(problem, deadline=float("inf"), rounds=10, processes=1)
    short, longest = wcsp.SHORT_SECONDS, wcsp.LONGEST_SECONDS
    assert longest == 4 * short
    assert [seconds for seconds, _ in asked] == [wcsp.FIRST_SECONDS] + [short] * 4 + [2 * short] * 2 + [longest] * 3
    assert [start for _, start in asked[3:5]] == [valid, None]

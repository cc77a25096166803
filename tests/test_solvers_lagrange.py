"""The start of a `fit` with edges (`solvers.lagrange`), on small hand-made and random problems against brute-force
enumeration: the forest DP is exact on a forest, the moves never make a valid choice invalid nor dearer, and the
Lagrangian start is valid when its start is and no dearer."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from problems import b, best_by_brute_force, problem, valid_choices
from test_pairwise import PROBLEMS

from ipuplan.model.objective import Objective
from ipuplan.model.problem import FORBIDDEN, Edge, StepRow
from ipuplan.plan.budgets import Budgets
from ipuplan.solvers import lagrange
from ipuplan.solvers.construct import GroupRows
from ipuplan.solvers.lagrange import (
    ROUND_GAIN,
    Slack,
    _gained,
    _induced_forest,
    _tree_choice,
    descend,
    lagrangian,
    least_bytes,
    relieve,
    unforbid,
)

F = FORBIDDEN


def chain(costs_per_edge, counts, rows=(), limits=()):
    edges = [Edge(k, k + 1, np.array(costs, dtype=np.int64)) for k, costs in enumerate(costs_per_edge)]
    return problem(list(rows) or [StepRow(0, 0, 0, ())], counts, sizes=(0,) * len(counts), edges=edges,
                   limits=limits)


def valid(p, choice) -> bool:
    return not p.forbidden_in(choice) and not p.usage(choice).violation(p.limits)


def test_the_forest_dp_is_exact_on_a_chain():
    # Three groups in a chain; the cheap pairs want 0-1-0 but the first edge forbids (0, 1): the optimum is 1-1-0.
    p = chain([[[F, 5], [3, 0]], [[9, 0], [0, 9]]], (2, 2, 2))
    index = GroupRows(p)
    taken, forest = _induced_forest(p, index.pairing.incident, np.arange(3))
    assert taken.all() and len(forest) == 2
    belief = [np.asarray(costs, dtype=np.float64) for costs in p.exchange]
    choice = tuple(_tree_choice(belief, forest))
    assert p.exchange_of(choice) == best_by_brute_force(p, Objective.FIT)[0] == 0
    assert choice == (1, 1, 0)


def test_an_induced_forest_leaves_a_cycle_open():
    p = problem([StepRow(0, 0, 0, ())], (2, 2, 2), edges=[Edge(0, 1, np.zeros((2, 2))), Edge(1, 2, np.zeros((2, 2))),
                                                          Edge(0, 2, np.zeros((2, 2)))])
    taken, forest = _induced_forest(p, GroupRows(p).pairing.incident, np.arange(3))
    assert taken.tolist() == [True, True, False] and len(forest) == 1


def test_relieve_meets_the_limit_at_the_least_exchange_per_byte():
    # One row, limit 100: both groups at 60 bytes are over. Group 0 can drop to 10 bytes for 50 exchange, group 1 to
    # 20 bytes for 5: relieve takes the cheaper byte (group 1).
    row = StepRow(0, 0, 0, ((0, b(60, 10), b(0, 0)), (1, b(60, 20), b(0, 0))))
    p = problem([row], (2, 2), exchange=((0, 50), (0, 5)), sizes=(0, 0), limits=Budgets(100, 0, 0).limits[:1])
    assert p.usage((0, 0)).violation(p.limits)
    fixed = tuple(relieve(p, (0, 0), GroupRows(p)))
    assert fixed == (0, 1) and valid(p, fixed)


@pytest.mark.parametrize("p", PROBLEMS)
def test_descend_never_makes_a_choice_invalid_nor_dearer(p):
    index = GroupRows(p)
    for choice in itertools.islice(valid_choices(p), 20):
        moved = tuple(descend(p, choice, index))
        assert valid(p, moved) and p.exchange_of(moved) <= p.exchange_of(choice)


FITTING = [p for p in PROBLEMS if next(valid_choices(p), None) is not None]
"""The random problems some choice of which is valid: the ones a start, a neighbourhood and a search begin from."""


def test_enough_random_problems_have_a_valid_choice():
    assert len(FITTING) >= 8  # 10 of the 24: enough for each test that starts from one (here, test_solvers_lns.py)


@pytest.mark.parametrize("p", FITTING)
def test_lagrangian_is_valid_when_its_start_is_and_no_dearer(p):
    start = next(valid_choices(p))
    found = lagrangian(p, start, rounds=5)
    assert valid(p, found) and p.exchange_of(found) <= p.exchange_of(start)
    assert p.exchange_of(found) >= best_by_brute_force(p, Objective.FIT)[0]


@pytest.mark.parametrize("p", FITTING[:6])
def test_rounds_from_a_valid_optimum_end_after_stale_rounds_only_when_asked(p, monkeypatch):
    """From the brute-force optimum no round gains: with `stale_rounds` the rounds end after that many, without it
    they run to `rounds` (the plans' whole-model path keeps every round)."""
    optimum = min(valid_choices(p), key=p.exchange_of)
    tried = []
    original = lagrange.relieve

    def counted(*args, **kwargs):
        tried.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(lagrange, "relieve", counted)
    for stale_rounds, expected in ((2, 2), (None, 6)):
        tried.clear()
        found = lagrangian(p, optimum, rounds=6, stale_rounds=stale_rounds)
        assert len(tried) == expected and p.exchange_of(found) == p.exchange_of(optimum)


@pytest.mark.parametrize("p", FITTING)
def test_the_step_shrinks_only_after_a_round_that_leaves_a_valid_best_no_better(p, monkeypatch):
    """The subgradient's step is `scale` x the gap (the best's exchange less the round's tree's, at least 1% of the
    best); `scale` is divided by 1.5 after a round whose choice is no better than a valid best, and kept after one
    that improves it (the rule a misplaced `break` once broke). From the optimum and from the dearest valid choice."""
    steps, descents = [], []
    step, descend = lagrange.RowPrices.step, lagrange.descend

    def recorded_step(self, problem, choice, gap):
        steps.append((problem.exchange_of(choice), gap))
        return step(self, problem, choice, gap)

    def recorded_descent(problem, choice, *args, **kwargs):
        descents.append(lagrange.choice_key(problem, found := descend(problem, choice, *args, **kwargs)))
        return found

    monkeypatch.setattr(lagrange.RowPrices, "step", recorded_step)
    monkeypatch.setattr(lagrange, "descend", recorded_descent)
    shrank = 0
    for start in (min(valid_choices(p), key=p.exchange_of), max(valid_choices(p), key=p.exchange_of)):
        steps.clear(), descents.clear()
        lagrangian(p, start, rounds=5)
        best, scale, expected = descents[0], 1.0, []
        for (tree, _), key in zip(steps, descents[1:]):  # the first descent is the start's, then one a round
            if key < best:
                best = key
            else:
                scale, shrank = scale / 1.5, shrank + 1
            expected.append(scale * max(best[2] - tree, best[2] * 0.01, 1))
        assert len(steps) == 5 and [gap for _, gap in steps] == pytest.approx(expected)
    assert shrank


def test_the_least_bytes_start_within_the_limit_is_moved_off_its_forbidden_pair_to_the_optimum():
    # Least bytes is (1, 1): 30 of 100, but the pair is forbidden; (0, 1) fits (80) and is the cheapest valid choice.
    row = StepRow(0, 0, 0, ((0, b(60, 10), b(0, 0)), (1, b(60, 20), b(0, 0))))
    p = problem([row], (2, 2), exchange=((0, 50), (0, 5)), sizes=(0, 0), limits=Budgets(100, 0, 0).limits[:1],
                edges=[Edge(0, 1, np.array([[0, 0], [0, F]]))])
    assert least_bytes(p) == [1, 1]
    found = lagrangian(p, tuple(least_bytes(p)), rounds=0)
    assert valid(p, found) and (p.exchange_of(found), p.changed_of(found)) == best_by_brute_force(p, Objective.FIT)


def test_the_least_bytes_start_never_picks_a_candidate_forbidden_alone():
    row = StepRow(0, 0, 0, ((0, b(60, 10), b(0, 0)),))
    p = problem([row], (2,), exchange=((0, F),), sizes=(0,))
    assert least_bytes(p) == [0]


def test_unforbid_sheds_forbidden_picks_without_breaking_a_limit():
    # Limit 100 at one row; (1, 1) is 30 bytes but its pair is forbidden. Shedding it: group 0 to 60 bytes (80 in all,
    # exchange 0) or group 1 to 85 (95, exchange 7) fit; group 1 to 95 (105) does not.
    row = StepRow(0, 0, 0, ((0, b(60, 10), b(0, 0)), (1, b(85, 20, 95), b(0, 0, 0))))
    p = problem([row], (2, 3), exchange=((0, 0), (7, 0, 3)), sizes=(0, 0), limits=Budgets(100, 0, 0).limits[:1],
                edges=[Edge(0, 1, np.array([[0, 0, 0], [0, F, 0]]))])
    start = (1, 1)
    assert p.forbidden_in(start) == 1 and not p.usage(start).violation(p.limits)
    shed = tuple(unforbid(p, start, GroupRows(p)))
    assert valid(p, shed) and shed != start
    assert shed in {(0, 1), (1, 0)} and p.exchange_of(shed) == min(p.exchange_of(c) for c in ((0, 1), (1, 0)))


def test_unforbid_leaves_a_pick_no_fitting_move_sheds():
    row = StepRow(0, 0, 0, ((0, b(60, 10), b(0, 0)), (1, b(95, 20), b(0, 0))))
    p = problem([row], (2, 2), exchange=((0, 0), (0, 0)), sizes=(0, 0), limits=Budgets(100, 0, 0).limits[:1],
                edges=[Edge(0, 1, np.array([[F, F], [F, F]]))])
    assert tuple(unforbid(p, (1, 1), GroupRows(p))) == (1, 1)


def test_unforbid_ends_after_chain_misses_groups_in_a_row_no_chain_sheds(monkeypatch):
    """Twenty pairs of groups whose every pair is forbidden (`test_unforbid_leaves_a_pick_no_fitting_move_sheds`
    twenty times): each of their 40 groups tried alone, then by a chain, until CHAIN_MISSES in a row found none."""
    edges = [Edge(2 * k, 2 * k + 1, np.array([[F, F], [F, F]])) for k in range(20)]
    row = StepRow(0, 0, 0, tuple((g, b(1, 2), b(0, 0)) for g in range(40)))
    p = problem([row], (2,) * 40, exchange=((0, 0),) * 40, sizes=(0,) * 40, limits=Budgets(100, 0, 0).limits[:1],
                edges=edges)
    tried = []

    def chain(g, *rest):
        tried.append(g)
        return []

    monkeypatch.setattr(lagrange, "_shed_chain", chain)
    for misses, expected in ((5, 5), (64, 40)):
        monkeypatch.setattr(lagrange, "CHAIN_MISSES", misses)
        tried.clear()
        assert tuple(unforbid(p, (1,) * 40, GroupRows(p))) == (1,) * 40
        assert len(tried) == expected


def test_unforbid_moves_a_chain_of_groups_that_must_agree():
    # Three groups whose edges allow only equal picks (IOPDDL's edges between nodes of one sharding), group 0's
    # candidate 0 forbidden alone. At (1, 0, 0) the pair (0, 1) is forbidden; no single move sheds it (group 1 to 1
    # breaks the pair (1, 2)), the chain group 1 then group 2 does.
    equal = np.array([[0, F], [F, 0]])
    row = StepRow(0, 0, 0, ((0, b(1, 1), b(0, 0)), (1, b(1, 1), b(0, 0)), (2, b(1, 1), b(0, 0))))
    p = problem([row], (2, 2, 2), exchange=((F, 0), (0, 0), (0, 0)), sizes=(0, 0, 0),
                limits=Budgets(100, 0, 0).limits[:1], edges=[Edge(0, 1, equal), Edge(1, 2, equal)])
    assert p.forbidden_in((1, 0, 0)) == 1
    assert tuple(unforbid(p, (1, 0, 0), GroupRows(p))) == (1, 1, 1)


@pytest.mark.parametrize("seed", range(8))
def test_slack_relief_and_fits_equal_a_row_by_row_count(seed):
    """Per term, not per (row, candidate): relief read off the rooms sorted and fits off their least equal what each
    row, counted one by one, says; so does a move's update of the rooms."""
    from test_solvers_lns import spanned

    p = spanned(seed)
    index = GroupRows(p)
    rng = np.random.default_rng(seed)
    choice = [int(rng.integers(n)) for n in p.candidate_counts]
    slack = Slack(p, choice, index)
    for g in range(p.groups):
        current = choice[g]
        after = [p.usage(tuple(c if k == g else x for k, x in enumerate(choice))) for c in range(p.candidate_counts[g])]
        now = p.usage(tuple(choice))
        over = [sum(int(np.maximum(usage.excess((limit,)), 0).sum()) for limit in p.limits) for usage in after]
        relief = sum(int(now.excess((limit,)).sum()) for limit in p.limits) - np.array(over)
        assert slack.relief(g, current).tolist() == relief.tolist()
        fits = [all((limit.usage(u.standard, u.interleaved) - limit.usage(now.standard, now.interleaved)
                     <= np.maximum(limit.bytes - limit.usage(now.standard, now.interleaved), 0)).all()
                    for limit in p.limits) for u in after]
        assert slack.fits(g, current).tolist() == fits
    moved = (current + 1) % p.candidate_counts[g]
    slack.move(g, current, moved)
    choice[g] = moved
    usage = p.usage(tuple(choice))
    assert [room.tolist() for room in slack.room] == [
        (limit.bytes - limit.usage(usage.standard, usage.interleaved)).tolist() for limit in p.limits]


def test_a_round_is_progress_when_valid_and_a_gain_share_cheaper_than_a_valid_best():
    """The rounds end after STALE_ROUNDS valid ones in a row without progress (`_gained`): a valid best (forbidden
    picks, excess, exchange) = (0, 0, 1000) is progressed by a valid round at 1000 x (1 - ROUND_GAIN) or less only;
    an invalid best by any better round."""
    best, cut = (0, 0, 1000), int(1000 * (1 - ROUND_GAIN))
    assert _gained((0, 0, cut), best) and _gained((0, 0, 10), best)
    assert not _gained((0, 0, cut + 1), best) and not _gained((0, 0, 1000), best)
    assert not _gained((1, 0, 10), best) and not _gained((0, 5, 10), best)
    assert _gained((0, 0, 999), (0, 7, 2000)) and _gained((1, 0, 5000), (2, 0, 10))
    assert not _gained((0, 7, 2000), (0, 7, 2000)) and not _gained((2, 0, 10), (1, 0, 5000))

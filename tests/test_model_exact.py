"""The exact exchange as a problem's costs (`model.exact`) and the candidates that can meet a peak (`alive_within`):
the model's figure of a choice is the written plan's `plan_exchange`, and pruning never drops a candidate of a
choice that meets the budgets and the peak."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from problems import TWO_STEPS, problem

from ipuplan.facts.plan_exchange import plan_exchange
from ipuplan.model.exact import exact_problem
from ipuplan.model.problem import FORBIDDEN, StepRow, alive_within
from ipuplan.plan.budgets import Budgets
from ipuplan.replan.rewrite import rewrite


def _random_choices(counts: tuple[int, ...], count: int, seed: int) -> list[tuple[int, ...]]:
    rng = random.Random(seed)
    return [tuple(rng.randrange(n) for n in counts) for _ in range(count)]


def test_the_models_exchange_of_a_choice_is_the_written_plans(prepared, priced):
    """Whatever the choice (legal or not under the budgets): the model's cost plus the frozen steps' constant is
    `plan_exchange` of the plan that choice rewrites, the definition computed from the plan alone."""
    facts, space, problem_ = prepared.facts, prepared.space, prepared.problem
    for choice in [problem_.input_choice, *_random_choices(problem_.candidate_counts, 6, seed=1)]:
        written = rewrite(facts, space, choice, facts.budgets).plan
        assert priced.exchange_of(choice) == plan_exchange(written).total


def test_a_candidate_not_alive_is_forbidden_and_its_pairs_unpriced(prepared):
    problem_ = prepared.problem
    alive = alive_within(problem_, problem_.lower_bound() + 20_000)
    assert any(not mask.all() for mask in alive) and all(mask.any() for mask in alive)
    pruned = exact_problem(prepared.facts, prepared.space, problem_, alive).priced
    for g, mask in enumerate(alive):
        assert all((cost >= FORBIDDEN) == (not kept) for cost, kept in zip(pruned.exchange[g], mask))
    for edge in pruned.edges:
        assert not edge.costs[~alive[edge.a]].any() and not edge.costs[:, ~alive[edge.b]].any()


def test_a_choice_is_forbidden_for_its_views_exactly_where_its_plan_reads_two_ways(prepared, priced):
    """docs/EXCHANGE.md: the strict problem forbids the view pairs whose two readings send different bytes (the
    reference plan's own pairs read alike), so a choice breaks it exactly where its written plan lists
    `other_readings`; and the two problems differ only there."""
    facts, space, problem_ = prepared.facts, prepared.space, prepared.problem
    differ = []
    for choice in [problem_.input_choice, *_random_choices(problem_.candidate_counts, 10, seed=3)]:
        written = rewrite(facts, space, choice, facts.budgets).plan
        differ.append(priced.readings_differ_in(choice))
        assert differ[-1] == bool(plan_exchange(written).other_readings)
        assert priced.priced.forbidden_in(choice) == 0
    assert not differ[0] and any(differ)


def _random_problem(rng: np.random.Generator):
    groups, rows = int(rng.integers(2, 4)), 3
    counts = tuple(int(rng.integers(1, 4)) for _ in range(groups))
    live = [[g for g in range(groups) if rng.random() < 0.7] for _ in range(rows)]
    step_rows = [StepRow(r, int(rng.integers(0, 30)), int(rng.integers(0, 30)), tuple(
        (g, rng.integers(0, 40, counts[g]), rng.integers(0, 40, counts[g])) for g in live[r])) for r in range(rows)]
    limits = Budgets(int(rng.integers(60, 200)), int(rng.integers(20, 100)), 0).limits if rng.random() < 0.5 else ()
    return problem(step_rows, counts, limits=limits)


@pytest.mark.parametrize("seed", range(30))
def test_alive_within_keeps_every_candidate_of_every_choice_that_meets_the_budgets_and_the_peak(seed):
    p = _random_problem(np.random.default_rng(seed))
    choices = list(itertools.product(*(range(n) for n in p.candidate_counts)))
    peaks = sorted({p.usage(c).peak for c in choices})
    for cap in (None, *peaks):
        alive = alive_within(p, cap)
        for choice in choices:
            usage = p.usage(choice)
            if not usage.violation(p.limits) and (cap is None or usage.peak <= cap):
                assert all(alive[g][c] for g, c in enumerate(choice)), (cap, choice)


def test_alive_within_drops_what_a_row_cannot_hold():
    # step 0 = 100 + A[50, 20], step 1 = 10 + B[30, 10]: at a peak of 120, A's first candidate (150) cannot be
    # part of any choice; B's both can
    alive = alive_within(TWO_STEPS, 120)
    assert [mask.tolist() for mask in alive] == [[False, True], [True, True]]
    assert [mask.tolist() for mask in alive_within(TWO_STEPS, 119)] == [[False, False], [True, True]]
    assert [mask.tolist() for mask in alive_within(TWO_STEPS)] == [[True, True], [True, True]]  # no budgets

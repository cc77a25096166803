"""An honest bound (issue 19): a cap on a group's candidates leaves legal choices out (`Problem.left_out`), and
"optimal" is said only when the bound covers them too (`Problem.relaxation`, `solvers.bounds.whole_scope`); the
left-out choices that may beat the peak found are solved again (tests/test_replan_widen.py)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from importlib.util import find_spec

import numpy as np
import pytest
from problems import b, problem
from reference import CHIP6

from ipuplan import load_plan
from ipuplan.model.build import problem_of
from ipuplan.model.objective import Objective
from ipuplan.model.problem import Problem, StepRow, alive_left_out, relaxed_lower_bound
from ipuplan.plan.budgets import Budgets
from ipuplan.plan.layout import STANDARD
from ipuplan.replan.pipeline import optimize
from ipuplan.solvers import SolverSettings, SolveStatus, solve
from ipuplan.space.levels import gemm
from ipuplan.space.scopes import with_promoted

SETTINGS = SolverSettings(time_limit=5, workers=1, deterministic=True)
HIGHS = pytest.param("highs", marks=pytest.mark.skipif(find_spec("scipy") is None, reason="HiGHS needs SciPy"))


def with_left_out(p: Problem, left_out: dict[int, tuple[list[int], list[int]]]) -> Problem:
    """`p` with bound-only choices: per row, group -> (standard bytes, interleaved bytes) per left-out choice."""
    rows = tuple(tuple((g, b(*s), b(*i)) for g, (s, i) in sorted(left_out.get(r, {}).items()))
                 for r in range(len(p.rows)))
    return replace(p, left_out=rows)


# step 0 = 10 + A[100 (input), 80 | left out: 50, 95], step 1 = 20 + B[30, 20]; peak over the kept list 90
KEPT = problem([StepRow(0, 10, 0, ((0, b(100, 80), b(0, 0)),)), StepRow(1, 20, 0, ((1, b(30, 20), b(0, 0)),))],
               (2, 2))
BETTER_LEFT_OUT = with_left_out(KEPT, {0: {0: ([50, 95], [0, 0])}})
WORSE_LEFT_OUT = with_left_out(KEPT, {0: {0: ([95, 90], [0, 0])}})


@pytest.mark.parametrize("backend", ["cpsat", HIGHS, "greedy"])
def test_optimal_is_not_said_when_a_left_out_choice_is_better(backend):
    result = solve(BETTER_LEFT_OUT, SETTINGS, backend)
    assert result.peak == 90 and result.status == SolveStatus.FEASIBLE
    assert result.bound <= 60 and result.left_out == 1  # the choice of 50 bytes could beat 90; the one of 95 cannot


@pytest.mark.parametrize("backend", ["cpsat", HIGHS])
def test_optimal_is_said_when_no_left_out_choice_can_beat_the_peak(backend):
    assert WORSE_LEFT_OUT.relaxation(alive_left_out(WORSE_LEFT_OUT, 90)) is None  # 10 + 90 already reaches it
    result = solve(WORSE_LEFT_OUT, SETTINGS, backend)
    assert (result.peak, result.status, result.bound, result.left_out) == (90, SolveStatus.OPTIMAL, 90, 0)


@pytest.mark.parametrize(("left_out", "status"), [([50], SolveStatus.NO_SOLUTION), ([70], SolveStatus.INFEASIBLE)])
def test_infeasible_only_when_the_left_out_choices_cannot_fit_either(left_out, status):
    # standard region 60 bytes: every kept choice of A breaks it at step 0; a left-out one of 50 would not
    tight = with_left_out(replace(KEPT, limits=Budgets(1000, 940, 0).limits), {0: {0: (left_out, [0])}})
    assert solve(replace(tight, left_out=()), SETTINGS).status == SolveStatus.INFEASIBLE
    assert solve(tight, SETTINGS).status == status


def complete(p: Problem) -> Problem:
    """`p` with every left-out choice a candidate of its group (after its kept ones)."""
    extra = {g: len(s) for terms in p.left_out for g, s, _ in terms}
    rows = []
    for row, left_out in zip(p.rows, p.left_out):
        terms = {g: (s, i) for g, s, i in row.terms}
        outside = {g: (s, i) for g, s, i in left_out}
        rows.append(StepRow(row.step, row.standard, row.interleaved, tuple(
            (g, np.append(terms.get(g, (np.zeros(p.candidate_counts[g], int),) * 2)[0],
                          outside.get(g, (np.zeros(extra.get(g, 0), int),) * 2)[0]),
             np.append(terms.get(g, (np.zeros(p.candidate_counts[g], int),) * 2)[1],
                       outside.get(g, (np.zeros(extra.get(g, 0), int),) * 2)[1]))
            for g in sorted(set(terms) | set(outside)))))
    counts = tuple(n + extra.get(g, 0) for g, n in enumerate(p.candidate_counts))
    return replace(p, candidate_counts=counts, rows=tuple(rows), left_out=(),
                   exchange=tuple((*costs, *(0,) * extra.get(g, 0)) for g, costs in enumerate(p.exchange)))


def least_peak(p: Problem) -> int | None:
    """By enumeration: the least peak of a choice that meets the budgets (None: none does)."""
    fits = [p.usage(c) for c in itertools.product(*(range(n) for n in p.candidate_counts))]
    peaks = [u.peak for u in fits if not u.violation(p.limits)]
    return min(peaks) if peaks else None


def random_problem(rng: np.random.Generator) -> Problem:
    """Two to three groups over three rows, each with kept and left-out choices in both classes, and budgets."""
    groups, rows = int(rng.integers(2, 4)), 3
    counts = tuple(int(rng.integers(1, 4)) for _ in range(groups))
    left = [int(rng.integers(0, 4)) for _ in range(groups)]
    live = [[g for g in range(groups) if rng.random() < 0.7] for _ in range(rows)]
    kept_rows, left_rows = [], []
    for r in range(rows):
        kept_rows.append(StepRow(r, int(rng.integers(0, 30)), int(rng.integers(0, 30)), tuple(
            (g, rng.integers(0, 40, counts[g]), rng.integers(0, 40, counts[g])) for g in live[r])))
        left_rows.append(tuple((g, rng.integers(0, 40, left[g]), rng.integers(0, 40, left[g]))
                               for g in live[r] if left[g]))
    limits = Budgets(int(rng.integers(60, 200)), int(rng.integers(20, 100)), 0).limits if rng.random() < 0.5 else ()
    return replace(problem(kept_rows, counts, limits=limits), left_out=tuple(left_rows))


@pytest.mark.parametrize("seed", range(40))
def test_the_relaxation_bounds_every_choice_of_the_whole_scope(seed):
    p = random_problem(np.random.default_rng(seed))
    whole, kept = least_peak(complete(p)), least_peak(replace(p, left_out=()))
    for peak in (None, kept):
        relaxed = p.relaxation(alive_left_out(p, peak))
        if relaxed is None:  # nothing left out may beat `peak` or meet the budgets: the kept list holds the optimum
            assert whole == kept
        elif whole is not None:
            assert least_peak(relaxed) is not None and least_peak(relaxed) <= whole


@pytest.mark.parametrize("seed", range(40))
def test_the_relaxed_lower_bound_is_the_built_relaxations(seed):
    p = random_problem(np.random.default_rng(seed))
    for peak in (None, least_peak(replace(p, left_out=()))):
        alive = alive_left_out(p, peak)
        relaxed = p.relaxation(alive)
        assert relaxed_lower_bound(p, alive) == (None if relaxed is None else relaxed.lower_bound())


@pytest.mark.parametrize("seed", range(40))
def test_a_left_out_choice_is_dropped_only_when_it_cannot_beat_the_peak(seed):
    p = random_problem(np.random.default_rng(seed))
    whole = complete(p)
    peak = least_peak(replace(p, left_out=()))
    alive = alive_left_out(p, peak)
    for choice in itertools.product(*(range(n) for n in whole.candidate_counts)):
        usage = whole.usage(choice)
        if usage.violation(whole.limits) or (peak is not None and usage.peak >= peak):
            continue
        for g, c in enumerate(choice):
            if c >= p.candidate_counts[g]:
                assert alive[g][c - p.candidate_counts[g]], (choice, g)


def test_left_out_bytes_are_the_bytes_of_their_candidates(facts, spaces):
    space = spaces["full"]
    cut = {g: np.ones(group.left_out.count, dtype=bool) for g, group in enumerate(space.free) if group.left_out}
    assert cut  # a cap leaves Gemm splits out on the reference plan
    wider = with_promoted(facts, space, cut)
    for g in cut:
        group, left_out = wider.free[g], space.free[g].left_out
        made = group.candidates[len(space.free[g].candidates):]
        assert group.left_out is None and len(made) == left_out.count
        for j, candidate in enumerate(made):
            assert [v.bytes for v in candidate.value_bytes] == left_out.bytes[j].tolist()
            assert [layout.memory_class == STANDARD for layout in candidate.layouts] == list(left_out.standard)
            assert sorted(candidate.scratch) == sorted((step, int(s[j]), int(i[j])) for step, s, i in left_out.scratch)


def test_the_problem_of_the_promoted_space_is_the_complete_problem(facts, spaces):
    space = spaces["kernels"]
    p = problem_of(facts, space)
    everything = {g: np.ones(group.left_out.count, dtype=bool) for g, group in enumerate(space.free) if group.left_out}
    wider, expected = problem_of(facts, with_promoted(facts, space, everything)), complete(p)
    assert wider.left_out == () and wider.candidate_counts == expected.candidate_counts

    def rows(q: Problem):
        return [(r.step, r.standard, r.interleaved, [(g, s.tolist(), i.tolist()) for g, s, i in r.terms])
                for r in q.rows]

    assert rows(wider) == rows(expected)  # the bytes: the exchange of a left-out choice is known once it is made


def test_without_a_cap_the_same_optimum(monkeypatch):
    monkeypatch.setattr(gemm, "MAX_SPLITS", 10**6)
    result = optimize(load_plan(CHIP6), scope="kernels", workers=1, time_limit=20)
    assert (result.after.raw_peak, result.status, result.solve.left_out) == (311_412, SolveStatus.OPTIMAL, 0)


def least_exchange(p: Problem) -> int | None:
    """By enumeration: the least exchange of a choice that meets the budgets (None: none does)."""
    fits = [c for c in itertools.product(*(range(n) for n in p.candidate_counts)) if not p.usage(c).violation(p.limits)]
    return min(p.exchange_of(c) for c in fits) if fits else None


@pytest.mark.parametrize("seed", range(40))
def test_fit_says_optimal_or_infeasible_only_of_the_whole_scope(seed):
    """`fit` over a capped list: a left-out choice's exchange is unknown but not below 0, so "optimal" is said only
    when no choice of the whole scope, left-out ones at no exchange, has less; "infeasible" only when none fits."""
    rng = np.random.default_rng(seed)
    p = random_problem(rng)
    p = replace(p, exchange=tuple(tuple(int(x) for x in rng.integers(1, 50, n)) for n in p.candidate_counts))
    result = solve(p, replace(SETTINGS, objective=Objective.FIT))
    whole = least_exchange(complete(p))
    if result.status == SolveStatus.OPTIMAL:
        assert result.exchange_bytes == whole
    if result.status == SolveStatus.INFEASIBLE:
        assert whole is None
    if result.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE):
        assert result.exchange_bound <= whole <= result.exchange_bytes


def test_fit_does_not_say_optimal_when_a_left_out_choice_may_cost_less():
    fit = replace(SETTINGS, objective=Objective.FIT)
    priced = replace(BETTER_LEFT_OUT, exchange=((5, 3), (0, 0)))
    result = solve(priced, fit)
    assert (result.status, result.exchange_bytes, result.exchange_bound, result.left_out) == (
        SolveStatus.FEASIBLE, 3, 0, 2)
    assert solve(replace(priced, left_out=()), fit).status == SolveStatus.OPTIMAL

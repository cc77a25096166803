"""`model.build`: the step rows of the reference plan reproduce its memory estimate, and only dominated steps
are left out."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from problems import b, problem

from ipuplan.model.build import problem_of, promoted_problem, step_rows, widened_problem
from ipuplan.model.problem import Problem, StepRow, alive_left_out, term_table
from ipuplan.space import scopes
from ipuplan.space.levels import elementwise
from ipuplan.space.scopes import candidate_space, with_promoted


@pytest.mark.parametrize("scope", ["storage", "kernels"])
def test_step_rows_at_the_input_reproduce_the_estimate(facts, spaces, scope):
    problem = problem_of(facts, spaces[scope])
    usage = problem.usage(problem.input_choice)
    for position, row in enumerate(problem.rows):
        expected = (facts.estimate.standard[row.step], facts.estimate.interleaved[row.step])
        assert (int(usage.standard[position]), int(usage.interleaved[position])) == expected, row.step
    # the dropped steps are dominated: the kept ones still hold the peak
    assert usage.peak == facts.estimate.raw_peak
    assert len(problem.rows) < problem.steps_total == len(facts.plan.steps)


def test_step_rows_drop_only_dominated_steps(facts, spaces):
    rows, left_out = step_rows(facts, spaces["kernels"])
    assert len(left_out) == len(rows) and any(left_out)  # a cap left Gemm splits out: their bytes at each kept row
    kept = {row.step for row in rows}
    estimate = facts.estimate
    for step in range(len(facts.plan.steps)):
        if step not in kept:
            # a dropped step never exceeds the kept step that dominates it, at the input
            assert any(
                estimate.standard[k] >= estimate.standard[step]
                and estimate.interleaved[k] >= estimate.interleaved[step]
                for k in kept
            ), step


def test_a_problem_counts_its_groups_candidates_and_values(facts, spaces):
    space = spaces["kernels"]
    problem = problem_of(facts, space)
    assert problem.candidate_counts == tuple(len(g.candidates) for g in space.free)
    assert all(0 <= i < n for i, n in zip(problem.input_choice, problem.candidate_counts))
    assert sum(problem.group_sizes) == sum(len(g.members) for g in space.free) > 0
    assert problem.limits == facts.budgets.limits


def contents(problem: Problem) -> tuple:
    """Every figure of a problem's rows and left-out choices, the arrays as lists."""
    def terms(held):
        return tuple((g, s.tolist(), i.tolist()) for g, s, i in held)
    return (problem.candidate_counts, problem.input_choice, problem.group_sizes, problem.exchange, problem.limits,
            problem.steps_total, tuple((r.step, r.standard, r.interleaved, terms(r.terms)) for r in problem.rows),
            tuple(map(terms, problem.left_out)))


def every_other(chosen: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    """Of each group's chosen left-out choices, every other one (the rest stay left out)."""
    found = {}
    for g, mask in chosen.items():
        picked = np.zeros_like(mask)
        picked[np.flatnonzero(mask)[::2]] = True
        found[g] = picked
    return found


@pytest.mark.parametrize("scope", ["kernels", "full"])
@pytest.mark.parametrize("share", ["all", "every other"])
def test_a_widened_problem_read_off_the_narrow_rows_is_the_widened_spaces_problem(facts, spaces, scope, share):
    """The left-out Gemm splits made candidates (all, or every other one with the rest still left out): the rows
    read off the narrow problem hold the same figures as the widened space's problem built from the plan."""
    space = spaces[scope]
    narrow = problem_of(facts, space)
    chosen = {g: np.ones(group.left_out.count, dtype=bool) for g, group in enumerate(space.free) if group.left_out}
    chosen = chosen if share == "all" else every_other(chosen)
    wider = with_promoted(facts, space, chosen)
    derived = widened_problem(facts, narrow, wider, chosen)
    assert derived.candidate_counts != narrow.candidate_counts and bool(derived.left_out) == (share != "all")
    assert contents(derived) == contents(problem_of(facts, wider))
    # the narrow table is laid with the problem (`problem_of`): the widened one is read off it (the next test)
    assert "table" in narrow.__dict__ and "table" in derived.__dict__


@pytest.mark.parametrize("scope", ["kernels", "full"])
def test_a_widened_problems_table_read_off_the_narrow_table_is_its_rows_table(facts, spaces, scope):
    """The narrow table (laid with the problem): the widened problem's table is that table with the promoted terms
    widened, the same as one laid flat from the widened rows."""
    space = spaces[scope]
    narrow = problem_of(facts, space)
    assert narrow.table.terms
    chosen = every_other({g: np.ones(group.left_out.count, dtype=bool) for g, group in enumerate(space.free)
                          if group.left_out})
    derived = widened_problem(facts, narrow, with_promoted(facts, space, chosen), chosen)
    table, laid_flat = derived.__dict__["table"], term_table(derived.rows)
    assert table is not narrow.table
    for field in ("group", "start", "standard", "interleaved", "span_term", "span_first", "span_end",
                  "constant_standard", "constant_interleaved", "row", "term"):
        assert getattr(table, field).tolist() == getattr(laid_flat, field).tolist(), field


def test_the_elementwise_splits_a_cap_left_out_widen_the_same_way(facts, monkeypatch):
    monkeypatch.setattr(elementwise, "MAX_SPLITS", 2)
    space = candidate_space(facts, "full")
    narrow = problem_of(facts, space)
    chosen = alive_left_out(narrow, None)
    assert any(space.free[g].kind == elementwise.KIND for g in chosen)
    wider = with_promoted(facts, space, chosen)
    assert contents(widened_problem(facts, narrow, wider, chosen)) == contents(problem_of(facts, wider))


def test_a_promotion_that_made_fewer_candidates_builds_the_problem_again(facts, spaces, monkeypatch):
    """A left-out split that cannot be laid out makes no candidate: the narrow rows no longer line up with the
    candidates, so the widened problem is the widened space's, built from the plan."""
    promote = scopes.promoter("kernel")
    monkeypatch.setattr(scopes, "promoter", lambda kind: lambda context, members, splits: promote(
        context, members, splits)[1:])
    space = spaces["kernels"]
    narrow = problem_of(facts, space)
    chosen = alive_left_out(narrow, None)
    wider = with_promoted(facts, space, chosen)
    derived = widened_problem(facts, narrow, wider, chosen)
    assert derived.candidate_counts == tuple(len(g.candidates) for g in wider.free)
    assert contents(derived) == contents(problem_of(facts, wider))


def test_a_term_that_meets_two_left_out_terms_becomes_two_terms_and_the_table_is_laid_flat_again():
    """One term of group 0 at two rows, its left-out choice 5 bytes at one and 7 at the other: widened, the rows
    hold two terms, so the narrow table's spans no longer fit and the table comes from the rows."""
    kept = (0, b(10, 20), b(0, 0))
    narrow = replace(problem([StepRow(0, 1, 0, (kept,)), StepRow(1, 2, 0, (kept,))], (2,)),
                     left_out=(((0, b(5), b(0)),), ((0, b(7), b(0)),)))
    assert narrow.table.terms == 1
    wider = promoted_problem(narrow, {0: np.array([True])}, ((0, 0, 0),))
    assert "table" not in wider.__dict__ and wider.left_out == ()
    assert wider.table.terms == 2 and wider.usage((2,)).standard.tolist() == [6, 9]


def test_a_left_out_term_without_its_groups_term_at_its_row_does_not_read_off():
    narrow = replace(problem([StepRow(0, 1, 0, ((1, b(3, 4), b(0, 0)),))], (1, 2)), left_out=(((0, b(5), b(0)),),))
    assert promoted_problem(narrow, {0: np.array([True])}, ((0, 0), (0, 0))) is None


@pytest.mark.parametrize("scope", ["storage", "kernels", "full"])
def test_a_problem_s_table_laid_from_its_numbered_terms_is_the_one_its_rows_give(facts, spaces, scope):
    built = problem_of(facts, spaces[scope])
    laid, found = built.table, term_table(built.rows)
    assert "table" in built.__dict__  # handed over, not built from the rows
    for name in ("group", "start", "standard", "interleaved", "span_term", "span_first", "span_end",
                 "constant_standard", "constant_interleaved", "row", "term"):
        assert np.array_equal(getattr(laid, name), getattr(found, name)), name
    assert built.fingerprint() == replace(built).fingerprint()  # a copy's table is built from its rows

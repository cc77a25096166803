"""`model.build`: the step rows of the reference plan reproduce its memory estimate, and only dominated steps
are left out."""

from __future__ import annotations

import pytest

from ipuplan.model.build import problem_of, step_rows


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

"""`solvers.conflict`: why budgets cannot be met, on a one-group problem worked out by hand."""

from __future__ import annotations

import numpy as np
from measures import explain_infeasible

from ipuplan.model.problem import Problem, StepRow
from ipuplan.plan.budgets import Budgets
from ipuplan.solvers.conflict import feasible

# One group over 20 constant standard bytes at step 7: candidate 0 (input) 100 standard, 1: 40 standard,
# 2: 45 interleaved. Budgets(60, 30, 0): standard <= 30, interleaved <= 30, total <= 60, and every
# candidate breaks one: 0 and 1 the standard budget, 2 the interleaved one (and the total, 65).
INFEASIBLE = Problem(candidate_counts=(3,), input_choice=(0,), group_sizes=(1,),
                     rows=(StepRow(7, 20, 0, ((0, np.array([100, 40, 0]), np.array([0, 0, 45])),)),),
                     exchange=((0, 0, 0),), limits=Budgets(60, 30, 0).limits, steps_total=8)


def test_feasible_tells_budgets_no_layout_meets_from_those_one_does():
    assert feasible(INFEASIBLE, 2) is False
    assert feasible(INFEASIBLE.with_limits(Budgets(100, 50, 0).limits), 2) is True  # candidate 2: 20 + 45


def test_explain_infeasible_names_the_budget_the_step_and_the_lowest_peak():
    text = explain_infeasible(INFEASIBLE, 2)
    assert "the interleaved budget (30 bytes) cannot be met at step 7: it needs at least 45" in text
    assert "unless the standard budget (30 bytes) is exceeded at step 7" in text
    assert text.endswith("the lowest raw peak any layout reaches is 60 bytes")

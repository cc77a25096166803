"""Quality (not speed) on a 10,000-value plan: run with `pytest -m slow`; CI skips it."""

from __future__ import annotations

import pytest

from ipuplan.facts.check import check
from ipuplan.replan.pipeline import optimize
from ipuplan.workbench.synth import unroll, with_budget_factor


@pytest.mark.slow
def test_ten_thousand_values_within_one_percent_of_the_bound(reference_plan):
    plan = with_budget_factor(unroll(reference_plan, 57), 1.5)
    assert len(plan.values) >= 10_000 and len(plan.steps) >= 5_000
    result = optimize(plan, time_limit=60, workers=2)
    assert result.after.raw_peak <= result.bound * 1.01
    assert check(result.plan) == []

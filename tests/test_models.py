"""Every plan in models/ is consistent, and the optimiser's output on it is legal and no worse."""

from __future__ import annotations

import pytest
from reference import ALL_PLANS

from ipuplan import load_plan
from ipuplan.check import check
from ipuplan.optimizer import optimize
from ipuplan.rewrite import contract_violations


@pytest.mark.parametrize("path", ALL_PLANS, ids=lambda p: p.name)
def test_plan_is_consistent(path):
    assert check(load_plan(path)) == []


@pytest.mark.parametrize("scope", ["storage", "kernels"])
@pytest.mark.parametrize("path", ALL_PLANS, ids=lambda p: p.name)
def test_optimised_plan_is_legal_fits_and_no_worse(path, scope):
    plan = load_plan(path)
    result = optimize(plan, deterministic=True, time_limit=10, scope=scope)
    assert check(result.plan) == []
    assert contract_violations(plan, result.plan) == []
    assert result.after.raw_peak <= result.before.raw_peak
    assert result.after.fits_budget
    assert result.after.raw_peak == result.solve.peak

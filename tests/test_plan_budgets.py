"""`plan.budgets`: the one rule every part measures the budgets with (`Limit`s), and overriding budgets."""

from __future__ import annotations

import numpy as np
import pytest

from ipuplan.errors import BudgetError
from ipuplan.plan.budgets import Budgets, Limit, excess

# standard limit 150 - 50 = 100, interleaved limit 50, total limit 150 - 30 = 120
BUDGETS = Budgets(budget_bytes=150, interleaved_budget_bytes=50, support_reserve_bytes=30)
STANDARD = np.array([110, 20, 70], dtype=np.int64)
INTERLEAVED = np.array([0, 80, 60], dtype=np.int64)


def test_each_limit_measures_its_own_excess():
    standard, interleaved, total = BUDGETS.limits
    assert (standard.bytes, interleaved.bytes, total.bytes) == (100, 50, 120)
    assert excess(standard, STANDARD, INTERLEAVED).tolist() == [110 - 100, 0, 0]
    assert excess(interleaved, STANDARD, INTERLEAVED).tolist() == [0, 80 - 50, 60 - 50]
    assert excess(total, STANDARD, INTERLEAVED).tolist() == [0, 0, 70 + 60 - 120]


def test_excess_on_ints():
    assert excess(Limit("standard", 1, 0, 100), 120, 999) == 20
    assert excess(Limit("standard", 1, 0, 100), 80, 999) == 0
    assert excess(Limit("interleaved", 0, 1, 50), 999, 70) == 20
    assert excess(Limit("total", 1, 1, 100), 60, 50) == 10
    assert excess(Limit("total", 1, 1, 100), 60, 40) == 0


def test_limit_usage_is_the_weighted_sum_it_documents():
    # `standard * std + interleaved * il`: 2 * 30 + 1 * 5
    assert Limit("weighted", 2, 1, 100).usage(30, 5) == 65


def test_overridden_replaces_only_the_given_budgets():
    assert BUDGETS.overridden(200, None, 5) == Budgets(200, 50, 5)
    assert BUDGETS.overridden(None, None, None) == BUDGETS


@pytest.mark.parametrize(
    "budget, interleaved, reserve",
    [(-1, None, None), (None, -1, None), (None, None, -1), (None, 151, None), (40, None, None)],
    ids=["negative budget", "negative interleaved", "negative reserve", "interleaved above budget",
         "budget below interleaved"],
)
def test_overridden_refuses_contradicting_budgets(budget, interleaved, reserve):
    with pytest.raises(BudgetError):
        BUDGETS.overridden(budget, interleaved, reserve)

"""A cost term's prices (`model.costs`): a `Ledger` sums costs per candidate and per pair of two groups' candidates,
whichever side a term names first; a `Pricing` keeps what a choice costs apart from what no solver may choose, and
what no choice changes; the problem a ledger prices forbids the candidates not alive."""

from __future__ import annotations

import itertools

import numpy as np
from problems import TWO_STEPS

from ipuplan.model.costs import Ledger, Pricing
from ipuplan.model.problem import FORBIDDEN


def matrix(*rows) -> np.ndarray:
    return np.array(rows, dtype=np.int64)


def test_a_ledger_sums_a_pair_under_its_lower_group_whichever_side_comes_first():
    ledger = Pricing.zero((2, 3)).priced
    ledger.add(0, 1, matrix([1, 2, 3], [4, 5, 6]))
    ledger.add(1, 0, matrix([10, 40], [20, 50], [30, 60]))  # group 1's candidates as rows: the same pairs, transposed
    assert list(ledger.edges) == [(0, 1)]
    assert ledger.edges[0, 1].tolist() == [[11, 22, 33], [44, 55, 66]]
    assert [u.tolist() for u in ledger.unary] == [[0, 0], [0, 0, 0]]


def test_a_cost_with_one_side_frozen_or_within_one_group_is_that_groups():
    ledger = Pricing.zero((2, 3)).priced
    ledger.add(1, None, matrix(1, 2, 3))
    ledger.add(None, 1, matrix(10, 20, 30))
    ledger.add(0, 0, matrix(7, 8))
    assert [u.tolist() for u in ledger.unary] == [[7, 8], [11, 22, 33]] and ledger.edges == {}


def test_pricing_keeps_what_a_choice_costs_apart_from_what_it_forbids_and_from_the_constant():
    pricing = Pricing.zero((2, 2))
    pricing.add(None, None, matrix(100, 20))  # both sides frozen: no choice changes it
    costs = matrix([1, 2], [3, 4])
    pricing.add(0, 1, costs, forbidden=np.array([[False, True], [False, False]]))
    assert pricing.constant == 120
    assert pricing.priced.edges[0, 1].tolist() == [[1, 2], [3, 4]]  # the figure of any choice, forbidden or not
    assert pricing.strict.edges[0, 1].tolist() == [[1, FORBIDDEN], [3, 4]]


def test_the_problem_of_a_ledger_prices_every_choice_and_forbids_the_candidates_not_alive():
    ledger = Ledger([matrix(5, 0), matrix(0, 7)])
    ledger.add(1, 0, matrix([0, 3], [9, 0]))
    alive = [np.array([True, True]), np.array([True, False])]
    priced = ledger.problem(TWO_STEPS, alive)
    assert priced.rows == TWO_STEPS.rows and priced.exchange == ((5, 0), (0, FORBIDDEN))
    for choice in itertools.product(range(2), range(2)):
        own = int(ledger.unary[0][choice[0]] + ledger.unary[1][choice[1]])
        pair = int(matrix([0, 3], [9, 0])[choice[1], choice[0]])
        if choice[1] == 1:
            assert priced.forbidden_in(choice) == 1
        else:
            assert priced.exchange_of(choice) == own + pair and not priced.forbidden_in(choice)

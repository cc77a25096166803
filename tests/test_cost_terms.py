"""A cost term is data: a stub term registered with one line is summed into both the peak phase's proxy and the
exchange phase's exact costs, and every backend prices it (it changes what each one chooses)."""

from __future__ import annotations

from importlib.util import find_spec

import numpy as np
import pytest

import ipuplan
from ipuplan.facts.plan_exchange import plan_exchange
from ipuplan.model import cost_terms
from ipuplan.model.cost_terms import COST_TERMS, exact_pricing, proxy_exchange, register_cost_term
from ipuplan.model.costs import CostTerm, Pricing
from ipuplan.model.exchange_cost import proxy_costs
from ipuplan.model.problem import FORBIDDEN
from ipuplan.replan.options import OptimizeOptions
from ipuplan.replan.pipeline import prepare

HIGHS = pytest.param("highs", marks=pytest.mark.skipif(find_spec("scipy") is None, reason="HiGHS needs SciPy"))
KEPT_PRICE = 10**12
"""What the stub charges a pair that moves the kept group off its input: more than the plan's whole exchange."""


def fit(plan, **options):
    return ipuplan.optimize(plan, objective="fit", workers=1, exact_exchange="always", **options)


@pytest.fixture(scope="module")
def unpriced(reference_plan):
    """The `fit` run without the stub."""
    return fit(reference_plan)


def groups_for_the_stub(result) -> tuple[int, int]:
    """A group the run moves off its input (`kept`: the stub's pair price keeps it there) and another group with more
    than one candidate (`moved`: the stub forbids its input)."""
    problem = result.prepared.problem
    changed = [g for g, (c, i) in enumerate(zip(result.solve.choice, problem.input_choice)) if c != i]
    kept = changed[0]
    moved = next(g for g, n in enumerate(problem.candidate_counts) if n > 1 and g != kept)
    return kept, moved


def stub_term(kept: int, moved: int, input_choice: tuple[int, ...]) -> CostTerm:
    """`moved`'s input candidate forbidden (in the proxy and the exact price); every pair of `moved` and `kept` with
    `kept` off its input charged `KEPT_PRICE` (exact only: a proxy has no pairs)."""

    def proxy(space):
        costs = [np.zeros(len(group.candidates), dtype=np.int64) for group in space.free]
        costs[moved][input_choice[moved]] = FORBIDDEN
        return costs

    def exact(facts, space, alive, pricing: Pricing):
        counts = [len(group.candidates) for group in space.free]
        forbid = np.zeros(counts[moved], dtype=np.int64)
        forbid[input_choice[moved]] = FORBIDDEN
        pricing.add(moved, None, forbid)
        pairs = np.full((counts[moved], counts[kept]), KEPT_PRICE, dtype=np.int64)
        pairs[:, input_choice[kept]] = 0
        pricing.add(moved, kept, pairs)

    return CostTerm("stub", proxy, exact)


@pytest.fixture
def registered(monkeypatch, unpriced):
    """The stub registered for one test (the registry restored after it); the groups it prices."""
    monkeypatch.setattr(cost_terms, "COST_TERMS", dict(COST_TERMS))
    kept, moved = groups_for_the_stub(unpriced)
    register_cost_term(stub_term(kept, moved, unpriced.prepared.problem.input_choice))
    return kept, moved


def test_the_built_in_terms_are_the_plan_exchange_alone(reference_plan):
    prepared = prepare(reference_plan, OptimizeOptions(workers=1))
    assert list(COST_TERMS) == ["exchange"]
    assert proxy_exchange(prepared.space) == tuple(tuple(c.tolist()) for c in proxy_costs(prepared.space))


def test_a_registered_term_is_summed_into_both_prices(registered, reference_plan):
    kept, moved = registered
    prepared = prepare(reference_plan, OptimizeOptions(workers=1))
    problem = prepared.problem
    assert problem.exchange[moved][problem.input_choice[moved]] >= FORBIDDEN
    alive = [np.ones(n, dtype=bool) for n in problem.candidate_counts]
    pricing = exact_pricing(prepared.facts, prepared.space, alive)
    edge = pricing.priced.edges[tuple(sorted((kept, moved)))]
    oriented = edge if kept > moved else edge.T  # `moved`'s candidates as rows
    assert (oriented[:, [c for c in range(problem.candidate_counts[kept]) if c != problem.input_choice[kept]]]
            >= KEPT_PRICE).all()


@pytest.mark.parametrize("backend", ["cpsat", HIGHS, "greedy"])
def test_every_backend_prices_a_registered_term(registered, reference_plan, backend):
    kept, moved = registered
    result = fit(reference_plan, solver=backend)
    choice, input_choice = result.solve.choice, result.prepared.problem.input_choice
    assert choice[moved] != input_choice[moved] and choice[kept] == input_choice[kept]
    # the figure the run chose by is the plan's own exchange plus what the stub charged: nothing, here
    assert result.model_exchange_after == plan_exchange(result.plan).total == result.exchange_after

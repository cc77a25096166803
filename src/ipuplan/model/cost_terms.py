"""The cost terms a run sums into its exchange level (`COST_TERMS`), and their sums: `proxy_exchange` for the peak
phase's problem, `exact_pricing` for the exchange phase's. A new term is its module (a `costs.CostTerm`) and one
line in `COST_TERMS`, or `register_cost_term` from outside; every backend then prices it, since it reads only the
sums."""

from __future__ import annotations

import numpy as np

from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.model import exchange_cost
from ipuplan.model.costs import CostTerm, Pricing
from ipuplan.space.types import CandidateSpace

COST_TERMS: dict[str, CostTerm] = {
    exchange_cost.TERM.name: exchange_cost.TERM,
}
"""By name, the terms every run sums, in the order they are priced."""


def register_cost_term(term: CostTerm) -> None:
    """Make every later run sum `term` too (a term of the same name is replaced)."""
    COST_TERMS[term.name] = term


def proxy_exchange(space: CandidateSpace) -> tuple[tuple[int, ...], ...]:
    """Per free group, each candidate's proxy costs summed over the terms."""
    total = [np.zeros(len(group.candidates), dtype=np.int64) for group in space.free]
    for term in COST_TERMS.values():
        for summed, costs in zip(total, term.proxy(space)):
            summed += costs
    return tuple(tuple(costs.tolist()) for costs in total)


def exact_pricing(facts: PlanFacts, space: CandidateSpace, alive: list[np.ndarray], processes: int = 1) -> Pricing:
    """Every term's exact costs over the space's candidates, the `alive` ones priced (in `processes` where a term
    can, `CostTerm.parallel`)."""
    pricing = Pricing.zero(tuple(len(group.candidates) for group in space.free))
    for term in COST_TERMS.values():
        term.exact(facts, space, alive, pricing, **({"processes": processes} if term.parallel else {}))
    return pricing

"""The exchange phase's problem: a `Problem`'s exchange level re-priced by every cost term's exact price
(`model.cost_terms`; the plan's exchange, docs/EXCHANGE.md, is the built-in one). For every choice,
`exchange_of(choice)` is then `plan_exchange(rewritten plan).total` plus what other registered terms price, the figure
`optimize` reports. Only the candidates `alive` are priced: the others are forbidden."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.model.cost_terms import exact_pricing
from ipuplan.model.problem import FORBIDDEN, Problem
from ipuplan.space.types import CandidateSpace


@dataclass(frozen=True)
class ExactProblem:
    """A problem whose exchange is the plan's exact exchange, less `constant` (the steps between frozen values), with
    the view pairs whose two readings differ forbidden; `priced` the same without those (the figure of any choice)."""

    problem: Problem
    constant: int
    priced: Problem

    def exchange_of(self, choice: tuple[int, ...]) -> int:
        """The exact exchange of the plan `choice` writes (read `OUTER`, as `plan_exchange` counts it)."""
        return self.priced.exchange_of(choice) + self.constant

    def readings_differ_in(self, choice: tuple[int, ...]) -> bool:
        """Whether the plan `choice` writes has a view step, placed otherwise than the input, whose readings differ."""
        return self.problem.forbidden_in(choice) > self.priced.forbidden_in(choice)

    def within(self, alive: list[np.ndarray]) -> ExactProblem:
        """The same prices with the candidates not `alive` forbidden too (a subset of those priced: a sweep prices
        once at its highest peak, then each lower peak forbids more)."""
        return ExactProblem(_within(self.problem, alive), self.constant, _within(self.priced, alive))

    def capped(self, problem: Problem) -> ExactProblem:
        """The same prices over `problem` (this one's with other limits)."""
        return ExactProblem(problem, self.constant, self.priced)


def _within(problem: Problem, alive: list[np.ndarray]) -> Problem:
    exchange = tuple(tuple(c if keep else FORBIDDEN for c, keep in zip(costs, mask.tolist()))
                     for costs, mask in zip(problem.exchange, alive))
    return problem.with_same_rows(exchange=exchange)


def exact_problem(facts: PlanFacts, space: CandidateSpace, problem: Problem,
                  alive: list[np.ndarray] | None = None, processes: int = 1) -> ExactProblem:
    """`problem` (of `space`) with the exact costs of every term (edges between the same two groups summed), the
    candidates not `alive` (default: all alive) forbidden; priced in `processes` where a term can."""
    alive = alive if alive is not None else [np.ones(n, dtype=bool) for n in problem.candidate_counts]
    pricing = exact_pricing(facts, space, alive, processes)
    strict, priced = (ledger.problem(problem, alive) for ledger in (pricing.strict, pricing.priced))
    return ExactProblem(strict, pricing.constant, priced)

"""The plan's exact exchange (docs/EXCHANGE.md) as a `Problem`'s costs: every step `plan_exchange` prices, for every
pair of its two sides' candidate layouts (`facts.pair_exchange.pair_bytes`).

A step between two free groups is an `Edge` (its cost per pair of their candidates); within one group, or with one
side frozen, a cost of that group's candidates; between two frozen values, a constant. Then for every choice,
`problem.exchange_of(choice) + constant` is `plan_exchange(rewritten plan).total`, the figure `optimize` reports.
Pricing every pair costs seconds on the reference plan (`benchmarks/pair_pricing.py`), so only the candidates
`alive` are priced: the others are forbidden, their pairs left at zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ipuplan.facts import pair_exchange
from ipuplan.facts.plan_exchange import priced_kind
from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.model.problem import FORBIDDEN, Edge, Problem
from ipuplan.plan.operation import Operation
from ipuplan.space.levels import gather
from ipuplan.space.types import Candidate, CandidateSpace

Side = tuple[tuple[int, ...], object]
"""(shape, layout) of one candidate of a step's source or result."""


@dataclass(frozen=True)
class PricedStep:
    """A step the plan's exchange prices, with each side's group (None: frozen) and (shape, layout) per candidate."""

    step: int
    operation: Operation
    source_group: int | None
    result_group: int | None
    sources: tuple[Side, ...]
    results: tuple[Side, ...]
    element_size: int

    @property
    def kind(self) -> str:
        a, b = self.source_group, self.result_group
        return "frozen" if a is None and b is None else "one free" if a is None or b is None else (
            "one group" if a == b else "two groups")


def priced_steps(facts: PlanFacts, space: CandidateSpace) -> list[PricedStep]:
    """The movers and reductions that read one value and write one (the steps `plan_exchange` prices), with their
    sides as the space lays them out."""
    plan = facts.plan
    where = {m: (g, position) for g, group in enumerate(space.free) for position, m in enumerate(group.members)}

    def sides(value_id: int) -> tuple[int | None, tuple[Side, ...]]:
        value = plan.values[value_id]
        if value_id not in where:
            return None, ((tuple(value.shape), value.parsed_layout),)
        g, position = where[value_id]
        return g, tuple((tuple(c.shapes[position]) if c.shapes else tuple(value.shape), c.layouts[position])
                        for c in space.free[g].candidates)

    found = []
    for step in facts.flow.steps:
        operation = plan.steps[step.index].parsed_operation
        if priced_kind(operation) is None or len(step.reads) != 1 or len(step.writes) != 1:
            continue
        (a, sources), (b, results) = sides(step.reads[0]), sides(step.writes[0])
        found.append(PricedStep(step.index, operation, a, b, sources, results, plan.values[step.reads[0]].element_size))
    return found


def step_costs(step: PricedStep, source_alive: np.ndarray, result_alive: np.ndarray) -> np.ndarray:
    """The step's bytes per (source candidate, result candidate), or per candidate of its one group (a vector); only
    the `alive` candidates of each side are priced, the others' entries are 0."""
    if step.kind == "one group":
        costs = np.zeros(len(step.sources), dtype=np.int64)
        for (source_shape, result_shape), chosen in _blocks(step.sources, step.results, source_alive).items():
            found = pair_exchange.pair_bytes(step.operation, source_shape, result_shape, step.element_size,
                                             tuple(step.sources[c][1] for c in chosen),
                                             tuple(step.results[c][1] for c in chosen))
            costs[chosen] = np.diagonal(found)
        return costs
    costs = np.zeros((len(step.sources), len(step.results)), dtype=np.int64)
    for source_shape, rows in _by_shape(step.sources, source_alive).items():
        for result_shape, columns in _by_shape(step.results, result_alive).items():
            costs[np.ix_(rows, columns)] = pair_exchange.pair_bytes(
                step.operation, source_shape, result_shape, step.element_size,
                tuple(step.sources[i][1] for i in rows), tuple(step.results[j][1] for j in columns))
    return costs


def _blocks(sources: tuple[Side, ...], results: tuple[Side, ...], alive: np.ndarray) -> dict[tuple, list[int]]:
    """The alive candidates of one group by their (source shape, result shape)."""
    blocks: dict[tuple, list[int]] = {}
    for c in np.flatnonzero(alive).tolist():
        blocks.setdefault((sources[c][0], results[c][0]), []).append(c)
    return blocks


def _by_shape(sides: tuple[Side, ...], alive: np.ndarray) -> dict[tuple[int, ...], list[int]]:
    """The alive sides' indices by shape, in their order."""
    found: dict[tuple[int, ...], list[int]] = {}
    for k in np.flatnonzero(alive).tolist():
        found.setdefault(sides[k][0], []).append(k)
    return found


@dataclass(frozen=True)
class ExactProblem:
    """A problem whose exchange is the plan's exact exchange, less `constant` (the steps between frozen values)."""

    problem: Problem
    constant: int

    def exchange_of(self, choice: tuple[int, ...]) -> int:
        """The exact exchange of the plan `choice` writes."""
        return self.problem.exchange_of(choice) + self.constant

    def within(self, alive: list[np.ndarray]) -> ExactProblem:
        """The same prices with the candidates not `alive` forbidden too (a subset of those priced: a sweep prices
        once at its highest peak, then each lower peak forbids more)."""
        exchange = tuple(tuple(c if keep else FORBIDDEN for c, keep in zip(costs, mask.tolist()))
                         for costs, mask in zip(self.problem.exchange, alive))
        return ExactProblem(self.problem.with_same_rows(exchange=exchange), self.constant)


def gathered_exchange(candidates: tuple[Candidate, ...]) -> np.ndarray:
    """Per candidate, the bytes its inserted `Copy` steps send (scope `program`): steps the input plan does not
    have, so `priced_steps` cannot find them."""
    return np.fromiter((sum(g.exchange_bytes for g in c.gathers) for c in candidates), dtype=np.int64,
                       count=len(candidates))


def exact_problem(facts: PlanFacts, space: CandidateSpace, problem: Problem,
                  alive: list[np.ndarray] | None = None) -> ExactProblem:
    """`problem` (of `space`) with the exact exchange as its costs (edges between the same two groups summed), the
    candidates not `alive` (default: all alive) forbidden."""
    alive = alive if alive is not None else [np.ones(n, dtype=bool) for n in problem.candidate_counts]
    everywhere = np.ones(1, dtype=bool)
    unary = [np.zeros(n, dtype=np.int64) for n in problem.candidate_counts]
    edges: dict[tuple[int, int], np.ndarray] = {}
    constant = 0
    for step in priced_steps(facts, space):
        a, b = step.source_group, step.result_group
        cost = step_costs(step, everywhere if a is None else alive[a], everywhere if b is None else alive[b])
        if step.kind == "frozen":
            constant += int(cost[0, 0])
        elif step.kind == "one group":
            unary[a] += cost
        elif a is None or b is None:
            unary[b if a is None else a] += cost.ravel()
        else:
            key, oriented = ((a, b), cost) if a < b else ((b, a), cost.T)
            edges[key] = edges[key] + oriented if key in edges else oriented
    for g, group in enumerate(space.free):
        if group.kind == gather.KIND:
            unary[g] += gathered_exchange(group.candidates)
    for g, mask in enumerate(alive):
        unary[g][~mask] = FORBIDDEN
    priced = problem.with_table(problem.table, exchange=tuple(tuple(u.tolist()) for u in unary),
                                edges=tuple(Edge(a, b, matrix) for (a, b), matrix in sorted(edges.items())))
    return ExactProblem(priced, constant)

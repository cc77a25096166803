"""The plan's exact exchange (docs/EXCHANGE.md) as a `Problem`'s costs: every step `plan_exchange` prices, for every
pair of its two sides' candidate layouts (`facts.pair_exchange.pair_bytes`).

A step between two free groups is an `Edge` (its cost per pair of their candidates); within one group, or with one
side frozen, a cost of that group's candidates; between two frozen values, a constant. Then for every choice,
`problem.exchange_of(choice) + constant` is `plan_exchange(rewritten plan).total`, the figure `optimize` reports.
Pricing every pair costs seconds on the reference plan (`benchmarks/pair_pricing.py`), so only the candidates
`alive` are priced: the others are forbidden, their pairs left at zero.

An `AxisFactorView` step is priced read both ways (`plan_exchange.OUTER`, `INNER`: the format does not say which the
compiler means): a pair of layouts whose readings send different bytes is forbidden, unless both sides place as the
input plan does (the compiler's own pair), so that the figure reported holds whichever reading the compiler uses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ipuplan.facts import pair_exchange
from ipuplan.facts.plan_exchange import INNER, OUTER, priced_kind
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
    written: tuple[Side, Side]
    """The (source, result) as the input plan writes them."""

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

    def written(value_id: int) -> Side:
        value = plan.values[value_id]
        return tuple(value.shape), value.parsed_layout

    def sides(value_id: int) -> tuple[int | None, tuple[Side, ...]]:
        value = plan.values[value_id]
        if value_id not in where:
            return None, (written(value_id),)
        g, position = where[value_id]
        return g, tuple((tuple(c.shapes[position]) if c.shapes else tuple(value.shape), c.layouts[position])
                        for c in space.free[g].candidates)

    found = []
    for step in facts.flow.steps:
        operation = plan.steps[step.index].parsed_operation
        if priced_kind(operation) is None or len(step.reads) != 1 or len(step.writes) != 1:
            continue
        (a, sources), (b, results) = sides(step.reads[0]), sides(step.writes[0])
        found.append(PricedStep(step.index, operation, a, b, sources, results, plan.values[step.reads[0]].element_size,
                                (written(step.reads[0]), written(step.writes[0]))))
    return found


def step_costs(step: PricedStep, source_alive: np.ndarray, result_alive: np.ndarray,
               reading: str = OUTER) -> np.ndarray:
    """The step's bytes per (source candidate, result candidate), or per candidate of its one group (a vector); only
    the `alive` candidates of each side are priced, the others' entries are 0."""
    if step.kind == "one group":
        costs = np.zeros(len(step.sources), dtype=np.int64)
        for (source_shape, result_shape), chosen in _blocks(step.sources, step.results, source_alive).items():
            found = pair_exchange.pair_bytes(step.operation, source_shape, result_shape, step.element_size,
                                             tuple(step.sources[c][1] for c in chosen),
                                             tuple(step.results[c][1] for c in chosen), reading)
            costs[chosen] = np.diagonal(found)
        return costs
    costs = np.zeros((len(step.sources), len(step.results)), dtype=np.int64)
    for source_shape, rows in _by_shape(step.sources, source_alive).items():
        for result_shape, columns in _by_shape(step.results, result_alive).items():
            costs[np.ix_(rows, columns)] = pair_exchange.pair_bytes(
                step.operation, source_shape, result_shape, step.element_size,
                tuple(step.sources[i][1] for i in rows), tuple(step.results[j][1] for j in columns), reading)
    return costs


def readings_differ(step: PricedStep, source_alive: np.ndarray, result_alive: np.ndarray,
                    costs: np.ndarray) -> np.ndarray:
    """Where (shaped as `step_costs`, which are `costs`) a view step's `INNER` reading sends other bytes than its
    `OUTER` one and the pair is not the input's own placement; all False for a step without a view."""
    if not step.operation.has_view:
        return np.zeros(costs.shape, dtype=bool)
    # a side that reads alike pairs alike with any other: only the rest is priced again, read INNER
    source_alive = source_alive & ~_alike(step, step.sources, True)
    result_alive = result_alive & ~_alike(step, step.results, False)
    if step.kind == "one group":
        source_alive = result_alive = source_alive & result_alive
    inner = step_costs(step, source_alive, result_alive, INNER)
    both = (source_alive if step.kind == "one group" else source_alive[:, None] & result_alive[None, :])
    differ = both & (inner != costs)
    source_written, result_written = (_placed(side) for side in step.written)
    as_written = (np.array([_placed(s) == source_written for s in step.sources])[:, None]
                  & np.array([_placed(r) == result_written for r in step.results])[None, :])
    return differ & ~(np.diagonal(as_written) if step.kind == "one group" else as_written)


def _alike(step: PricedStep, sides: tuple[Side, ...], source: bool) -> np.ndarray:
    return np.array([pair_exchange.reads_alike(step.operation, shape, layout, source) for shape, layout in sides])


def _placed(side: Side) -> tuple:
    """A side's shape and `pair_exchange.placement_key`."""
    shape, layout = side
    return shape, pair_exchange.placement_key(layout)


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
    priced, strict = _Costs.zero(problem), _Costs.zero(problem)
    constant = 0
    for step in priced_steps(facts, space):
        a, b = step.source_group, step.result_group
        source_alive, result_alive = everywhere if a is None else alive[a], everywhere if b is None else alive[b]
        cost = step_costs(step, source_alive, result_alive)
        if step.kind == "frozen":  # both sides as the input writes them: its readings are the compiler's own
            constant += int(cost[0, 0])
            continue
        priced.add(step, cost)
        strict.add(step, np.where(readings_differ(step, source_alive, result_alive, cost), FORBIDDEN, cost))
    gathered = {g: gathered_exchange(group.candidates) for g, group in enumerate(space.free)
                if group.kind == gather.KIND}
    return ExactProblem(strict.problem(problem, alive, gathered), constant, priced.problem(problem, alive, gathered))


@dataclass(frozen=True)
class _Costs:
    """A problem's exchange being summed: per group a cost per candidate, per pair of groups a cost per pair."""

    unary: list[np.ndarray]
    edges: dict[tuple[int, int], np.ndarray]

    @classmethod
    def zero(cls, problem: Problem) -> _Costs:
        return cls([np.zeros(n, dtype=np.int64) for n in problem.candidate_counts], {})

    def add(self, step: PricedStep, cost: np.ndarray) -> None:
        """A step's `step_costs` (not between two frozen values)."""
        a, b = step.source_group, step.result_group
        if step.kind == "one group":
            self.unary[a] += cost
        elif a is None or b is None:
            self.unary[b if a is None else a] += cost.ravel()
        else:
            key, oriented = ((a, b), cost) if a < b else ((b, a), cost.T)
            self.edges[key] = self.edges[key] + oriented if key in self.edges else oriented

    def problem(self, problem: Problem, alive: list[np.ndarray], gathered: dict[int, np.ndarray]) -> Problem:
        """`problem` with these costs, the inserted copies' of scope `program`, and the candidates not `alive`
        forbidden."""
        unary = [u + gathered[g] if g in gathered else u.copy() for g, u in enumerate(self.unary)]
        for g, mask in enumerate(alive):
            unary[g][~mask] = FORBIDDEN
        return problem.with_table(problem.table, exchange=tuple(tuple(u.tolist()) for u in unary),
                                  edges=tuple(Edge(a, b, matrix) for (a, b), matrix in sorted(self.edges.items())))

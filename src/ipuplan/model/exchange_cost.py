"""The cost term of the plan's exchange (docs/EXCHANGE.md). Its proxy is each candidate's own estimate
(`Candidate.exchange_bytes`, `facts.exchange_proxy`); its exact price is every step `plan_exchange` prices, for every
pair of its two sides' candidate layouts (`facts.pair_exchange.pair_bytes`), and the copies scope `program` inserts.

A step between two free groups is a cost per pair of their candidates; within one group, or with one side frozen, a
cost of that group's candidates; between two frozen values, a constant. Pricing every pair costs seconds on the
reference plan (`benchmarks/pair_pricing.py`), so only the candidates `alive` are priced.

An `AxisFactorView` step is priced read both ways (`plan_exchange.OUTER`, `INNER`: the format does not say which the
compiler means): a pair of layouts whose readings send different bytes is forbidden, unless both sides place as the
input plan does (the compiler's own pair), so that the figure reported holds whichever reading the compiler uses.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ipuplan.facts import pair_exchange, price_store
from ipuplan.facts.plan_exchange import INNER, OUTER, priced_kind
from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.model.costs import CostTerm, Pricing
from ipuplan.plan.forked import Forked
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
            costs[chosen] = pair_exchange.matched_bytes(step.operation, source_shape, result_shape,
                                                        step.element_size, tuple(step.sources[c][1] for c in chosen),
                                                        tuple(step.results[c][1] for c in chosen), reading)
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
    return pair_exchange.alike_sides(step.operation, sides, source)


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


def gathered_exchange(candidates: tuple[Candidate, ...]) -> np.ndarray:
    """Per candidate, the bytes its inserted `Copy` steps send (scope `program`): steps the input plan does not
    have, so `priced_steps` cannot find them."""
    return np.fromiter((sum(g.exchange_bytes for g in c.gathers) for c in candidates), dtype=np.int64,
                       count=len(candidates))


def proxy_costs(space: CandidateSpace) -> list[np.ndarray]:
    """Per free group, each candidate's own estimate of the bytes it sends."""
    return [np.fromiter((c.exchange_bytes for c in group.candidates), dtype=np.int64, count=len(group.candidates))
            for group in space.free]


def exact_costs(facts: PlanFacts, space: CandidateSpace, alive: list[np.ndarray], pricing: Pricing,
                copies: int = 1) -> None:
    """Every priced step's bytes per pair of the `alive` candidates (a view pair whose readings differ forbidden in
    `strict`), and the bytes of the copies scope `program` inserts; in `copies` processes (`step_prices`)."""
    steps = priced_steps(facts, space)
    for step, (cost, differ) in zip(steps, step_prices(steps, alive, copies)):
        pricing.add(step.source_group, step.result_group, cost, differ)
    for g, group in enumerate(space.free):
        if group.kind == gather.KIND:
            pricing.add(g, None, gathered_exchange(group.candidates))


FORK_PAIRS = 2_000
"""Pairs of alive candidates from which, given two `copies`, about half of them are priced in a forked copy of the
process: on the reference plan, pricing its 827 candidates alive at the peak cold is the run's longest stage, and a
fork costs about 0.01 s."""

Prices = list[tuple[np.ndarray, np.ndarray | None]]
"""Per step, its `step_costs` and where its readings differ (None: both sides frozen)."""


def step_prices(steps: list[PricedStep], alive: list[np.ndarray], copies: int = 1) -> Prices:
    """Each step's costs and readings that differ, the same in any number of `copies`: with two and FORK_PAIRS pairs
    or more, the steps of about half the pairs are priced in a forked copy meanwhile (`plan.forked`: made here where
    no fork is allowed); steps that price alike go to the same process, which prices them once."""
    theirs = _their_share(steps, alive) if copies > 1 else set()
    with Forked(_prices_counted, [steps[k] for k in sorted(theirs)], alive, fork=bool(theirs)) as copy:
        mine = iter(_prices([step for k, step in enumerate(steps) if k not in theirs], alive))
        found, counted, pid = copy.result()
    if pid != os.getpid():  # priced in the copy: what it read from the store and kept there counts for the run
        price_store.add_counts(counted)
    found = iter(found)
    return [next(found) if k in theirs else next(mine) for k in range(len(steps))]


def _their_share(steps: list[PricedStep], alive: list[np.ndarray]) -> set[int]:
    """The steps a forked copy prices: of the steps' pricings (steps alike are one), the greatest first to whichever
    process has fewer pairs so far (a view's twice: both readings); none below FORK_PAIRS pairs, or where the store
    keeps the prices already (`_kept_before`)."""
    work: dict[tuple, list[int]] = {}
    pairs: dict[tuple, int] = {}
    for k, step in enumerate(steps):
        sources, results = (_alive_sides(sides, group, alive) for sides, group in
                            ((step.sources, step.source_group), (step.results, step.result_group)))
        key = (step.operation.text, step.element_size, step.kind == "one group", sources, results)
        work.setdefault(key, []).append(k)
        readings = 2 if step.operation.has_view and step.kind != "frozen" else 1  # `readings_differ` prices INNER too
        pairs[key] = readings * (len(sources) if step.kind == "one group" else len(sources) * len(results))
    if sum(pairs.values()) < FORK_PAIRS or _kept_before(steps, alive, [work[key][0] for key in pairs]):
        return set()
    shares, theirs = [0, 0], set()
    for key in sorted(pairs, key=lambda key: (-pairs[key], work[key][0])):
        lighter = int(shares[1] < shares[0])
        shares[lighter] += pairs[key]
        if lighter:
            theirs.update(work[key])
    return theirs


def _kept_before(steps: list[PricedStep], alive: list[np.ndarray], firsts: list[int]) -> bool:
    """Whether the price store keeps every price of the greatest pricing of two sides among `firsts` (a plan priced
    by an earlier run: its prices are read faster than a copy is forked and answers)."""
    sizes = {k: len(steps[k].sources) * len(steps[k].results) for k in firsts if steps[k].kind in ("two groups",
                                                                                                  "one free")}
    if not sizes:
        return False
    step = steps[max(sizes, key=lambda k: (sizes[k], -k))]
    source_alive, result_alive = (np.ones(1, dtype=bool) if g is None else alive[g]
                                  for g in (step.source_group, step.result_group))
    return all(pair_exchange.pairs_kept(step.operation, source_shape, result_shape, step.element_size,
                                        tuple(step.sources[i][1] for i in rows),
                                        tuple(step.results[j][1] for j in columns))
               for source_shape, rows in _by_shape(step.sources, source_alive).items()
               for result_shape, columns in _by_shape(step.results, result_alive).items())


def _alive_sides(sides: tuple[Side, ...], group: int | None, alive: list[np.ndarray]) -> tuple[Side, ...]:
    return sides if group is None else tuple(side for side, keep in zip(sides, alive[group].tolist()) if keep)


def _prices(steps: list[PricedStep], alive: list[np.ndarray]) -> Prices:
    everywhere = np.ones(1, dtype=bool)
    found = []
    for step in steps:
        a, b = step.source_group, step.result_group
        source_alive, result_alive = everywhere if a is None else alive[a], everywhere if b is None else alive[b]
        cost = step_costs(step, source_alive, result_alive)
        # both sides frozen: as the input writes them, whose readings are the compiler's own
        differ = None if step.kind == "frozen" else readings_differ(step, source_alive, result_alive, cost)
        found.append((cost, differ))
    return found


def _prices_counted(steps: list[PricedStep], alive: list[np.ndarray]) -> tuple[Prices, dict[str, int], int]:
    """`_prices`, with the prices read from the store and kept in it meanwhile, and the process that priced them."""
    before = price_store.counts()
    found = _prices(steps, alive)
    return found, {name: count - before[name] for name, count in price_store.counts().items()}, os.getpid()


TERM = CostTerm("exchange", proxy_costs, exact_costs, copies=True)

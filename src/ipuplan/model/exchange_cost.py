"""The cost term of the plan's exchange (docs/EXCHANGE.md). Its proxy is each candidate's own estimate
(`Candidate.exchange_bytes`, `facts.exchange_proxy`); its exact price is every step `plan_exchange` prices, for every
pair of its two sides' candidate layouts (`facts.pair_exchange.pair_bytes`), and the copies scope `program` inserts.

A step between two free groups is a cost per pair of their candidates; within one group, or with one side frozen, a
cost of that group's candidates; between two frozen values, a constant. Pricing every pair of the reference plan's
candidates costs 0.3 s (21,051 distinct pairs, `benchmarks/pair_pricing.py`), so only the candidates `alive` are
priced, in two processes where the run may use two cores (`step_prices`).

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
                processes: int = 1) -> None:
    """Every priced step's bytes per pair of the `alive` candidates (a view pair whose readings differ forbidden in
    `strict`), and the bytes of the copies scope `program` inserts; in up to two `processes` (`step_prices`)."""
    steps = priced_steps(facts, space)
    for step, (cost, differ) in zip(steps, step_prices(steps, alive, processes)):
        pricing.add(step.source_group, step.result_group, cost, differ)
    for g, group in enumerate(space.free):
        if group.kind == gather.KIND:
            pricing.add(g, None, gathered_exchange(group.candidates))


FORK_PAIRS = 2_000
"""Pairs of alive candidates from which, given two `processes`, about half of them are priced in a forked copy of the
process: on the reference plan, pricing its 827 candidates alive at the peak cold is the run's longest stage, and a
fork costs about 0.01 s."""

Prices = list[tuple[np.ndarray, np.ndarray | None]]
"""Per step, its `step_costs` and where its readings differ (None: both sides frozen)."""


def step_prices(steps: list[PricedStep], alive: list[np.ndarray], processes: int = 1) -> Prices:
    """Each step's costs and readings that differ, the same in one process or two: with two, FORK_PAIRS pairs or
    more and prices not kept by an earlier run, the steps of about half the pairs are priced in a forked copy
    meanwhile (`plan.forked`; made here where the copy cannot answer)."""
    theirs = _their_share(steps, alive) if processes > 1 else []
    if not theirs:
        return _prices(steps, alive)
    copied = set(theirs)
    with Forked(_packed_prices, [steps[k] for k in theirs], alive) as copy:
        mine = iter(_prices([step for k, step in enumerate(steps) if k not in copied], alive))
        packed, counted, pid = copy.result()
    if pid != os.getpid():  # priced in the copy: what it read from the store and kept there counts for the run
        price_store.add_counts(counted)
    found = dict(zip(theirs, packed))
    return [_unpacked(step, alive, found[k]) if k in copied else next(mine) for k, step in enumerate(steps)]


def _their_share(steps: list[PricedStep], alive: list[np.ndarray]) -> list[int]:
    """The steps a forked copy prices, in order: of the groups of steps that may share a price (`_sharing`, each
    priced in one process, as one process prices it), the greatest first to whichever process has fewer pairs so far
    (a pricing of steps whose alive sides place alike counted once, `_pricing`); none below FORK_PAIRS pairs, or where
    the store keeps the prices already (`_kept_before`)."""
    pricings = [_pricing(step, alive) for step in steps]
    groups = _sharing(steps, alive)
    work = [sum(dict(pricings[k] for k in group).values()) for group in groups]
    greatest = sorted(range(len(groups)), key=lambda g: (-work[g], groups[g][0]))
    if sum(work) < FORK_PAIRS or _kept_before(steps, alive, [k for g in greatest for k in groups[g]]):
        return []
    shares, theirs = [0, 0], []
    for g in greatest:
        lighter = int(shares[1] < shares[0])
        shares[lighter] += work[g]
        if lighter:
            theirs += groups[g]
    return sorted(theirs)


def _pricing(step: PricedStep, alive: list[np.ndarray]) -> tuple[tuple, int]:
    """What a step's pricing is cached by (steps with one key are priced once), and its pairs (a view's twice:
    `readings_differ` prices the INNER reading too)."""
    sources, results = (_alive_placements(sides, group, alive) for sides, group in
                        ((step.sources, step.source_group), (step.results, step.result_group)))
    readings = 2 if step.operation.has_view and step.kind != "frozen" else 1
    pairs = len(sources) if step.kind == "one group" else len(sources) * len(results)
    return (step.operation.text, step.element_size, step.kind == "one group", sources, results), readings * pairs


def _sharing(steps: list[PricedStep], alive: list[np.ndarray]) -> list[list[int]]:
    """The steps in groups none of which can share a kept price with another (`price_store.step_key`: the operation,
    the element size and the shapes of a pair of alive sides), each group in order."""
    root = list(range(len(steps)))

    def found(k: int) -> int:
        while root[k] != k:
            root[k] = k = root[root[k]]
        return k

    first: dict[tuple, int] = {}
    for k, step in enumerate(steps):
        source_alive, result_alive = _alive_masks(step, alive)
        for source_shape in _by_shape(step.sources, source_alive):
            for result_shape in _by_shape(step.results, result_alive):
                token = (step.operation.text, step.element_size, source_shape, result_shape)
                root[found(k)] = found(first.setdefault(token, k))
    groups: dict[int, list[int]] = {}
    for k in range(len(steps)):
        groups.setdefault(found(k), []).append(k)
    return list(groups.values())


def _alive_placements(sides: tuple[Side, ...], group: int | None, alive: list[np.ndarray]) -> frozenset:
    """The (shape, `pair_exchange.placement_key`) of a step side's alive candidates."""
    kept = sides if group is None else (side for side, keep in zip(sides, alive[group].tolist()) if keep)
    return frozenset((shape, pair_exchange.placement_key(layout)) for shape, layout in kept)


def _kept_before(steps: list[PricedStep], alive: list[np.ndarray], firsts: list[int]) -> bool:
    """Whether the price store keeps every price of the first pricing of two sides among `firsts` (the greatest, of a
    plan priced by an earlier run: its prices are read faster than a copy is forked and answers)."""
    step = next((steps[k] for k in firsts if steps[k].kind in ("two groups", "one free")), None)
    if step is None or price_store.opened() is None:
        return False
    source_alive, result_alive = _alive_masks(step, alive)
    blocks = [(source_shape, rows, result_shape, columns)
              for source_shape, rows in _by_shape(step.sources, source_alive).items()
              for result_shape, columns in _by_shape(step.results, result_alive).items()]
    return bool(blocks) and all(
        pair_exchange.pairs_kept(step.operation, source_shape, result_shape, step.element_size,
                                 tuple(step.sources[i][1] for i in rows), tuple(step.results[j][1] for j in columns))
        for source_shape, rows, result_shape, columns in blocks)


def _alive_masks(step: PricedStep, alive: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Which of the step's sources and results are alive (a frozen side's one)."""
    everywhere = np.ones(1, dtype=bool)
    return tuple(everywhere if g is None else alive[g] for g in (step.source_group, step.result_group))


def _prices(steps: list[PricedStep], alive: list[np.ndarray]) -> Prices:
    found = []
    for step in steps:
        source_alive, result_alive = _alive_masks(step, alive)
        cost = step_costs(step, source_alive, result_alive)
        # both sides frozen: as the input writes them, whose readings are the compiler's own
        differ = None if step.kind == "frozen" else readings_differ(step, source_alive, result_alive, cost)
        found.append((cost, differ))
    return found


def _packed_prices(steps: list[PricedStep], alive: list[np.ndarray]) -> tuple[Prices, dict[str, int], int]:
    """`_prices` at the alive candidates only (what a copy sends back: every other entry is 0, or False), with the
    prices read from the store and kept in it meanwhile, and the process that priced them."""
    before = price_store.counts()
    packed = [tuple(None if found is None else found[_alive_at(step, alive)] for found in prices)
              for step, prices in zip(steps, _prices(steps, alive))]
    return packed, {name: count - before[name] for name, count in price_store.counts().items()}, os.getpid()


def _unpacked(step: PricedStep, alive: list[np.ndarray], packed: tuple) -> tuple[np.ndarray, np.ndarray | None]:
    """A step's prices from `_packed_prices`' at its alive candidates."""
    shape = (len(step.sources),) if step.kind == "one group" else (len(step.sources), len(step.results))
    found = []
    for kind, part in zip((np.int64, bool), packed):
        if part is not None:
            whole = np.zeros(shape, dtype=kind)
            whole[_alive_at(step, alive)] = part
            part = whole
        found.append(part)
    return found[0], found[1]


def _alive_at(step: PricedStep, alive: list[np.ndarray]) -> tuple:
    """Where a step's prices (shaped as `step_costs`) are its alive candidates'."""
    source_alive, result_alive = _alive_masks(step, alive)
    if step.kind == "one group":
        return (np.flatnonzero(source_alive),)
    return np.ix_(np.flatnonzero(source_alive), np.flatnonzero(result_alive))


TERM = CostTerm("exchange", proxy_costs, exact_costs, parallel=True)

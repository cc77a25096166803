"""The cost term of the plan's exchange (`model.exchange_cost`): the steps it prices are the steps `plan_exchange`
prices, each at the input's candidates what the input plan sends there, and the exact costs of the input choice sum
to the plan's own exchange, the frozen steps as the constant; priced in two processes, the same costs."""

from __future__ import annotations

import os

import numpy as np
from test_price_store import _forget

from ipuplan.facts import price_store
from ipuplan.facts.plan_exchange import plan_exchange
from ipuplan.model import exchange_cost
from ipuplan.model.costs import Pricing
from ipuplan.model.exchange_cost import _their_share, exact_costs, priced_steps, step_costs, step_prices
from ipuplan.plan.forked import in_a_copy


def test_every_priced_step_is_one_the_plan_prices(prepared, priced):
    """The steps the model prices are those `plan_exchange` prices (each once), and pairs of two free groups are
    edges: a plan's model with kernel families has some."""
    steps = priced_steps(prepared.facts, prepared.space)
    assert sorted(s.step for s in steps) == sorted(s.step for s in plan_exchange(prepared.facts.plan).steps)
    two_groups = {tuple(sorted((s.source_group, s.result_group))) for s in steps if s.kind == "two groups"}
    assert {(e.a, e.b) for e in priced.problem.edges} == two_groups
    assert priced.problem.table is prepared.problem.table  # the same rows, not laid flat again


def test_at_the_input_each_step_costs_what_the_input_plan_sends_there(prepared):
    facts, space = prepared.facts, prepared.space
    sent = {s.step: s.bytes for s in plan_exchange(facts.plan).steps}
    kinds = set()
    for step in priced_steps(facts, space):
        source, result = (0 if g is None else space.free[g].input_index for g in (step.source_group,
                                                                                 step.result_group))
        costs = step_costs(step, np.ones(len(step.sources), dtype=bool), np.ones(len(step.results), dtype=bool))
        assert (costs[source] if step.kind == "one group" else costs[source, result]) == sent[step.step], step.step
        kinds.add(step.kind)
    assert len(kinds) >= 3  # frozen or one free side, and pairs of two groups, in either scope


def test_the_input_choice_costs_the_plans_exchange_its_frozen_steps_as_the_constant(prepared):
    facts, space = prepared.facts, prepared.space
    pricing = Pricing.zero(tuple(len(group.candidates) for group in space.free))
    exact_costs(facts, space, [np.ones(len(group.candidates), dtype=bool) for group in space.free], pricing)
    chosen = tuple(group.input_index for group in space.free)
    varying = sum(int(pricing.priced.unary[g][c]) for g, c in enumerate(chosen)) + sum(
        int(costs[chosen[a], chosen[b]]) for (a, b), costs in pricing.priced.edges.items())
    sent = {s.step: s.bytes for s in plan_exchange(facts.plan).steps}
    frozen = sum(sent[s.step] for s in priced_steps(facts, space) if s.kind == "frozen")
    assert pricing.constant == frozen and pricing.constant + varying == plan_exchange(facts.plan).total


def _same_prices(these, those) -> bool:
    return len(these) == len(those) and all(
        np.array_equal(cost, other) and (differ is None) == (other_differ is None)
        and (differ is None or np.array_equal(differ, other_differ))
        for (cost, differ), (other, other_differ) in zip(these, those))


def _some_alive(space, seed: int) -> list[np.ndarray]:
    """About two candidates in three alive, one at least in each group."""
    rng = np.random.default_rng(seed)
    alive = [rng.random(len(group.candidates)) < 0.7 for group in space.free]
    for mask in alive:
        mask[rng.integers(len(mask))] = True
    return alive


def test_two_processes_price_what_one_does_a_forked_copy_pricing_about_half(prepared, forks_allowed, monkeypatch,
                                                                           tmp_path):
    """With two processes the steps of about half the pairs are priced in a forked copy: the same costs, in step
    order (sent back at the alive candidates only), and what the copy kept in the store counted for the run (a count
    the copy alone knows), the same as one process keeps; none where an earlier run kept the prices."""
    monkeypatch.setattr(exchange_cost, "FORK_PAIRS", 100)
    steps = priced_steps(prepared.facts, prepared.space)
    alive = _some_alive(prepared.space, 5)
    theirs = _their_share(steps, alive)
    assert 0 < len(theirs) < len(steps)
    monkeypatch.setenv(price_store.CACHE_VARIABLE, str(tmp_path / "one"))
    _forget()
    before = price_store.counts()["kept"]
    alone = step_prices(steps, alive, processes=1)
    kept_alone = price_store.counts()["kept"] - before
    before = price_store.counts()
    assert not _their_share(steps, alive)  # priced by an earlier run: read here, faster than a copy answers
    assert price_store.counts() == before  # asking the store is not reading its prices
    monkeypatch.setenv(price_store.CACHE_VARIABLE, str(tmp_path / "two"))
    _forget()
    assert _their_share(steps, alive) == theirs
    copied, add_counts = [], price_store.add_counts
    monkeypatch.setattr(price_store, "add_counts", lambda counted: (copied.append(counted), add_counts(counted)))
    before = price_store.counts()["kept"]
    two = step_prices(steps, alive, processes=2)
    kept_two = price_store.counts()["kept"] - before
    _forget()
    assert _same_prices(two, alone)
    assert len(copied) == 1 and 0 < copied[0]["kept"] < kept_alone  # the copy's part, counted once
    assert kept_two == kept_alone  # steps that price alike priced in one process, once


def test_a_copy_that_dies_leaves_its_steps_priced_here_counted_once(prepared, forks_allowed, monkeypatch, tmp_path):
    steps = priced_steps(prepared.facts, prepared.space)
    alive = [np.ones(len(group.candidates), dtype=bool) for group in prepared.space.free]
    monkeypatch.setenv(price_store.CACHE_VARIABLE, str(tmp_path / "one"))
    _forget()
    before = price_store.counts()
    alone = step_prices(steps, alive, processes=1)
    counted_alone = {name: count - before[name] for name, count in price_store.counts().items()}
    monkeypatch.setenv(price_store.CACHE_VARIABLE, str(tmp_path / "two"))
    _forget()
    prices = exchange_cost._prices
    monkeypatch.setattr(exchange_cost, "_prices", lambda *arguments: os._exit(1) if in_a_copy() else prices(*arguments))
    before = price_store.counts()
    two = step_prices(steps, alive, processes=2)
    counted_two = {name: count - before[name] for name, count in price_store.counts().items()}
    _forget()
    assert _same_prices(two, alone) and counted_two == counted_alone


def test_too_few_pairs_are_priced_here_alone(prepared, forks_allowed, monkeypatch):
    steps = priced_steps(prepared.facts, prepared.space)
    alive = [np.zeros(len(group.candidates), dtype=bool) for group in prepared.space.free]
    for mask in alive:
        mask[0] = True
    alone = step_prices(steps, alive, processes=1)
    monkeypatch.setattr(exchange_cost, "Forked", None)  # no copy is even asked for
    assert _same_prices(step_prices(steps, alive, processes=2), alone)

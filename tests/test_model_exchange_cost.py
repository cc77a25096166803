"""The cost term of the plan's exchange (`model.exchange_cost`): the steps it prices are the steps `plan_exchange`
prices, each at the input's candidates what the input plan sends there, and the exact costs of the input choice sum
to the plan's own exchange, the frozen steps as the constant."""

from __future__ import annotations

import numpy as np

from ipuplan.facts.plan_exchange import plan_exchange
from ipuplan.model.costs import Pricing
from ipuplan.model.exchange_cost import exact_costs, priced_steps, step_costs


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

"""When each value is live (`facts.liveness`): the first and last step whose live set lists it, the values born and
dying at each step, and the live sets laid end to end for the estimate's sums, all as the steps list them."""

from __future__ import annotations

from itertools import chain

from reference import with_step

from ipuplan.facts.liveness import live_entries, liveness


def steps_listing(plan) -> dict[int, list[int]]:
    """Per value, the steps whose live set lists it, read from the steps one by one."""
    found = {value.id: [] for value in plan.values}
    for step in plan.steps:
        for value_id in step.live:
            found[value_id].append(step.index)
    return found


def test_first_and_last_are_the_first_and_last_steps_that_list_a_value(reference_plan):
    live, listing = liveness(reference_plan), steps_listing(reference_plan)
    assert live.first == tuple(steps[0] if steps else -1 for steps in listing.values())
    assert live.last == tuple(steps[-1] if steps else -1 for steps in listing.values())
    assert [live.is_live(v) for v in listing] == [bool(steps) for steps in listing.values()]
    assert not all(live.is_live(v) for v in listing)  # body arguments: their layers' storage is listed instead


def test_each_step_has_the_values_born_and_dying_there_in_increasing_id(reference_plan):
    live, listing = liveness(reference_plan), steps_listing(reference_plan)
    for step in reference_plan.steps:
        assert live.born_at[step.index] == tuple(v for v, steps in listing.items() if steps and steps[0] == step.index)
        assert live.dies_at[step.index] == tuple(v for v, steps in listing.items() if steps and steps[-1] == step.index)


def test_a_value_no_step_lists_any_more_is_not_live(reference_plan):
    value = reference_plan.steps[20].live[0]
    plan = reference_plan
    for step in steps_listing(reference_plan)[value]:
        plan = with_step(plan, step, live=[v for v in plan.steps[step].live if v != value])
    live = liveness(plan)
    assert live.is_live(value) is False and (live.first[value], live.last[value]) == (-1, -1)
    assert value not in chain.from_iterable(live.born_at) and value not in chain.from_iterable(live.dies_at)


def test_the_live_entries_are_the_live_sets_end_to_end_and_read_only(reference_plan):
    lengths, value_of = live_entries(reference_plan)
    assert lengths.tolist() == [len(step.live) for step in reference_plan.steps]
    assert value_of.tolist() == list(chain.from_iterable(step.live for step in reference_plan.steps))
    kept = liveness(reference_plan).entries
    assert [entry.tolist() for entry in kept] == [lengths.tolist(), value_of.tolist()]
    assert not any(entry.flags.writeable for entry in kept)  # shared with the estimate: nobody may change them

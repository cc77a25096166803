"""The copies scope `program` inserts (`replan.gathers`): per chosen gather a `Copy` right before its reading step and
the value it makes, read back from the written plan alone, and taken out again to give the input's timeline."""

from __future__ import annotations

import pytest
from reference import ALL_PLANS

from ipuplan import dump_plan, load_plan
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.replan.gathers import chosen_gathers, gathered_name, inserted_gathers, with_gathers, without_gathers
from ipuplan.replan.pipeline import optimize
from ipuplan.space.scopes import candidate_space


@pytest.mark.parametrize("path", ALL_PLANS[:2], ids=lambda p: p.name)
def test_program_gathers_each_parameter_into_its_input_layout_live_only_around_its_reader(path):
    plan = load_plan(path)
    result = optimize(plan, workers=1, time_limit=10, scope="program")
    written, facts = result.plan, result.facts
    originals = [step for step in written.steps if step.index not in {g.step for g in result.inserted}]
    assert [step.index for step in written.steps] == list(range(len(written.steps)))
    assert len(originals) == len(plan.steps) and len(written.values) == len(plan.values) + len(result.inserted)
    for gather in result.inserted:
        value, parameter = written.values[gather.value], plan.values[gather.parameter]
        assert gather.value >= len(plan.values) and parameter.storage_group == value.storage_group
        assert (value.layout, value.memory_class, value.shape) == (parameter.layout, parameter.memory_class,
                                                                   parameter.shape)
        assert written.values[gather.parameter].layout != parameter.layout  # stored otherwise: it was worth it
        copy = written.steps[gather.step]
        reading = written.steps[gather.reading_step]
        assert copy.parsed_operation.kind == "Copy" and (copy.source, copy.execution_count) == (
            reading.source, reading.execution_count)
        live_at = [s.index for s in written.steps if gather.value in s.live]
        assert live_at == list(range(gather.step, gather.reading_step + 1))
        assert all(written.steps[s].index in {g.step for g in result.inserted} for s in live_at[:-1])
    # every original step keeps its live set, apart from the copies made for it
    for old, new in zip(plan.steps, originals):
        assert [v for v in new.live if v < len(plan.values)] == old.live
    # the exchange reported is the written plan's, the copies' moves included, each priced from its parameter
    assert result.exchange_after == result.model_exchange_after
    assert {(e.source, e.result) for e in result.output_exchange.steps if e.result >= len(plan.values)} == {
        (g.parameter, g.value) for g in result.inserted}
    assert facts.flow.ambiguities == ()


def test_the_copies_inserted_are_read_back_from_the_plan_and_taken_out_again(reference_plan, facts):
    space = candidate_space(facts, "program")
    choice = [group.input_index for group in space.free]
    gathered = [g for g, group in enumerate(space.free) if group.kind == "gather"]
    for g in gathered[:2] + gathered[4:5]:  # two body arguments read at two steps each, and one parameter read once
        choice[g] = next(k for k, candidate in enumerate(space.free[g].candidates) if candidate.gathers)
    chosen = chosen_gathers(space, tuple(choice))
    written = with_gathers(reference_plan, space, tuple(choice), facts.live.born_at)
    assert (len(written.values), len(written.steps)) == (len(reference_plan.values) + len(chosen),
                                                         len(reference_plan.steps) + len(chosen))
    inserted = inserted_gathers(len(reference_plan.values), plan_facts(written))
    assert [(g.parameter, g.reading_step - sum(h.step < g.reading_step for h in inserted)) for g in inserted] == [
        (parameter, step) for step, parameter, _ in chosen]  # each before the step that reads it, in that order
    for gather in inserted:
        reading = written.steps[gather.reading_step]
        assert written.steps[gather.step].index == gather.step < gather.reading_step
        assert gather.name == written.values[gather.value].name == gathered_name(
            reading.source, reference_plan.values[gather.parameter], gather.reading_step)
    assert dump_plan(without_gathers(written, inserted)) == dump_plan(reference_plan)


def test_a_copy_is_named_after_the_operation_the_parameter_and_the_reading_step(reference_plan):
    argument = reference_plan.values[49]
    assert argument.name == "vit.encoder.attention_norm.scale (body argument)"
    assert gathered_name(3, argument, 9) == "operation 3 gather of vit.encoder.attention_norm.scale for step 9"

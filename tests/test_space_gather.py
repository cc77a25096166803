"""Freedom level `gather` (space/levels/gather.py, scope `program` only): a parameter only kernels read is stored
sharded and gathered into the layout its kernel reads by a `Copy` before each reading step; a group some step writes
is never gathered, and a copy into the layout it is stored in sends nothing."""

from __future__ import annotations

from ipuplan.space.levels import gather
from ipuplan.space.rules import context_of
from ipuplan.space.scopes import candidate_space


def test_scope_program_gathers_the_parameters_only_kernels_read_at_each_reading_step(reference_plan, facts):
    context = context_of(facts)
    gathered = [group for group in candidate_space(facts, "program").free if group.kind == gather.KIND]
    assert gathered
    for group in gathered:
        values = [reference_plan.values[m] for m in group.members]
        steps = gather.reading_steps(context, group.members)
        assert steps and group.input_index == 0 and not group.input.gathers
        assert group.input.layouts == tuple(value.parsed_layout for value in values)
        copied = [c for c in group.candidates if c.gathers]
        assert copied and all(c.label.startswith("gathered at step") for c in copied)
        for candidate in copied:
            assert [g.step for g in candidate.gathers] == list(steps)
            for copy in candidate.gathers:
                assert copy.position == gather.read_member(context, group.members, copy.step)
                assert copy.layout == values[copy.position].parsed_layout  # the layout its kernel reads
                assert copy.exchange_bytes == gather.gather_exchange(tuple(values[0].shape), values[0].element_size,
                                                                     candidate.layouts[0], copy.layout)


def test_a_group_some_step_writes_is_never_gathered(facts):
    context = context_of(facts)
    written = [group for group in context.groups if any(facts.flow.writers.get(m) for m in group)]
    assert written and not any(gather.gatherable(context, group, frozenset()) for group in written)
    alone = gather.gather_level(context, context.groups)
    assert alone.free and not any(group.members in written for group in alone.free)


def test_a_copy_into_the_layout_it_is_stored_in_sends_nothing(reference_plan):
    for value in (reference_plan.values[m] for m in (28, 49)):
        layout = value.parsed_layout
        assert gather.gather_exchange(tuple(value.shape), value.element_size, layout, layout) == 0

"""What every freedom level shares (`space.rules`): the layout groups, and the freeze rules that hold a group unless
every step that touches it is proven to accept another layout, each with its typed reason."""

from __future__ import annotations

from collections import Counter

import pytest
from reference import with_step, with_value

from ipuplan.facts.plan_facts import plan_facts
from ipuplan.plan.layout import parse_layout
from ipuplan.space import rules
from ipuplan.space.rules import context_of, freeze_reason, kernels_at, moved_tensors, unknown_layout_parts
from ipuplan.space.scopes import candidate_space
from ipuplan.space.types import Freeze, FreezeReason


def test_frozen_groups_say_why(reference_plan, spaces):
    space = spaces["storage"]
    reasons = {m: str(g.reason) for g in space.frozen for m in g.members}
    assert reasons[136].startswith("read by Gemm at step 12")
    assert reasons[4].startswith("may be read by LayerNorm at step 8")  # a norm parameter: the kernel that may read it
    assert reasons[63].startswith("read by Convert at step 10")  # LocalKernel keeps its input's tiling
    assert reasons[145].startswith("read by Gemm at step 29")  # the attention product (no family yet)
    assert set(space.reasons()) == {v.id for v in reference_plan.values}  # every value: free, or frozen and why
    assert all(isinstance(g.reason, FreezeReason) for g in space.frozen)  # typed, not a bare string


@pytest.mark.parametrize("scope", ["storage", "kernels"])
def test_frozen_reasons_name_what_holds_a_value(reference_plan, spaces, scope):
    """A loop body's bias or norm parameter never dies at the kernel that reads it: the reason names that kernel
    (an operand the dataflow does not show), never 'no reader identified'; a value no step holds says so."""
    reasons = spaces[scope].reasons()
    assert not [v for v, reason in reasons.items() if reason is not None and reason.kind is Freeze.NO_READER]
    qkv_bias = reasons[52]  # vit.encoder.attention.qkv.bias (body argument), added to the qkv Gemm's result
    assert reference_plan.values[52].name == "vit.encoder.attention.qkv.bias (body argument)"
    assert (qkv_bias.kind, qkv_bias.step, qkv_bias.operation) == (Freeze.UNSHOWN_READ, 15, "Add")
    assert str(qkv_bias).startswith("may be read by Add at step 15 (an operand the dataflow does not show")
    scale = reasons[49]  # vit.encoder.attention_norm.scale (body argument)
    assert (scale.kind, scale.operation, scale.step) == (Freeze.UNSHOWN_READ, "LayerNorm", 8)
    assert [v for v, reason in reasons.items() if reason is not None and reason.kind is Freeze.NEVER_LIVE] == [
        72, 73, 111, 112]
    assert all(not any(v in s.live for s in reference_plan.steps) for v in (72, 73, 111, 112))


def test_an_unknown_operation_freezes_what_is_live_there(reference_plan, spaces):
    step = 19  # a Copy where 13 values of free storage groups are live
    free_before = {m for g in spaces["storage"].free for m in g.members} & set(reference_plan.steps[step].live)
    assert free_before
    mutated = with_step(reference_plan, step, operation="FancyFusedThing { lanes: 4 }")
    reasons = candidate_space(plan_facts(mutated), "storage").reasons()
    assert not [v for v in reference_plan.steps[step].live if reasons.get(v, "absent") is None]
    for value in free_before:
        reason = reasons[value]
        assert (reason.kind, reason.step, reason.operation) == (Freeze.UNKNOWN_OPERATION, step, "FancyFusedThing")


def test_aliases_and_a_body_argument_with_its_layers_are_one_layout_group(reference_plan, facts):
    context = context_of(facts)
    assert Counter(m for group in context.groups for m in group) == Counter(range(len(reference_plan.values)))
    for argument, layers in facts.flow.bindings.items():
        assert set(layers) | {argument} <= set(context.group_of[argument])
    for value in reference_plan.values:
        assert context.group_of[value.root] == context.group_of[value.id]  # an in-place alias and its storage
    assert context.movers == {step.index for step in reference_plan.steps if step.parsed_operation.is_mover}


def test_a_group_whose_members_differ_is_frozen_naming_two_of_them(reference_plan):
    # layer 0's and layer 1's qkv weights and their body argument (8, 9, 51): one layout group
    layout = reference_plan.values[9].layout.replace("partitions: 36", "partitions: 18", 1)
    context = context_of(plan_facts(with_value(reference_plan, 9, layout=layout)))
    assert freeze_reason(context, (8, 9, 51)) == FreezeReason(Freeze.MEMBERS_DIFFER, detail="values 8 and 9")
    assert freeze_reason(context_of(plan_facts(reference_plan)), (8, 9, 51)) is None  # as written: free to move


def test_the_unknown_parts_of_a_layout_are_named_and_a_known_layout_has_none(reference_plan):
    known = reference_plan.values[9].layout
    assert unknown_layout_parts(known) == ()
    assert unknown_layout_parts(known.replace("padding: Zero", "padding: Mirror", 1)) == ("padding Mirror",)
    spiral = reference_plan.values[84].layout.replace("order: RowMajor", "order: SpiralMajor")
    assert unknown_layout_parts(spiral) == ("order SpiralMajor",)


def test_a_kernel_read_is_named_with_its_step_and_the_kernels_of_a_family_by_step(facts):
    context = context_of(facts)
    assert freeze_reason(context, (136,)) == FreezeReason(Freeze.READ_BY_KERNEL, 12, "Gemm")
    assert freeze_reason(context, (136,), kernel_steps=frozenset({12, 13})) is None  # its Gemm family re-lays it out
    assert kernels_at(facts, {13, 12}) == ((12, "Gemm"), (13, "Sum"))


def _freeze_reason_read_in_full(context, members, kernel_steps=frozenset()):
    """`freeze_reason` as written before its shortcuts: every rule tested in order, for every group (the first ones,
    which the shortcut skips for most groups, are `_early_reason`, its code unchanged)."""
    facts = context.facts
    plan, flow = facts.plan, facts.flow
    early = rules._early_reason(context, members)
    if early is not None:
        return early
    readers = sorted({s for m in members for s in flow.readers.get(m, ())})
    writers = sorted({s for m in members for s in flow.writers.get(m, ())})
    if not readers:
        unread = rules._unread(context, members, kernel_steps)
        if unread is not None:
            return unread
    for step in readers + writers:
        if step not in context.movers and step not in kernel_steps:
            kind = Freeze.READ_BY_KERNEL if step in readers else Freeze.WRITTEN_BY_KERNEL
            return FreezeReason(kind, step, plan.steps[step].parsed_operation.kind)
    if not kernel_steps and any(m in facts.amp_aligned for m in members):
        return FreezeReason(Freeze.AMP_ALIGNED)
    return None


def _mutants(plan):
    """The reference plan, and copies where a rule before the readers holds some group: a layout part ipuplan does
    not know, a layer laid out apart from its group, an ambiguous source, an unknown operation."""
    mirror = plan.values[9].layout.replace("padding: Zero", "padding: Mirror", 1)
    apart = plan.values[9].layout.replace("partitions: 36", "partitions: 18", 1)
    spiral = plan.values[84].layout.replace("order: RowMajor", "order: SpiralMajor")  # a group of its own
    return [plan, with_value(plan, 9, layout=mirror), with_value(plan, 8, layout=apart),
            with_value(plan, 84, layout=spiral),
            with_value(plan, 139, shape=[16, 729, 800]), with_step(plan, 19, operation="FancyFusedThing { lanes: 4 }")]


def test_the_freeze_rules_shortcuts_give_what_testing_every_rule_gives(reference_plan):
    """The shortcuts of `freeze_reason` (a group of one layout and no flagged member skips the first rules; one
    member's readers taken as found) change no reason, whichever rule holds the group and whatever steps a family
    re-lays out with it."""
    held = Counter()
    for plan in _mutants(reference_plan):
        facts = plan_facts(plan)
        context = context_of(facts)
        families = [frozenset(), *(f.steps for f in facts.families), *(f.steps for f in facts.elementwise)]
        for members in context.groups:
            for kernel_steps in families:
                found = freeze_reason(context, members, kernel_steps)
                assert found == _freeze_reason_read_in_full(context, members, kernel_steps), (members, kernel_steps)
                held[found.kind if found else None] += 1
    assert {Freeze.UNKNOWN_LAYOUT, Freeze.MEMBERS_DIFFER, Freeze.AMBIGUITY, Freeze.UNKNOWN_OPERATION,
            Freeze.READ_BY_KERNEL, Freeze.WRITTEN_BY_KERNEL, None} <= set(held)


def test_the_operation_tests_of_a_context_are_each_steps_own(reference_plan):
    unknown_at = 19
    plan = with_step(reference_plan, unknown_at, operation="FancyFusedThing { lanes: 4 }")
    context = context_of(plan_facts(plan))
    assert context.movers == {step.index for step in plan.steps if step.parsed_operation.is_mover}
    assert unknown_at not in context.movers
    for value in plan.values:
        expected = tuple(s.index for s in plan.steps if not s.parsed_operation.is_known and value.root in s.live)
        assert context.unknown_steps_of[value.id] == expected


def test_a_move_is_made_of_the_other_sides_layout_as_it_is_now(reference_plan, facts):
    """`moved_tensors` makes each distinct move once: a value laid out otherwise is a move of its new layout."""
    members = (63,)  # read by the Convert at step 10 (written by a Copy): moves on both sides
    before = moved_tensors(facts, members)
    assert before and len(before) == len(_other_sides(facts, members))
    for move, other in zip(before, _other_sides(facts, members)):
        assert move.other == facts.plan.values[other].parsed_layout
        assert move.other_shape == tuple(facts.plan.values[other].shape)
    other = _other_sides(facts, members)[0]
    layout = reference_plan.values[other].layout.replace("Ipu21Standard", "Ipu21Interleaved")
    assert layout != reference_plan.values[other].layout
    changed = plan_facts(with_value(reference_plan, other, layout=layout, memory_class="Ipu21Interleaved"))
    assert moved_tensors(changed, members)[0].other == parse_layout(layout) != before[0].other


def _other_sides(facts, members):
    flow = facts.flow
    return [other for m in members for step in (*flow.readers.get(m, ()), *flow.writers.get(m, ()))
            for other in (flow.steps[step].writes if m in flow.steps[step].reads or m in flow.bindings
                          else flow.steps[step].reads) if other not in members]

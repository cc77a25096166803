from __future__ import annotations

import pytest
from reference import with_value

from ipuplan.facts.dataflow import (
    SAME_STORAGE_GROUP,
    _Inference,
    _tree_roots,
    dataflow,
    gemm_families,
    layout_group_of,
    rewritten_dataflow,
)
from ipuplan.facts.liveness import liveness


@pytest.fixture(scope="module")
def flow(reference_plan):
    return dataflow(reference_plan)


@pytest.mark.parametrize(
    ("step", "reads", "writes"),
    [
        (0, (0,), (43,)),  # Convert LocalKernel at step 0: the only value of its storage group that dies
        (2, (1, 134), (135,)),  # a Gemm reads exactly the two values that die at it
        (5, (2, 45), (46,)),  # in-place Add: result `operation 1 result 0`, an alias of 45
        (7, (48,), (61,)),  # a conversion inside the loop reads the body argument
        (11, (51,), (136,)),  # the weight Copy reads the body argument, not layer 0 or 1
        (16, (67,), (68,)),  # slice copy reads the latest in-place version of qkv
        (51, (88,), (89,)),  # conversion reads the in-place alias 88 of 87 (PLAN_FORMAT.md)
        (62, (97,), (98,)),  # after the loop: the Repeat result
    ],
)
def test_reads_and_writes(flow, step, reads, writes):
    assert (flow.steps[step].reads, flow.steps[step].writes) == (reads, writes)


def test_repeat_boundary_releases_layer_parameters(flow):
    assert flow.steps[61].releases == tuple(range(4, 28))
    assert (flow.steps[61].reads, flow.steps[61].writes) == ((45,), (97,))  # the loop result, in place


def test_program_inputs_and_bindings(flow):
    assert flow.inputs == tuple(range(43))
    assert flow.bindings[51] == (8, 9)
    assert flow.bindings[48] == (47,)
    assert flow.readers[9] == (11,)  # layer 1's weight is read through its body argument


def test_a_copy_that_crops_padding_reads_the_larger_value(flow):
    # 144 [16,729,784] -> 145 [16,729,768]: the one live value larger on one axis only; 139 [16,729,80] is smaller
    assert (flow.steps[27].reads, flow.steps[27].writes) == ((144,), (145,))
    assert (flow.steps[85].reads, flow.steps[85].writes) == ((165,), (166,))
    assert flow.ambiguities == ()


def test_ambiguity_is_reported_not_guessed_and_suspects_only_what_could_be_read(reference_plan):
    # two crops of the same size are possible sources: the step stays ambiguous, and only the values that
    # differ from the result on one axis are suspects (not the rank-3 norm parameters that are also live)
    ambiguous = with_value(reference_plan, 139, shape=[16, 729, 800])
    found = next(a for a in dataflow(ambiguous).ambiguities if a.step == 27)
    assert set(found.suspects) == {145, 139, 144}


def test_gemm_families(flow):
    family = next(f for f in flow.families if f.gemm_step == 12)
    assert (family.left, family.left_source, family.right, family.right_source) == (64, 63, 136, 51)
    assert (family.partials, family.sum_step, family.sum_result) == (137, 13, 65)
    assert len(flow.families) == 14


def _one_storage_group(plan, count):
    """The plan with its first `count` values in value 0's storage group: a group larger than any live set."""
    values = [v.model_copy(update={"storage_group": plan.values[0].storage_group}) if v.id < count else v
              for v in plan.values]
    return plan.model_copy(update={"timeline": plan.timeline.model_copy(update={"values": values})})


def test_a_conversions_source_is_found_among_its_storage_group_as_among_every_readable_value(reference_plan,
                                                                                            monkeypatch):
    """`same_storage` (the result's storage group searched) finds the values the whole live set gives, and so the
    same source, in every state of the inference: aliases written or not yet, and a group larger than the live set."""
    found_by_group = _Inference.same_storage
    larger = []

    def checked(self, step, result):
        found = found_by_group(self, step, result)
        everywhere = self.alike(SAME_STORAGE_GROUP, self.readable(step, result), result)
        assert sorted(set(found)) == sorted(set(everywhere))
        assert self.preferred(step, result, found) == self.preferred(step, result, everywhere)
        members = self.storage_group_members[self.storage_groups[result]]
        larger.append(len(members) > len(step.live))
        return found

    monkeypatch.setattr(_Inference, "same_storage", checked)
    for plan in (reference_plan, _one_storage_group(reference_plan, 80)):
        dataflow(plan)
    assert True in larger and False in larger


def test_layout_groups_are_the_roots_union_find_gives(reference_plan):
    flow = dataflow(reference_plan)
    parent = list(range(len(reference_plan.values)))

    def find(v):
        while parent[v] != v:
            v = parent[v]
        return v

    for value in reference_plan.values:
        parent[find(value.id)] = find(value.root)
    for argument, members in flow.bindings.items():
        for member in members:
            parent[find(argument)] = find(member)
    assert layout_group_of(reference_plan, flow.bindings) == [find(v) for v in range(len(parent))]


def test_the_roots_of_a_forest_are_found_at_any_depth():
    chain = [0, *range(200)]  # 0 <- 1 <- 2 ... <- 200
    assert _tree_roots(chain) == [0] * 201
    assert _tree_roots([0, 0, 2, 2, 3, 5]) == [0, 0, 2, 2, 2, 5]


def test_a_rewrite_that_lays_the_other_operand_out_for_amp_swaps_a_gemms_left_and_right(reference_plan):
    """The families of a rewrite that reuses the steps' flows are found again where they read layouts: the left
    operand is the one laid out for Amp (and the right one the other, each with its source)."""
    flow = dataflow(reference_plan)
    layouts = {v: reference_plan.values[v].layout for v in (64, 136)}  # step 12: left 64 (Amp), right 136
    swapped = with_value(with_value(reference_plan, 64, layout=layouts[136]), 136, layout=layouts[64])
    neither = with_value(reference_plan, 64, layout=layouts[136])
    for after in (reference_plan, swapped, neither):
        rewritten = rewritten_dataflow(reference_plan, flow, after, liveness(after))
        assert rewritten.steps is flow.steps
        assert rewritten.families == gemm_families(after, flow.steps, []) == dataflow(after).families
    family = next(f for f in rewritten_dataflow(reference_plan, flow, swapped, liveness(swapped)).families
                  if f.gemm_step == 12)
    assert (family.left, family.left_source, family.right, family.right_source) == (136, 51, 64, 63)


def test_a_version_written_later_is_no_conversions_source_in_either_search(reference_plan):
    """With every value written after the step, only roots are readable: the storage group's search agrees."""
    plan = _one_storage_group(reference_plan, 80)
    inference = _Inference(plan, liveness(plan))
    inference.written_at = dict.fromkeys(range(len(plan.values)), len(plan.steps))
    compared = 0
    for step in plan.steps:
        for result in inference.live.born_at[step.index]:
            everywhere = inference.alike(SAME_STORAGE_GROUP, inference.readable(step, result), result)
            assert sorted(set(inference.same_storage(step, result))) == sorted(set(everywhere))
            compared += bool(everywhere)
    assert compared

from __future__ import annotations

import pytest
from reference import with_value

from ipuplan.facts.dataflow import dataflow


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

"""What a freedom level produces (`space.types`): candidates that move along with an equal group later in the plan,
the gathered copies' bytes counted at their reading steps, left-out choices by mask, and frozen groups whose reasons
read as one line and group like with like."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ipuplan.facts.estimate import ValueBytes
from ipuplan.plan.layout import INTERLEAVED, STANDARD
from ipuplan.space.types import (
    Candidate,
    CandidateSpace,
    Decisions,
    FreeGroup,
    Freeze,
    FreezeReason,
    FrozenGroup,
    Gather,
    LeftOut,
)


@pytest.mark.parametrize("scope", ["storage", "kernels"])
def test_frozen_reasons_are_typed_and_their_labels_carry_no_numbers(spaces, scope):
    for group in spaces[scope].frozen:
        assert isinstance(group.reason, FreezeReason)
        assert isinstance(group.reason.kind, Freeze)
        assert not any(c.isdigit() for c in group.reason.group_label), group.reason.group_label


def candidate(reference_plan, value_id: int, gathers=()) -> Candidate:
    layout = reference_plan.values[value_id].parsed_layout
    return Candidate((layout,), (ValueBytes(10, 16, 32),), 7, ((12, 100, 0), (13, 0, 50)), (),
                     ((12, "Gemm { inner_block: 64 }"),), "label", gathers)


def test_a_candidate_moves_along_with_an_equal_group_later_in_the_plan(reference_plan):
    gather = Gather(13, 0, reference_plan.values[8].parsed_layout, ValueBytes(10, 16, 32), 5)
    moved = candidate(reference_plan, 8, (gather,)).shifted(58)
    assert (moved.scratch, moved.operations) == (((70, 100, 0), (71, 0, 50)), ((70, "Gemm { inner_block: 64 }"),))
    assert moved.gathers == (Gather(71, 0, gather.layout, gather.value_bytes, 5),)
    assert (moved.layouts, moved.value_bytes, moved.exchange_bytes, moved.label) == (
        candidate(reference_plan, 8).layouts, (ValueBytes(10, 16, 32),), 7, "label")
    assert moved.with_scratch(()) == Candidate(moved.layouts, moved.value_bytes, 7, (), (), moved.operations, "label",
                                               moved.gathers)


def test_a_moved_or_rescratched_candidate_leaves_the_original_as_it_was(reference_plan):
    original = candidate(reference_plan, 8, (Gather(13, 0, reference_plan.values[8].parsed_layout,
                                                    ValueBytes(10, 16, 32), 5),))
    before = dict(vars(original))
    assert original.shifted(5) != original and original.with_scratch(()) != original
    assert vars(original) == before
    bare = Candidate(original.layouts, original.value_bytes, 7)  # nothing tied to a step: the same choice anywhere
    assert bare.shifted(5) is bare
    # a copy takes the whole __dict__: it must hold the fields alone, whatever was read of the candidate
    assert original.row_scratch and set(vars(original.shifted(5))) == {f.name for f in dataclasses.fields(Candidate)}


def test_a_gathered_copy_is_counted_at_its_reading_step_in_its_class(reference_plan):
    standard, interleaved = (reference_plan.values[v].parsed_layout for v in (28, 8))
    assert (standard.memory_class, interleaved.memory_class) == (STANDARD, INTERLEAVED)
    copies = (Gather(13, 0, standard, ValueBytes(1, 2, 40), 0), Gather(13, 0, interleaved, ValueBytes(1, 2, 4), 0))
    assert candidate(reference_plan, 8, copies).row_scratch == ((12, 100, 0), (13, 40, 54))
    assert candidate(reference_plan, 8).row_scratch == ((12, 100, 0), (13, 0, 50))  # no copy: its scratch alone


def test_left_out_choices_are_kept_by_mask_and_none_when_none_is():
    left = LeftOut(np.array([[10, 20], [30, 40], [50, 60]]), (True, False),
                   ((5, np.array([1, 2, 3]), np.array([4, 5, 6])),), ("a", "b", "c"))
    kept = left.only(np.array([True, False, True]))
    assert (kept.count, kept.bytes.tolist(), kept.choices, kept.standard) == (2, [[10, 20], [50, 60]], ("a", "c"),
                                                                             (True, False))
    assert [(step, s.tolist(), i.tolist()) for step, s, i in kept.scratch] == [(5, [1, 3], [4, 6])]
    assert left.only(np.zeros(3, dtype=bool)) is None
    assert [step for step, _, _ in left.shifted(10).scratch] == [15]


@pytest.mark.parametrize(
    ("reason", "line", "label"),
    [
        (FreezeReason(Freeze.READ_BY_KERNEL, 12, "Gemm"), "read by Gemm at step 12", "read by Gemm"),
        (FreezeReason(Freeze.UNSHOWN_READ, 15, "Add", "an operand"), "may be read by Add at step 15 (an operand)",
         "may be read by Add"),
        (FreezeReason(Freeze.UNKNOWN_OPERATION, 41, "FancyFusedThing"),
         "live at step 41, an operation ipuplan does not know (FancyFusedThing)",
         "live at an operation ipuplan does not know"),
        (FreezeReason(Freeze.UNKNOWN_LAYOUT, detail="padding Mirror"),
         "a layout ipuplan does not know (padding Mirror), kept verbatim",
         "a layout ipuplan does not know (kept verbatim)"),
        (FreezeReason(Freeze.NEVER_LIVE), Freeze.NEVER_LIVE.value, Freeze.NEVER_LIVE.value),
        (FreezeReason(Freeze.NO_OTHER_SPLIT).in_family(47), "Gemm family at step 47: no other legal split",
         "Gemm family: no other legal split"),
        (FreezeReason(Freeze.READ_BY_KERNEL, 45, "Convert").in_family(47, 153),
         "Gemm family at step 47: value 153 read by Convert at step 45", "Gemm family: read by Convert"),
    ],
)
def test_a_reason_reads_as_one_line_and_its_label_groups_like_with_like(reason, line, label):
    assert (str(reason), reason.group_label) == (line, label)


def test_a_space_says_for_every_value_it_decided_why_it_is_frozen_or_that_it_is_free(reference_plan):
    free = FreeGroup((1, 2), (candidate(reference_plan, 8),), input_index=0)
    frozen = FrozenGroup((3,), FreezeReason(Freeze.NEVER_LIVE))
    assert Decisions((free,), (frozen,)).claimed == {1, 2, 3}
    space = CandidateSpace("storage", (free, free), (frozen,))
    assert space.reasons() == {1: None, 2: None, 3: frozen.reason} and space.candidate_count == 2
    assert free.input == free.candidates[0]

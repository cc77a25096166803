"""Freedom level `classes` (space/levels/classes.py): alone on the reference plan, within scope `full`, and left out
by `keep_classes`."""

from __future__ import annotations

from dataclasses import replace

import pytest
from reference import MODELS

from ipuplan import load_plan
from ipuplan.facts.check import check
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.plan.layout import MEMORY_CLASSES
from ipuplan.replan.against import against
from ipuplan.replan.pipeline import optimize
from ipuplan.space.levels.classes import MOVABLE_CLASS, class_level, gemm_touched
from ipuplan.space.rules import context_of, freeze_reason
from ipuplan.space.scopes import candidate_space


@pytest.fixture(scope="module")
def alone(facts):
    """What the classes level decides when it is given every group of the reference plan."""
    context = context_of(facts)
    return context, class_level(context, context.groups)


def test_alone_it_frees_only_groups_that_kernels_hold_and_freezes_nothing(facts, alone):
    context, decided = alone
    assert decided.frozen == () and len(decided.free) == 51  # the 4 values never live are left alone
    touched = gemm_touched(context)
    for group in decided.free:
        assert freeze_reason(context, group.members).kind in MOVABLE_CLASS, group.members
        assert touched.isdisjoint(group.members) and facts.amp_aligned.isdisjoint(group.members), group.members


def test_its_candidates_are_the_input_and_the_input_in_the_other_class(facts, alone):
    _, decided = alone
    for group in decided.free:
        own, other = group.candidates
        assert group.input_index == 0 and group.kind == "class"
        assert own.layouts == tuple(facts.plan.values[m].parsed_layout for m in group.members)
        (moved_to,) = {layout.memory_class for layout in other.layouts}
        assert moved_to != own.layouts[0].memory_class and moved_to in MEMORY_CLASSES
        assert tuple(replace(layout, memory_class=moved_to) for layout in own.layouts) == other.layouts
        assert (other.value_bytes, other.exchange_bytes, other.scratch) == (own.value_bytes, own.exchange_bytes, ())


def test_in_scope_full_it_frees_what_it_frees_alone_but_what_the_elementwise_level_claims(spaces, alone):
    """The element-wise level runs first in scope `full`: a group it frees is its own; every other group the
    classes level frees alone, it frees in `full`."""
    _, decided = alone
    claimed = {m for g in spaces["full"].free if g.kind == "elementwise" for m in g.members}
    in_full = {g.members for g in spaces["full"].free if g.kind == "class"}
    alone_groups = {g.members for g in decided.free}
    assert in_full == {members for members in alone_groups if claimed.isdisjoint(members)}
    assert in_full < alone_groups  # the element-wise level claims some of them on the reference plan


def class_only(space) -> set[int]:
    """Values of a scope `full` space that only the classes level frees."""
    return {m for group in space.free if group.kind == "class" for m in group.members}


def test_keep_classes_frees_none_of_what_only_the_classes_level_frees(facts, spaces):
    kept = candidate_space(facts, "full", keep_classes=True)
    assert "class" not in {group.kind for group in kept.free}
    reasons = kept.reasons()
    assert all(reasons[m] is not None and reasons[m].kind in MOVABLE_CLASS for m in class_only(spaces["full"]))


def test_optimize_keeping_classes_is_legal_and_moves_no_class_the_classes_level_would():
    # its optimum in `full` moves 2 classes (332,712 vs 341,928)
    plan = load_plan(MODELS / "vit-so400m-12layers-chip.json")
    only = class_only(candidate_space(plan_facts(plan), "full"))
    moved = optimize(plan, workers=1, time_limit=10)
    kept = optimize(plan, workers=1, time_limit=10, keep_classes=True)
    assert any(moved.plan.values[m].memory_class != plan.values[m].memory_class for m in only)
    assert check(kept.plan) == [] and against(plan, kept.plan, "full") == [] and kept.after.fits_budget
    assert all(kept.plan.values[m].memory_class == plan.values[m].memory_class for m in only)
    assert kept.after.raw_peak > moved.after.raw_peak

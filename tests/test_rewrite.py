"""Rewrite: applying a choice changes only what it chose, and the contract catches what must not change."""

from __future__ import annotations

from dataclasses import replace

import pytest
from reference import with_step, with_value

from ipuplan import dump_plan
from ipuplan.facts.check import check
from ipuplan.facts.estimate import estimate
from ipuplan.plan.budgets import Budgets
from ipuplan.plan.layout import format_layout
from ipuplan.replan.against import against
from ipuplan.replan.rewrite import IllegalRewrite, apply_choice, rewrite, rewrite_checking, with_derived_fields


def inputs(space) -> tuple[int, ...]:
    return tuple(g.input_index for g in space.free)


@pytest.mark.parametrize("scope", ["storage", "kernels"])
def test_input_choice_changes_nothing(reference_plan, spaces, scope):
    applied = apply_choice(reference_plan, spaces[scope], inputs(spaces[scope]))
    assert dump_plan(with_derived_fields(applied)) == dump_plan(reference_plan)


def test_another_candidate_changes_exactly_that_groups_layouts(reference_plan, spaces):
    space = spaces["storage"]
    g = next(i for i, group in enumerate(space.free) if len(group.members) > 1)
    group = space.free[g]
    choice = tuple(1 if i == g else c for i, c in enumerate(inputs(space)))
    applied = apply_choice(reference_plan, space, choice)
    changed = {v.id for v, new in zip(reference_plan.values, applied.values) if v.layout != new.layout}
    assert changed == set(group.members)
    for position, member in enumerate(group.members):
        assert applied.values[member].layout == format_layout(group.candidates[1].layouts[position])
        assert applied.values[member].shape == reference_plan.values[member].shape


@pytest.mark.parametrize("scope", ["storage", "kernels"])
@pytest.mark.parametrize("pick", ["second", "last"])
def test_rewrite_returns_a_checked_plan_with_its_own_estimate(reference_plan, facts, spaces, scope, pick):
    space = spaces[scope]
    choice = tuple(1 if pick == "second" else len(g.candidates) - 1 for g in space.free)
    rewritten = rewrite(facts, space, choice, facts.budgets)
    assert check(rewritten.plan) == []
    assert rewritten.estimate == estimate(rewritten.plan)
    assert against(reference_plan, rewritten.plan, scope) == []
    assert rewritten.plan.values != reference_plan.values


def structure(before, after) -> list[str]:
    """The contract's structure lines (`replan.against`): what a rewrite keeps of its input."""
    return [line for line in against(before, after) if line.startswith("structure: ")]


def test_unchanged_plan_keeps_the_contract(reference_plan):
    assert against(reference_plan, reference_plan) == []


def test_contract_catches_a_changed_name(reference_plan):
    after = with_value(reference_plan, 3, name="renamed")
    assert structure(reference_plan, after) == ["structure: value 3: name changed from 'vit.position' to 'renamed'"]


def test_contract_catches_a_changed_shape_of_a_value_that_is_not_partials(reference_plan):
    value = reference_plan.values[8]
    after = with_value(reference_plan, 8, shape=[value.shape[0] * 2, *value.shape[1:]])
    assert structure(reference_plan, after) == [
        ("structure: value 8: shape changed from [1152, 3456] to [2304, 3456] (only a Gemm's partials may change, "
         "and only their leading pK)")
    ]


def test_contract_lets_gemm_partials_change_only_their_pk(reference_plan, facts):
    gemm = next(s.index for s in reference_plan.steps if s.parsed_operation.kind == "Gemm")
    (partials,) = facts.live.born_at[gemm]
    shape = reference_plan.values[partials].shape  # [pK, ...]
    assert structure(reference_plan, with_value(reference_plan, partials, shape=[shape[0] + 1, *shape[1:]])) == []
    widened = with_value(reference_plan, partials, shape=[*shape[:-1], shape[-1] * 2])
    assert len(structure(reference_plan, widened)) == 1


def test_contract_catches_a_changed_live_set(reference_plan):
    live = reference_plan.steps[5].live
    after = with_step(reference_plan, 5, live=live[:-1])
    assert structure(reference_plan, after) == [f"structure: step 5: live set changed (without {live[-1]})"]


def test_contract_catches_a_changed_operation_kind(reference_plan):
    copy = next(s for s in reference_plan.steps if s.parsed_operation.kind == "Copy")
    convert = next(s for s in reference_plan.steps if s.parsed_operation.kind == "Convert")
    after = with_step(reference_plan, copy.index, operation=convert.operation)
    assert structure(reference_plan, after) == [
        f"structure: step {copy.index}: operation kind changed from 'Copy' to 'Convert'"]


def test_derived_fields_of_a_consistent_plan_copy_nothing(reference_plan):
    rewritten = with_derived_fields(reference_plan)
    assert all(a is b for a, b in zip(reference_plan.values, rewritten.values))
    assert all(a is b for a, b in zip(reference_plan.steps, rewritten.steps))
    assert dump_plan(rewritten) == dump_plan(reference_plan)


@pytest.mark.parametrize("fork", [True, False])
def test_a_check_made_in_a_forked_copy_refuses_a_broken_family_as_one_made_here(reference_plan, facts, spaces, fork,
                                                                                forks_allowed):
    """A Gemm family's candidate with new layouts but its old inner blocks: `check` (in the copy, or here) finds it
    and the plan is refused; the input's choice passes either way."""
    space = spaces["kernels"]
    group = next(g for g in space.free if g.kind == "kernel" and 137 in g.members)
    broken = replace(group.candidates[1], operations=())
    space = replace(space, free=(replace(group, candidates=(group.candidates[0], broken)),), frozen=())
    with rewrite_checking(facts, space, (1,), Budgets.of(reference_plan), fork) as checking:
        assert checking.alone.forked == fork
        with pytest.raises(IllegalRewrite, match="check: .*Gemm family"):
            checking.checked()
    with rewrite_checking(facts, space, (0,), Budgets.of(reference_plan), fork) as checking:
        assert checking.checked().plan == rewrite(facts, space, (0,), Budgets.of(reference_plan)).plan

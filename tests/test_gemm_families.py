"""Gemm families (facts/gemm_families.py): recognised, consistent on the reference plan, and inconsistencies caught."""

from __future__ import annotations

from dataclasses import replace

import pytest
from reference import with_step, with_value

from ipuplan.facts.check import check
from ipuplan.facts.dataflow import dataflow
from ipuplan.facts.gemm_families import IllegalSplit, Split, current_split, derive, family_problems, recognise_families
from ipuplan.plan.budgets import Budgets
from ipuplan.plan.layout import format_layout, parse_layout
from ipuplan.replan.rewrite import IllegalRewrite, rewrite


@pytest.fixture(scope="module")
def families(reference_plan):
    found, rejected = recognise_families(reference_plan, dataflow(reference_plan))
    return {f.gemm_step: f for f in found}, dict(rejected)


def test_recognised_and_rejected(families):
    found, rejected = families
    assert sorted(found) == [2, 12, 37, 47, 56, 67, 72, 94, 104, 111]
    assert sorted(rejected) == [24, 29, 82, 87]  # attention products: batched, not in the matmul pattern
    assert "Sum" in rejected[24]


def test_splits_read_from_the_reference_plan(reference_plan, families):
    found, _ = families
    assert current_split(reference_plan, found[12]) == Split(4, 10, 36, 4, 1)
    assert current_split(reference_plan, found[47]) == Split(3, 9, 54, 1, 3)
    assert current_split(reference_plan, found[2]) == Split(4, 8, 46, 1, 4)


def test_derivation_reproduces_every_input_string(reference_plan, families):
    found, _ = families
    for family in found.values():
        derived = derive(reference_plan, family, current_split(reference_plan, family))
        for value_id, layout in derived.layouts.items():
            assert format_layout(layout) == reference_plan.values[value_id].layout, (family.gemm_step, value_id)
        assert derived.operation == (family.gemm_step, reference_plan.steps[family.gemm_step].operation)
        assert derived.sum_scratch == (family.sum_step, reference_plan.steps[family.sum_step].scratch.standard)
        assert family_problems(reference_plan, family) == []


def test_another_split_is_consistent(reference_plan, families):
    family = families[0][12]
    derived = derive(reference_plan, family, Split(6, 5, 48, 2, 3))
    assert (derived.inner_block, derived.output_columns, derived.result_shape[0]) == (192, 80, 6)
    with pytest.raises(IllegalSplit, match="32"):  # 1152 / 7 is no whole 32-byte block
        derive(reference_plan, family, Split(7, 5, 48))


def _gemm_mismatches(plan, step):
    return [m for m in check(plan) if (m.where, m.field) == (f"step {step}", "Gemm family")]


def test_check_catches_an_inner_block_that_disagrees(reference_plan):
    text = reference_plan.steps[12].operation.replace("inner_block: 288", "inner_block: 96")
    problems = _gemm_mismatches(with_step(reference_plan, 12, operation=text), 12)
    assert any("inner_block 96" in str(m) for m in problems)


def test_check_catches_a_right_operand_split_another_way(reference_plan):
    layout = parse_layout(reference_plan.values[136].layout)
    axes = (replace(layout.axes[0], partitions=72), layout.axes[1])
    bad = replace(layout, axes=axes, replicas=5, tile_count=5 * 72 * 4)
    problems = _gemm_mismatches(with_value(reference_plan, 136, layout=format_layout(bad)), 12)
    assert any("value 136 is not tiled as split" in str(m) for m in problems)


def test_check_catches_partials_of_the_wrong_pk(reference_plan):
    problems = _gemm_mismatches(with_value(reference_plan, 137, shape=[5, 1, 729, 3456]), 12)
    assert any("shape" in str(m) for m in problems)


def test_check_catches_wrong_sum_scratch(reference_plan):
    step = reference_plan.steps[13]
    scratch = step.scratch.model_copy(update={"standard": 4 * 4736})
    problems = _gemm_mismatches(with_step(reference_plan, 13, scratch=scratch), 12)
    assert any("Sum scratch" in str(m) for m in problems)


def test_rewrite_refuses_an_inconsistent_family(reference_plan, facts, spaces):
    space = spaces["kernels"]
    group = next(g for g in space.free if g.kind == "kernel" and 137 in g.members)
    other = group.candidates[1]
    broken = replace(other, operations=())  # new layouts, old inner_block / output_columns
    space = replace(space, free=(replace(group, candidates=(group.candidates[0], broken)),), frozen=())
    with pytest.raises(IllegalRewrite, match="Gemm family"):
        rewrite(facts, space, (1,), Budgets.of(reference_plan))

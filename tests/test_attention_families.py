"""Attention products (facts/attention_families.py): recognised, reproducing their input, and inconsistencies caught."""

from __future__ import annotations

import pytest
from reference import with_step, with_value

from ipuplan.facts.attention_families import attention_problems, current_head_split, derive_attention
from ipuplan.facts.check import check
from ipuplan.plan.layout import format_layout


def test_attention_products_are_families_that_reproduce_their_input(reference_plan, facts):
    found = {family.gemm_step: family for family in facts.attention}
    assert sorted(found) == [24, 29, 82, 87]  # Q·Kᵀ and P·V of the encoder layer and of the MAP head
    assert [found[s].reduces for s in (24, 29)] == [False, True]
    for family in found.values():
        assert attention_problems(reference_plan, family) == []
        derived = derive_attention(reference_plan, family, current_head_split(reference_plan, family))
        assert {v: format_layout(x) for v, x in derived.layouts.items()} == {
            v: reference_plan.values[v].layout for v in derived.layouts
        }


@pytest.mark.parametrize(
    ("step", "change"),
    [
        (29, lambda plan: with_step(
            plan, 29, operation=plan.steps[29].operation.replace("inner_block: 96", "inner_block: 48"))),
        (24, lambda plan: with_value(
            plan, 141, layout=plan.values[141].layout.replace("partitions: 11", "partitions: 10"))),
        (29, lambda plan: with_step(plan, 30, scratch=plan.steps[30].scratch.model_copy(update={"standard": 1280}))),
    ],
)
def test_check_rejects_an_inconsistent_attention_family(reference_plan, step, change):
    problems = [m for m in check(change(reference_plan)) if (m.where, m.field) == (f"step {step}", "Gemm family")]
    assert problems, f"step {step}: the broken attention family was not caught"

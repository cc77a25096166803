from __future__ import annotations

import pytest
from reference import with_step

from ipuplan import PlanError
from ipuplan.replan.pipeline import optimize
from ipuplan.report.diff import diff_lines, diff_plans, tiling
from ipuplan.workbench.synth import repeat_layers


@pytest.fixture(scope="module")
def optimised(reference_plan):
    return optimize(reference_plan, workers=1, time_limit=5, scope="storage").plan


def test_diff_lists_every_changed_value_and_the_peak(reference_plan, optimised):
    result = diff_plans(reference_plan, optimised)
    # 71, 110 and 114 (split into heads by views) keep their layouts: re-tiled, their views read two ways
    assert [v.value_id for v in result.values] == [8, 9, 12, 13, 20, 21, 24, 25, 31, 51, 53, 57, 59, 75]
    qkv = result.values[0]
    assert (tiling(qkv.old_layout)[0], qkv.old_bytes) == ((36, 4), 27_648)
    assert qkv.new_bytes < qkv.old_bytes
    lines = diff_lines(result)
    assert lines[0].startswith("value 8 vit.encoder.layer0.attention.qkv.weight: partitions [36, 4] -> ")
    assert lines[-2].startswith("14 values and 0 operations changed; raw peak 367,216 (step 47) -> 176,740")
    assert lines[-1].startswith("exchange 699,219,304 -> ")


def test_diff_shows_operation_text_changes(reference_plan):
    text = reference_plan.steps[12].operation.replace("inner_block: 288", "inner_block: 96")
    result = diff_plans(reference_plan, with_step(reference_plan, 12, operation=text))
    assert [(o.step, o.new) for o in result.operations] == [(12, text)]
    lines = diff_lines(result)
    assert lines[0] == ("Gemm family: Convert at step 10; Gemm at step 12; Sum at step 13: "
                        "0 of 5 values and 1 operation changed together")
    assert lines[1].startswith("  step 12: Gemm {")


def test_diff_refuses_different_programs(reference_plan):
    with pytest.raises(PlanError, match="different programs"):
        diff_plans(reference_plan, repeat_layers(reference_plan, 3))


def test_diff_shows_each_family_that_changed_as_one_unit(reference_plan):
    result = diff_plans(reference_plan, optimize(reference_plan, workers=1).plan)
    lines = diff_lines(result)
    start = lines.index("element-wise family: Add at steps 5, 6, 40, 41, 59, 60: 19 of 19 values and 0 operations "
                        "changed together")
    block = lines[start + 1:start + 20]
    assert [int(line.split()[1]) for line in block] == [2, 3, 14, 15, 26, 27, 45, 46, 47, 48, 54, 60, 79, 80, 81, 94,
                                                        95, 96, 97]  # biases and activations of the residual Adds
    assert all(line.startswith("  value ") for line in block) and not lines[start + 20].startswith("  ")
    gemm = lines.index("Gemm family: Convert at step 10; Gemm at step 12; Sum at step 13: 5 of 5 values and "
                       "1 operation changed together")
    assert lines[gemm + 6].startswith("  step 12: Gemm {")  # the family's own operation, inside its block
    shown = [int(line.split()[1]) for line in lines if line.lstrip().startswith("value ")]
    assert sorted(shown) == [c.value_id for c in result.values]  # every change once, in a family or alone
    assert sum(line.lstrip().startswith("step ") for line in lines) == len(result.operations)


def test_diff_lists_the_copies_scope_program_inserted_and_compares_the_other_steps(reference_plan):
    result = optimize(reference_plan, workers=1, time_limit=10, scope="program")
    found = diff_plans(reference_plan, result.plan)
    assert found.inserted == result.inserted and len(found.inserted) == 14
    assert {c.value_id for c in found.values} == {c.value_id for c in result.changes}
    assert found.operations == tuple(o for o in found.operations if o.step < len(reference_plan.steps))
    lines = diff_lines(found)
    assert "inserted step 8: Copy of value 49 into value 176 for step 12 (operation 3 gather of " \
           "vit.encoder.attention_norm.scale for step 12)" in lines
    assert ", 14 Copy steps inserted; raw peak 367,216 (step 47) -> 113,080 (step 55)" in lines[-2]
    with pytest.raises(PlanError, match="inserted copies"):  # the other way round is no re-plan of one scope
        diff_plans(result.plan, reference_plan)

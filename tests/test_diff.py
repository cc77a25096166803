from __future__ import annotations

import pytest
from reference import REFERENCE, with_step
from typer.testing import CliRunner

from ipuplan import PlanError, write_plan
from ipuplan.cli import app
from ipuplan.replan.pipeline import optimize
from ipuplan.report.diff import diff_lines, diff_plans, tiling
from ipuplan.workbench.synth import repeat_layers


@pytest.fixture(scope="module")
def optimised(reference_plan):
    return optimize(reference_plan, workers=1, time_limit=5, scope="storage").plan


def test_diff_lists_every_changed_value_and_the_peak(reference_plan, optimised):
    result = diff_plans(reference_plan, optimised)
    assert [v.value_id for v in result.values] == [8, 9, 12, 13, 20, 21, 24, 25, 31, 51, 53, 57, 59, 75, 114]
    qkv = result.values[0]
    assert (tiling(qkv.old_layout)[0], qkv.old_bytes) == ((36, 4), 27_648)
    assert qkv.new_bytes < qkv.old_bytes
    lines = diff_lines(result)
    assert lines[0].startswith("value 8 vit.encoder.layer0.attention.qkv.weight: partitions [36, 4] -> ")
    assert lines[-2].startswith("15 values and 0 operations changed; raw peak 367,216 (step 47) -> 176,740")
    assert lines[-1].startswith("exchange 699,219,304 -> ")


def test_diff_shows_operation_text_changes(reference_plan):
    text = reference_plan.steps[12].operation.replace("inner_block: 288", "inner_block: 96")
    result = diff_plans(reference_plan, with_step(reference_plan, 12, operation=text))
    assert [(o.step, o.new) for o in result.operations] == [(12, text)]
    assert "step 12: Gemm {" in diff_lines(result)[0]


def test_diff_refuses_different_programs(reference_plan):
    with pytest.raises(PlanError, match="different programs"):
        diff_plans(reference_plan, repeat_layers(reference_plan, 3))


def test_diff_cli(tmp_path, optimised):
    better = tmp_path / "better.json"
    write_plan(optimised, better)
    result = CliRunner().invoke(app, ["diff", str(REFERENCE), str(better)])
    assert result.exit_code == 0
    assert len(result.stdout.splitlines()) == 17  # 15 values, the peak, the exchange

"""Golden numbers: the estimate must reproduce every number the compiler wrote."""

from __future__ import annotations

import pytest
from reference import with_step

from ipuplan.facts.estimate import Budgets, estimate, shard_bytes
from ipuplan.plan.layout import parse_layout


def test_every_value_bytes(reference_plan):
    result = estimate(reference_plan)
    computed = [(b.shard_bytes, b.aligned_bytes, b.bytes) for b in result.values]
    stored = [(v.shard_bytes, v.aligned_bytes, v.bytes) for v in reference_plan.values]
    assert len(computed) == 176
    assert computed == stored


def test_every_step_usage(reference_plan):
    result = estimate(reference_plan)
    assert len(result.standard) == 116
    assert list(zip(result.standard, result.interleaved)) == [
        (s.usage.standard, s.usage.interleaved) for s in reference_plan.steps
    ]


def test_top_level_fields(reference_plan):
    result = estimate(reference_plan)
    assert result.peak == reference_plan.peak
    assert result.raw_peak == 367_216
    assert (result.total_peak_step, result.standard_peak_step, result.interleaved_peak_step) == (47, 45, 47)
    assert result.effective_peak_bytes == reference_plan.effective_peak_bytes == 416_368
    assert result.standard_contiguous_overflow_bytes == 0
    assert result.fits_budget is True


@pytest.mark.parametrize(
    ("value_id", "expected"),
    [
        (36, 8),  # Linear axis: 1152 elements over 288 partitions of 4 -> 4 x F16
        (159, 10_240),  # padding_multiple 768 > dim 729: 12 blocks of 64 rows x 80 x F16
        (163, 32),  # 46 partitions of 16 over 729 -> 16 elements
        (1, 23_040),  # FromEnd axes, F8
    ],
)
def test_shard_rules(reference_plan, value_id, expected):
    value = reference_plan.values[value_id]
    assert shard_bytes(value.shape, value.element_size, parse_layout(value.layout)) == expected


def test_amp_alignment_rounds_to_class_granule(reference_plan):
    result = estimate(reference_plan)
    assert result.values[1].aligned_bytes == 32_768  # Amp(TransposedLeft) Gemm operand, Standard, 16 KiB granule
    assert result.values[135].aligned_bytes == 32_768  # Gemm result, Interleaved, 32 KiB granule
    assert result.values[30].aligned_bytes == 384  # Amp(Left), but read by a LocalKernel, not a Gemm


def test_tighter_budget_does_not_fit(reference_plan):
    tight = Budgets(budget_bytes=400_000, interleaved_budget_bytes=300_000, support_reserve_bytes=49_152)
    result = estimate(reference_plan, tight)
    assert result.standard_contiguous_overflow_bytes == 143_344 - 100_000
    assert result.fits_budget is False


def test_scratch_counts_once_whatever_the_execution_count(reference_plan):
    bumped = with_step(reference_plan, 13, execution_count=7)
    assert estimate(bumped).standard[13] == estimate(reference_plan).standard[13]


def test_step_sums_match_a_plain_sum_over_each_live_set(reference_plan):
    result = estimate(reference_plan)
    for step in reference_plan.steps:
        live = [result.values[v].bytes for v in step.live if reference_plan.values[v].memory_class == "Ipu21Standard"]
        assert result.standard[step.index] == sum(live) + step.scratch.standard

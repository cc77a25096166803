"""Golden numbers: the estimate must reproduce every number the compiler wrote."""

from __future__ import annotations

from dataclasses import replace
from math import prod

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import with_step, with_value

from ipuplan.facts.check import check
from ipuplan.facts.estimate import GRANULE, Budgets, estimate, shard_bytes, value_bytes
from ipuplan.plan.debug_syntax import Atom
from ipuplan.plan.format import MAX_COUNT, ClassBytes
from ipuplan.plan.layout import (
    INTERLEAVED,
    MEMORY_CLASSES,
    PADDINGS,
    STANDARD,
    Axis,
    AxisTiling,
    Layout,
    format_layout,
    parse_layout,
)


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


@pytest.mark.parametrize("copies", [1, MAX_COUNT])
def test_numbers_past_the_loaders_bounds_and_int64_are_exact_and_check_reports_them(reference_plan, copies):
    """A damaged plan's shape (each number within the loader's bounds) makes a value of 2**48 bytes and more;
    with the most copies the loader takes, more than int64 holds."""
    huge = with_value(reference_plan, 41, shape=[738_084, 739_201, 737_281], copies=copies)
    result = estimate(huge)
    value = result.values[41].bytes
    step = next(s for s in huge.steps if 41 in s.live)
    assert value > MAX_COUNT and (value > 2**63) == (copies == MAX_COUNT)
    assert result.standard[step.index] + result.interleaved[step.index] >= value
    assert result.peak.total >= value and any(m.field == "peak.total" for m in check(huge))


# Properties of the estimate on random tensors and layouts, each layout printed and parsed back by the grammar.

PRECISIONS = ("F8F143 { scale_exponent: -4 }", "F16", "F32")


@st.composite
def tilings(draw, rank: int, least: int) -> tuple[AxisTiling, ...]:
    """A Linear axis alone, or at least `least` axes over distinct dimensions, each named from the start or the end."""
    def tiling(axis: Axis) -> AxisTiling:
        block = draw(st.integers(1, 8))
        return AxisTiling(axis, draw(st.integers(1, 8)), 1, block, draw(st.integers(1, 16)), 1,
                          draw(st.sampled_from(PADDINGS)), None)

    if draw(st.booleans()):
        return (tiling(Axis("Linear")),)
    dimensions = draw(st.lists(st.integers(0, rank - 1), unique=True, min_size=least, max_size=rank))
    return tuple(tiling(Axis("FromStart", d) if draw(st.booleans()) else Axis("FromEnd", rank - d)) for d in dimensions)


@st.composite
def tensors(draw, least_axes: int = 0) -> tuple[tuple[int, ...], Layout]:
    shape = tuple(draw(st.lists(st.integers(1, 48), min_size=1, max_size=4)))
    axes = draw(tilings(len(shape), least_axes))
    replicas = draw(st.integers(1, 3))
    layout = Layout(Atom("RowMajor"), replicas * prod(a.partitions for a in axes), replicas, axes,
                    draw(st.sampled_from(MEMORY_CLASSES)))
    return shape, parse_layout(format_layout(layout))


@given(tensors(), st.sampled_from(PRECISIONS), st.integers(1, 4), st.booleans())
def test_bytes_are_aligned_bytes_times_copies_and_aligned_bytes_whole_granules(reference_plan, tensor, precision,
                                                                               copies, amp_aligned):
    shape, layout = tensor
    value = reference_plan.values[0].model_copy(
        update={"shape": list(shape), "precision": precision, "layout": format_layout(layout), "copies": copies})
    sizes = value_bytes(value, amp_aligned)
    assert sizes.shard_bytes == shard_bytes(shape, value.element_size, layout) > 0
    assert sizes.bytes == sizes.aligned_bytes * copies
    granule = GRANULE[layout.memory_class]
    if amp_aligned:
        assert sizes.aligned_bytes % granule == 0 and 0 <= sizes.aligned_bytes - sizes.shard_bytes < granule
    else:
        assert sizes.aligned_bytes == sizes.shard_bytes


@given(tensors(least_axes=1), st.data())
def test_more_partitions_never_make_a_larger_shard(tensor, data):
    shape, layout = tensor
    position = data.draw(st.integers(0, len(layout.axes) - 1), label="axis")
    axis = layout.axes[position]
    more = replace(axis, partitions=axis.partitions + data.draw(st.integers(1, 8), label="more"))
    finer = replace(layout, axes=(*layout.axes[:position], more, *layout.axes[position + 1:]))
    assert shard_bytes(shape, 2, finer) <= shard_bytes(shape, 2, layout)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_step_usage_is_its_live_values_bytes_plus_its_scratch(reference_plan, data):
    """On the reference plan with values moved to the other class, copies changed and scratch redrawn."""
    plan = reference_plan
    count = len(plan.values)
    for value_id in data.draw(st.lists(st.integers(0, count - 1), unique=True, max_size=20), label="changed values"):
        value = plan.values[value_id]
        other = next(c for c in MEMORY_CLASSES if c != value.memory_class)
        layout = format_layout(replace(value.parsed_layout, memory_class=other))
        plan = with_value(plan, value_id, layout=layout, memory_class=other, copies=data.draw(st.integers(1, 3)))
    for step in data.draw(st.lists(st.integers(0, len(plan.steps) - 1), unique=True, max_size=10), label="steps"):
        scratch = ClassBytes(standard=data.draw(st.integers(0, 10**6)), interleaved=data.draw(st.integers(0, 10**6)))
        plan = with_step(plan, step, scratch=scratch)
    result = estimate(plan)
    for step in plan.steps:
        live = [plan.values[v] for v in step.live]
        standard = sum(result.values[v.id].bytes for v in live if v.memory_class == STANDARD)
        interleaved = sum(result.values[v.id].bytes for v in live if v.memory_class == INTERLEAVED)
        assert result.standard[step.index] == standard + step.scratch.standard
        assert result.interleaved[step.index] == interleaved + step.scratch.interleaved

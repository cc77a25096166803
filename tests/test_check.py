"""Mutation tests: any single change to a derived field or a partition count is caught and named."""

from __future__ import annotations

from dataclasses import replace

import pytest
from reference import with_step, with_value

from ipuplan.facts.check import MismatchKind, _value_mismatches, check, placement_problem
from ipuplan.facts.dataflow import dataflow
from ipuplan.facts.estimate import estimate
from ipuplan.plan.format import ClassBytes
from ipuplan.plan.layout import format_layout, parse_layout


def test_reference_plan_is_consistent(reference_plan):
    assert check(reference_plan) == []


@pytest.mark.parametrize("field", ["shard_bytes", "aligned_bytes", "bytes"])
def test_every_value_field_mutation_is_named(reference_plan, field):
    for value in reference_plan.values:
        mutated = with_value(reference_plan, value.id, **{field: getattr(value, field) + 1})
        wheres = {(m.where.split(" (")[0], m.field) for m in check(mutated)}
        assert (f"value {value.id}", field) in wheres, (value.id, field)


@pytest.mark.parametrize("cls", ["standard", "interleaved"])
def test_every_step_usage_mutation_is_named(reference_plan, cls):
    for step in reference_plan.steps:
        usage = step.usage.model_copy(update={cls: getattr(step.usage, cls) + 8})
        mismatches = check(with_step(reference_plan, step.index, usage=usage))
        assert [(m.where, m.field) for m in mismatches] == [(f"step {step.index}", f"usage.{cls}")]


@pytest.mark.parametrize(
    ("field", "changed"),
    [
        ("total_peak_step", 3),
        ("standard_peak_step", 44),
        ("interleaved_peak_step", 12),
        ("effective_peak_bytes", 416_369),
        ("standard_contiguous_overflow_bytes", 1),
        ("fits_budget", False),
    ],
)
def test_top_level_mutation_is_named(reference_plan, field, changed):
    mismatches = check(reference_plan.model_copy(update={field: changed}))
    assert [(m.where, m.field, m.stored) for m in mismatches] == [("plan", field, changed)]


@pytest.mark.parametrize("field", ["standard", "interleaved", "total", "maximum_standard_allocation"])
def test_peak_mutation_is_named(reference_plan, field):
    peak = reference_plan.peak.model_copy(update={field: getattr(reference_plan.peak, field) - 16})
    mismatches = check(reference_plan.model_copy(update={"peak": peak}))
    assert [(m.where, m.field) for m in mismatches] == [("plan", f"peak.{field}")]


def test_every_partition_count_mutation_is_named(reference_plan):
    for value in reference_plan.values:
        layout = parse_layout(value.layout)
        for position, axis in enumerate(layout.axes):
            axes = list(layout.axes)
            axes[position] = replace(axis, partitions=axis.partitions + 1)
            mutated = with_value(reference_plan, value.id, layout=format_layout(replace(layout, axes=tuple(axes))))
            named = {(m.where.split(" (")[0], m.field) for m in check(mutated)}
            assert (f"value {value.id}", "layout") in named, (value.id, position)


def test_scratch_rule_is_checked(reference_plan):
    step = reference_plan.steps[13]
    mutated = with_step(reference_plan, 13, scratch=ClassBytes(standard=step.scratch.standard + 16, interleaved=0))
    fields = {(m.where, m.field) for m in check(mutated)}
    assert ("step 13", "scratch.standard") in fields


def test_placement_rules(reference_plan):
    layout = parse_layout(reference_plan.values[3].layout)
    assert placement_problem(layout, 1472) is None
    assert "exceeds" in placement_problem(layout, 1000)
    axes = (replace(layout.axes[0], tile_stride=1), layout.axes[1])
    assert "two shards on one tile" in placement_problem(replace(layout, axes=axes), 1472)
    assert "beyond tile" in placement_problem(
        replace(layout, axes=(replace(layout.axes[0], tile_stride=3), layout.axes[1])), 5000)


def test_each_mismatch_says_its_kind_and_whether_a_rewrite_repairs_it(reference_plan):
    usage = reference_plan.steps[5].usage.model_copy(update={"standard": 8})
    stale = [*check(with_value(reference_plan, 20, bytes=1)), *check(with_step(reference_plan, 5, usage=usage)),
             *check(reference_plan.model_copy(update={"total_peak_step": 3}))]
    layout = parse_layout(reference_plan.values[3].layout)
    wider = replace(layout, axes=(replace(layout.axes[0], partitions=layout.axes[0].partitions + 1), *layout.axes[1:]))
    broken = check(with_value(reference_plan, 3, layout=format_layout(wider)))
    scratch = check(with_step(reference_plan, 13, scratch=ClassBytes(standard=16, interleaved=0)))
    assert {m.kind for m in stale} == {MismatchKind.VALUE_BYTES, MismatchKind.STEP_USAGE, MismatchKind.PLAN_PEAKS}
    assert not any(m.kind.structural for m in stale)  # stale numbers: the rewrite recomputes them
    assert MismatchKind.LAYOUT in {m.kind for m in broken} and MismatchKind.SCRATCH in {m.kind for m in scratch}
    assert all(m.kind.structural for m in broken + scratch if m.kind in (MismatchKind.LAYOUT, MismatchKind.SCRATCH))


def test_values_are_named_in_their_order_whatever_each_breaks(reference_plan):
    """Sizes stale on some values, a layout no placement on others (two of one tensor, and a third of its shape left
    alone), both on one: each named as a value alone would be, in the values' order, sizes before layout."""
    layout = parse_layout(reference_plan.values[3].layout)
    wider = format_layout(replace(layout, axes=(replace(layout.axes[0], partitions=layout.axes[0].partitions + 1),
                                                *layout.axes[1:])))
    alike = [v.id for v in reference_plan.values if v.shape == reference_plan.values[3].shape]
    assert len(alike) > 2
    mutated = reference_plan
    for value, change in [(30, {"bytes": 1}), (alike[0], {"layout": wider}), (alike[1], {"layout": wider}),
                          (7, {"layout": wider, "shard_bytes": 2, "bytes": 3}), (1, {"aligned_bytes": 5})]:
        mutated = with_value(mutated, value, **change)
    expected = [m for value, sizes in zip(mutated.values, estimate(mutated).values)
                for m in _value_mismatches(value, sizes, mutated.tile_count)]
    named = [m for m in check(mutated) if m.kind in (MismatchKind.VALUE_BYTES, MismatchKind.LAYOUT)]
    assert named == expected
    assert [m.where.split(" (")[0] for m in named][:4] == ["value 1", "value 3", "value 7", "value 7"]
    assert {m.where.split(" (")[0] for m in named} == {f"value {v}" for v in (1, *alike[:2], 7, 30)}


def test_every_step_a_scratch_rule_binds_is_checked(reference_plan):
    """Every step's standard scratch off by 16 at once: the steps of one result that sum over axis 0, stage a
    conversion or have a view are named, each with the scratch its rule allows, and no other."""
    flow = dataflow(reference_plan)
    mutated = reference_plan
    for step in reference_plan.steps:
        scratch = ClassBytes(standard=step.scratch.standard + 16, interleaved=step.scratch.interleaved)
        mutated = with_step(mutated, step.index, scratch=scratch)
    shards, ruled = estimate(reference_plan).values, {}
    for step, step_flow in zip(reference_plan.steps, flow.steps):
        operation = step.parsed_operation
        if len(step_flow.writes) == 1 and (operation.sum_axis == 0 or operation.has_view
                                           or operation.conversion == "StageLogicalThenTransform"):
            shard = shards[step_flow.writes[0]].shard_bytes
            ruled[f"step {step.index}"] = f"{shard} or 0" if operation.has_view else step.scratch.standard
    named = {m.where: m.expected for m in check(mutated) if m.kind is MismatchKind.SCRATCH}
    assert named == ruled and len({type(e) for e in ruled.values()}) == 2

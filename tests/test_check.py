"""Mutation tests: any single change to a derived field or a partition count is caught and named."""

from __future__ import annotations

from dataclasses import replace

import pytest
from reference import with_step, with_value

from ipuplan.facts.check import MismatchKind, check, placement_problem
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

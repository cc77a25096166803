"""Consistency check: a plan's stored numbers against the estimate, plus layout legality; and the two
read-outs of a plan every report shares: what is live at a step, and what changed from another plan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from math import prod
from operator import attrgetter

import numpy as np

from ipuplan.facts.attention_families import AttentionFamily, attention_problems
from ipuplan.facts.dataflow import Dataflow
from ipuplan.facts.estimate import Estimate
from ipuplan.facts.gemm_families import KernelFamily, family_problems, sum_scratch
from ipuplan.facts.plan_exchange import sorted_unique
from ipuplan.facts.plan_facts import PlanFacts, plan_facts
from ipuplan.plan.format import Plan, Step, Value
from ipuplan.plan.layout import STANDARD, Layout, padding_problem_of, parse_layout


class MismatchKind(str, Enum):
    VALUE_BYTES = "value bytes"
    STEP_USAGE = "step usage"
    PLAN_PEAKS = "plan peaks and fit"
    LAYOUT = "layout placement"
    SCRATCH = "scratch rule"
    GEMM_FAMILY = "Gemm family"

    @property
    def structural(self) -> bool:
        """A rule of the format a rewrite cannot repair; the other kinds are stale numbers it recomputes."""
        return self in (MismatchKind.LAYOUT, MismatchKind.SCRATCH, MismatchKind.GEMM_FAMILY)


@dataclass(frozen=True)
class Mismatch:
    """One disagreement: `where` is a location such as ``value 12`` or ``step 3``.

    Either a stored number that differs from the `expected` one, or a broken rule (`rule`).
    """

    kind: MismatchKind
    where: str
    field: str
    stored: object = None
    expected: object = None
    rule: str = ""

    def __str__(self) -> str:
        if self.rule:
            return f"{self.where}: {self.field}: {self.rule}"
        return f"{self.where}: {self.field} is {self.stored!r}, expected {self.expected!r}"


@lru_cache(maxsize=65536)
def placement_problem(layout: Layout, chip_tiles: int) -> str | None:
    """Why a layout's tiling is not a valid placement, or None when it is."""
    if layout.tile_count != layout.replicas * layout.partition_product:
        return f"tile_count {layout.tile_count} != replicas {layout.replicas} x partitions {layout.partition_product}"
    if layout.tile_count > chip_tiles:
        return f"tile_count {layout.tile_count} exceeds the chip's {chip_tiles} tiles"
    placed = [(axis.partitions, axis.tile_stride) for axis in layout.axes if axis.tile_stride is not None]
    if not placed:
        return None
    if max(sum((p - 1) * s for p, s in placed), 0) >= layout.tile_count:
        return f"tile strides place a shard beyond tile {layout.tile_count - 1}"
    if len(sorted_unique(shard_offsets(placed))) != prod(p for p, _ in placed):
        return "tile strides put two shards on one tile"
    return None


def shard_offsets(placed: list[tuple[int, int]]) -> np.ndarray:
    """The tile offset of every shard of (partitions, stride) axes: all sums of one `index x stride` per axis."""
    offsets = np.zeros(1, dtype=np.int64)
    for partitions, stride in placed:
        offsets = np.add.outer(offsets, np.arange(partitions, dtype=np.int64) * stride).ravel()
    return offsets


@lru_cache(maxsize=65536)
def _placement_problem_of_text(layout: str, chip_tiles: int) -> str | None:
    """`placement_problem` keyed by the layout's text: a string keeps its hash, a Layout rehashes its whole tree."""
    return placement_problem(parse_layout(layout), chip_tiles)


SIZE_FIELDS = ("shard_bytes", "aligned_bytes", "bytes")
_sizes = attrgetter(*SIZE_FIELDS)
"""A value's stored sizes, or an estimate's, at once: most of a plan's agree, and then no field is compared alone."""


def _value_mismatches(value: Value, expected, chip_tiles: int) -> list[Mismatch]:
    found = []
    if _sizes(value) != _sizes(expected):
        found = [Mismatch(MismatchKind.VALUE_BYTES, _where(value), field, stored, computed)
                 for field, stored, computed in zip(SIZE_FIELDS, _sizes(value), _sizes(expected)) if stored != computed]
    problem = _placement_problem_of_text(value.layout, chip_tiles) or padding_problem_of(value.layout, tuple(value.shape))
    if problem:
        found.append(Mismatch(MismatchKind.LAYOUT, _where(value), "layout", rule=problem))
    return found


def _where(value: Value) -> str:
    return f"value {value.id} ({value.name})"


def _scratch_mismatches(plan: Plan, result: Estimate, flow: Dataflow) -> list[Mismatch]:
    """Scratch rules of PLAN_FORMAT.md where the step's result is known."""
    found = []
    for step, step_flow in zip(plan.steps, flow.steps):
        operation = step.parsed_operation
        if len(step_flow.writes) != 1:
            continue
        result_shard = result.values[step_flow.writes[0]].shard_bytes
        allowed: tuple[int, ...] | None = None
        if operation.sum_axis == 0 and len(step_flow.reads) == 1:
            allowed = (sum_scratch(plan.values[step_flow.reads[0]].shape[0], result_shard),)
        elif operation.conversion == "StageLogicalThenTransform":
            allowed = (result_shard,)
        elif operation.has_view:
            allowed = (result_shard, 0)
        if allowed is not None and step.scratch.standard not in allowed:
            expected = allowed[0] if len(allowed) == 1 else f"{' or '.join(map(str, allowed))}"
            found.append(Mismatch(MismatchKind.SCRATCH, f"step {step.index}", "scratch.standard", step.scratch.standard,
                                  expected))
    return found


def _top_level_mismatches(plan: Plan, result: Estimate) -> list[Mismatch]:
    found = [
        Mismatch(MismatchKind.PLAN_PEAKS, "plan", f"peak.{field}", getattr(plan.peak, field), getattr(result.peak, field))
        for field in ("standard", "interleaved", "total", "maximum_standard_allocation")
        if getattr(plan.peak, field) != getattr(result.peak, field)
    ]
    for field in (
        "total_peak_step",
        "standard_peak_step",
        "interleaved_peak_step",
        "effective_peak_bytes",
        "standard_contiguous_overflow_bytes",
        "fits_budget",
    ):
        if getattr(plan, field) != getattr(result, field):
            found.append(Mismatch(MismatchKind.PLAN_PEAKS, "plan", field, getattr(plan, field), getattr(result, field)))
    return found


def _family_mismatches(facts: PlanFacts) -> list[Mismatch]:
    """Gemm families whose layouts, operation string or Sum scratch disagree with one split.

    A large plan repeats a few dozen families thousands of times: a family alike (`_family_key`) to one found
    consistent is consistent too. Problems name values, so a family that has some is always checked itself.
    """
    plan = facts.plan
    consistent: set[tuple] = set()

    def problems(family, find) -> list[str]:
        key = _family_key(plan, family)
        if key in consistent:
            return []
        found = find(plan, family)
        if not found:
            consistent.add(key)
        return found

    plain = [(family.gemm_step, problem) for family in facts.families for problem in problems(family, family_problems)]
    heads = [(family.gemm_step, problem) for family in facts.attention
             for problem in problems(family, attention_problems)]
    return [Mismatch(MismatchKind.GEMM_FAMILY, f"step {step}", "Gemm family", rule=problem)
            for step, problem in plain + heads]


def _family_key(plan: Plan, family: KernelFamily | AttentionFamily) -> tuple:
    """Everything `family_problems` or `attention_problems` reads: the family's roles and axes, and its values and
    steps by what they hold (layout, shape, precision; operation, scratch) and which of them coincide, not by id."""
    if isinstance(family, KernelFamily):
        values = (family.left_source, family.left, family.right, family.partials, family.sum_result)
        rest = tuple(tuple(sorted(axes.items()))
                     for axes in (family.left_axes, family.right_axes, family.partial_axes, family.sum_axes))
    else:
        values = (family.left, family.right, family.result, family.sum_result)
        rest = tuple(family.roles[v] for v in family.members)
    steps = (family.gemm_step, family.sum_step)
    held = tuple(None if v is None else _value_content(plan.values[v]) for v in values)
    run = tuple(None if s is None else _step_content(plan.steps[s]) for s in steps)
    return type(family), rest, held, run, tuple(map(values.index, values)), tuple(map(steps.index, steps))


def _value_content(value: Value) -> tuple:
    return value.layout, tuple(value.shape), value.precision


def _step_content(step: Step) -> tuple:
    return step.operation, step.scratch.standard, step.scratch.interleaved


def check(plan: Plan, facts: PlanFacts | None = None) -> list[Mismatch]:
    """Every place where the plan disagrees with its own estimate or breaks a layout rule.

    `facts` are the plan's facts under its own budgets, when the caller has inferred them already.
    """
    facts = facts or plan_facts(plan)
    result = facts.estimate
    found: list[Mismatch] = []
    for value, expected in zip(plan.values, result.values):
        found += _value_mismatches(value, expected, plan.tile_count)
    for step in plan.steps:
        usage = step.usage
        if usage.standard == result.standard[step.index] and usage.interleaved == result.interleaved[step.index]:
            continue
        for cls, computed in (("standard", result.standard), ("interleaved", result.interleaved)):
            stored = getattr(step.usage, cls)
            if stored != computed[step.index]:
                found.append(Mismatch(MismatchKind.STEP_USAGE, f"step {step.index}", f"usage.{cls}", stored,
                                     computed[step.index]))
    found += _scratch_mismatches(plan, result, facts.flow)
    found += _family_mismatches(facts)
    found += _top_level_mismatches(plan, result)
    return found


def class_word(memory_class: str) -> str:
    return "standard" if memory_class == STANDARD else "interleaved"


UNDECIDED = "not decided by any freedom level"


@dataclass(frozen=True)
class LiveValue:
    """A value live at a step, as the explanation, the page and `ipuplan show` list it."""

    value_id: int
    name: str
    memory_class: str
    """"standard" or "interleaved"."""
    bytes: int
    frozen: str | None = None
    """Why the optimiser keeps its layout; None when it may move it (or no candidate space was asked)."""

    @property
    def state(self) -> str:
        return "free" if self.frozen is None else f"frozen: {self.frozen}"


def live_values(plan: Plan, result: Estimate, step: int, reasons: Mapping[int, object] | None = None) -> list[LiveValue]:
    """Every value live at `step`, largest first; with `reasons` (a candidate space's value -> why frozen, or
    None when free) each says whether it is frozen and why."""
    live = sorted(plan.steps[step].live, key=lambda v: (-result.values[v].bytes, v))
    return [LiveValue(v, plan.values[v].name, class_word(plan.values[v].memory_class), result.values[v].bytes,
                      _why_frozen(reasons, v)) for v in live]


def _why_frozen(reasons: Mapping[int, object] | None, value: int) -> str | None:
    if reasons is None:
        return None
    reason = reasons.get(value, UNDECIDED)
    return None if reason is None else str(reason)


@dataclass(frozen=True)
class ValueChange:
    """One value whose layout differs between two plans of one program."""

    value_id: int
    name: str
    old_layout: str
    new_layout: str
    old_class: str
    new_class: str
    old_bytes: int
    new_bytes: int


def value_changes(old: Plan, new: Plan, before: Estimate, after: Estimate) -> tuple[ValueChange, ...]:
    """Per value whose layout or class differs (the plans have the same values, in order), both estimates' bytes."""
    return tuple(
        ValueChange(a.id, a.name, a.layout, b.layout, a.memory_class, b.memory_class, before.values[a.id].bytes,
                    after.values[b.id].bytes)
        for a, b in zip(old.values, new.values)
        if a.layout != b.layout or a.memory_class != b.memory_class
    )

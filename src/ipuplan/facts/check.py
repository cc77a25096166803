"""Consistency check: a plan's stored numbers against the estimate, plus layout legality and the layout rules that one
plan shows (REPLAN.md: a layout group shares one layout, element-wise families are tiled as one unit, row reducers keep
rows whole); and the two read-outs of a plan every report shares: what is live at a step, and what changed from another
plan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from math import prod
from operator import attrgetter

import numpy as np

from ipuplan.facts.attention_families import AttentionFamily, attention_problems
from ipuplan.facts.dataflow import Dataflow, layout_group_of
from ipuplan.facts.elementwise_families import (
    OPERAND_COUNTS,
    ElementwiseFamily,
    FamilyKernel,
    Hold,
    Role,
    broadcast_dimensions,
    broadcast_problem,
    dimension_tiling,
)
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
    LAYOUT_GROUP = "layout group"
    ELEMENTWISE = "element-wise family"
    ROWS = "row-reducing kernel"

    @property
    def structural(self) -> bool:
        """A rule of the format a rewrite cannot repair; the other kinds are stale numbers it recomputes."""
        return self not in (MismatchKind.VALUE_BYTES, MismatchKind.STEP_USAGE, MismatchKind.PLAN_PEAKS)


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
    problem = (_placement_problem_of_text(value.layout, chip_tiles)
               or padding_problem_of(value.layout, tuple(value.shape)))
    if problem:
        found.append(Mismatch(MismatchKind.LAYOUT, _where(value), "layout", rule=problem))
    return found


def _values_mismatches(plan: Plan, result: Estimate) -> list[Mismatch]:
    """`_value_mismatches` of every value, in order: asked once per tensor (layout and shape) found fine, after that
    only of a value whose sizes differ (a large plan repeats a few hundred tensors over 50k values)."""
    found: list[Mismatch] = []
    fine: set[tuple] = set()
    for value, expected in zip(plan.values, result.values):
        tensor = (value.layout, tuple(value.shape))
        if tensor in fine and _sizes(value) == _sizes(expected):
            continue
        problems = _value_mismatches(value, expected, plan.tile_count)
        if problems:
            found += problems
        else:  # sizes alike, and no layout problem: the tensor's
            fine.add(tensor)
    return found


def _where(value: Value) -> str:
    return f"value {value.id} ({value.name})"


def _scratch_mismatches(plan: Plan, result: Estimate, flow: Dataflow) -> list[Mismatch]:
    """Scratch rules of PLAN_FORMAT.md where the step's result is known."""
    found = []
    for step, step_flow in zip(plan.steps, flow.steps):
        if len(step_flow.writes) != 1:
            continue
        operation = step.parsed_operation
        sums, stages, views = (operation.sum_axis == 0, operation.conversion == "StageLogicalThenTransform",
                               operation.has_view)
        if not (sums or stages or views):
            continue
        result_shard = result.values[step_flow.writes[0]].shard_bytes
        allowed: tuple[int, ...] | None = None
        if sums and len(step_flow.reads) == 1:
            allowed = (sum_scratch(plan.values[step_flow.reads[0]].shape[0], result_shard),)
        elif stages:
            allowed = (result_shard,)
        elif views:
            allowed = (result_shard, 0)
        if allowed is not None and step.scratch.standard not in allowed:
            expected = allowed[0] if len(allowed) == 1 else f"{' or '.join(map(str, allowed))}"
            found.append(Mismatch(MismatchKind.SCRATCH, f"step {step.index}", "scratch.standard", step.scratch.standard,
                                  expected))
    return found


def _top_level_mismatches(plan: Plan, result: Estimate) -> list[Mismatch]:
    found = [
        Mismatch(MismatchKind.PLAN_PEAKS, "plan", f"peak.{field}", getattr(plan.peak, field),
                 getattr(result.peak, field))
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


def _layout_group_mismatches(plan: Plan, group_of: list[int]) -> list[Mismatch]:
    """Members of one layout group laid out otherwise than the group's most common layout (the lowest id first among
    equals): an in-place result is its operand's storage, and a body argument stands for every layer it binds."""
    groups: dict[int, list[int]] = {}
    for value, group in enumerate(group_of):
        groups.setdefault(group, []).append(value)
    found = []
    for members in (m for m in groups.values() if len(m) > 1):
        layouts = [plan.values[m].layout for m in members]
        if len(set(layouts)) == 1:
            continue
        reference = most_common(members, layouts)
        found += [Mismatch(MismatchKind.LAYOUT_GROUP, _where(plan.values[m]), "layout", rule=(
            f"laid out otherwise than value {reference}: {_bond(plan, m, reference)} share one layout"))
            for m, layout in zip(members, layouts) if layout != plan.values[reference].layout]
    return found


def most_common(members: list[int], keys: list) -> int:
    """The member whose key most members share, the lowest id among equals."""
    counts: dict = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    return min(zip(members, keys), key=lambda pair: (-counts[pair[1]], pair[0]))[0]


def _bond(plan: Plan, value: int, other: int) -> str:
    """Why two values of one layout group are one: the same storage, or one parameter family."""
    a, b = plan.values[value], plan.values[other]
    if a.root == b.root:
        return f"in-place aliases of one storage (root {a.root})"
    return f"a body argument and the values of its group {a.group!r}"


LAYOUT_HOLDS = frozenset({Hold.TILED_APART, Hold.ROWS_SPLIT, Hold.MIXED_BROADCAST, Hold.PARAMETER_PLACEMENT})
"""The holds a family's own layouts cause: a family held only by one of these breaks REPLAN's level 4 rule. The
other holds (a kernel outside the family, an operand it cannot identify or whose shape differs) let its members be
tiled apart, as the reference plan's Sum-fed residual Adds and attention softmaxes are."""


@lru_cache(maxsize=65536)
def _tiling(shape: tuple[int, ...], layout: str) -> tuple:
    """`dimension_tiling` keyed by the layout's text (a Layout rehashes its whole tree)."""
    return dimension_tiling(shape, parse_layout(layout))


@lru_cache(maxsize=65536)
def _beside_problem(parameter_shape: tuple[int, ...], parameter: str, shape: tuple[int, ...],
                    layout: str) -> str | None:
    """`broadcast_problem` keyed by the layouts' texts."""
    return broadcast_problem(parameter_shape, parse_layout(parameter), shape, parse_layout(layout))


def _elementwise_mismatches(facts: PlanFacts, group_of: list[int]) -> list[Mismatch]:
    """REPLAN.md level 4 where the plan shows it: families whose members are not tiled as one unit, kernels whose
    operands the dataflow does not show and no live value laid out beside them can be, row reducers with split rows."""
    found = []
    for family in facts.elementwise:
        if family.hold is None or family.hold.rule in LAYOUT_HOLDS:
            found += _family_layout_mismatches(facts.plan, family, group_of)
        for kernel in family.kernels:
            found += _unshown_operand_mismatches(facts, kernel)
            if kernel.reduces_rows:
                found += _row_mismatches(facts.plan, kernel, group_of)
    return found


def _family_layout_mismatches(plan: Plan, family: ElementwiseFamily, group_of: list[int]) -> list[Mismatch]:
    """Full-shape members tiled otherwise than most of them, and broadcast parameters not cut and placed beside
    them. A member is excused when another value of its storage group in another layout group follows the rule: scope
    `program` stores a parameter sharded and its kernel reads the copy gathered beside the activation."""
    values = plan.values
    full = sorted(m for m, role in family.roles.items() if role is not Role.PARAMETER)
    if not full:
        return []
    tilings = [_tiling(tuple(values[m].shape), values[m].layout) for m in full]
    reference = values[most_common(full, tilings)]
    shape, own = tuple(reference.shape), _tiling(tuple(reference.shape), reference.layout)
    problems = {m: f"not tiled as value {reference.id} (every full-shape member is tiled alike)"
                for m, tiling in zip(full, tilings) if tiling != own}
    reduced = {v for kernel in family.kernels if kernel.reduces_rows for v in (*kernel.operands, *kernel.possible)}
    for m in (m for m in family.parameters if m not in reduced):  # a row reducer's: `_row_mismatches` says it
        problem = _beside_problem(tuple(values[m].shape), values[m].layout, shape, reference.layout)
        if problem is not None:
            problems[m] = f"a broadcast parameter not beside value {reference.id}: {problem}"
    kernel_of = {values[v].root: kernel for kernel in family.kernels
                 for v in (*kernel.operands, *kernel.possible, *kernel.results)}
    return [Mismatch(MismatchKind.ELEMENTWISE, _where(values[m]), "element-wise family",
                     rule=f"{_kernel_named(kernel_of.get(values[m].root, family.kernels[0]))}: {problem}")
            for m, problem in sorted(_unexcused(plan, problems, family.members, group_of).items())]


def _unexcused(plan: Plan, problems: dict[int, str], members, group_of: list[int]) -> dict[int, str]:
    """`problems` but those of a member with a twin among `members` (same storage group, another layout group) that
    has none: a gathered copy read in its stead."""
    fine: dict[int, set[int]] = {}
    for m in members:
        if m not in problems:
            fine.setdefault(plan.values[m].storage_group, set()).add(group_of[m])
    return {m: problem for m, problem in problems.items()
            if not fine.get(plan.values[m].storage_group, set()) - {group_of[m]}}


def _kernel_named(kernel: FamilyKernel) -> str:
    return f"{kernel.operation} at step {kernel.step}"


def _unshown_operand_mismatches(facts: PlanFacts, kernel: FamilyKernel) -> list[Mismatch]:
    """A kernel of known operand count whose dataflow shows fewer, when fewer live values laid out beside its
    activation can be the rest than are missing: an operand (a loop body's bias, which never dies at its Add) laid out
    where the kernel cannot read it. The layout is the only evidence of which live value is the operand, so a value
    laid out away from every kernel simply reads as no operand: the check sees it only when none is left."""
    count = OPERAND_COUNTS.get(kernel.operation)
    if count is None or not kernel.results:
        return []
    missing = count - len(kernel.operands)
    if missing <= len(kernel.possible):
        return []
    shown = ", ".join(map(str, kernel.operands)) or "nothing"
    return [Mismatch(MismatchKind.ELEMENTWISE, f"step {kernel.step}", "element-wise family", rule=(
        f"{kernel.operation} reads {count} operands, the dataflow shows {shown}, and {len(kernel.possible)} live "
        f"value(s) laid out beside its activation can be the {missing} other(s)"))]


def _row_mismatches(plan: Plan, kernel: FamilyKernel, group_of: list[int]) -> list[Mismatch]:
    """A row reducer's rows whole on a tile: each operand and result holding rows split over every dimension but the
    last (a LayerNormApply with per-part moments `[.., parts, 2]`, as the reference plan's MAP head, may cut the row
    into those parts), and each broadcast parameter whole beside the activation."""
    values = plan.values
    # a LayerNormMoments writes statistics, not rows
    holding = [*kernel.operands, *kernel.possible, *(() if kernel.operation == "LayerNormMoments" else kernel.results)]
    if not holding:
        return []
    full = tuple(values[kernel.results[0] if kernel.results else holding[0]].shape)
    rows = [v for v in holding if _holds_rows(tuple(values[v].shape), full)]
    parts = _moment_parts(plan, kernel, full)
    problems = {v: problem for v in rows if (problem := _row_split(values[v], parts)) is not None}
    activation = next((v for v in rows if tuple(values[v].shape) == full), None)
    if activation is not None:
        for v in holding:
            dimensions = broadcast_dimensions(values[v].shape, full)
            problem = None if not dimensions else _parameter_problem(values[v], values[activation])
            if problem is not None:
                problems[v] = problem
    return [Mismatch(MismatchKind.ROWS, _where(values[v]), "row-reducing kernel",
                     rule=f"{_kernel_named(kernel)} reduces over rows: {problem}")
            for v, problem in sorted(_unexcused(plan, problems, holding, group_of).items())]


def _holds_rows(shape: tuple[int, ...], full: tuple[int, ...]) -> bool:
    """A tensor of the kernel's rows: its rank and every dimension but the last (a softmax pads its rows)."""
    return len(shape) == len(full) and shape[:-1] == full[:-1]


def _moment_parts(plan: Plan, kernel: FamilyKernel, full: tuple[int, ...]) -> int:
    """The parts of per-part moments `[.., parts, 2]` a LayerNormApply reads, else 1."""
    if kernel.operation != "LayerNormApply":
        return 1
    shapes = [tuple(plan.values[v].shape) for v in kernel.operands]
    return next((s[-2] for s in shapes if len(s) == len(full) + 1 and s[:-2] == full[:-1] and s[-1] == 2), 1)


def _row_split(value: Value, parts: int) -> str | None:
    """How a value's rows are split (its last dimension or the flattened tensor in partitions), or None."""
    rank = len(value.shape)
    for axis in value.parsed_layout.axes:
        dimension = axis.axis.dimension(rank)
        if axis.partitions > 1 and (dimension is None or dimension == rank - 1) and axis.partitions != parts:
            return f"its rows are split ({axis.axis.text} in {axis.partitions} partitions)"
    return None


def _parameter_problem(parameter: Value, activation: Value) -> str | None:
    """Why a row reducer's broadcast parameter is not whole beside its activation, or None."""
    sharded = [axis for axis in parameter.parsed_layout.axes if axis.partitions > 1]
    if sharded:
        return (f"a broadcast parameter sharded ({sharded[0].axis.text} in {sharded[0].partitions} partitions), where "
                "it stays whole on every tile holding a row")
    problem = _beside_problem(tuple(parameter.shape), parameter.layout, tuple(activation.shape), activation.layout)
    return None if problem is None else f"a broadcast parameter not whole beside value {activation.id}: {problem}"


def check(plan: Plan, facts: PlanFacts | None = None) -> list[Mismatch]:
    """Every place where the plan disagrees with its own estimate or breaks a layout rule.

    `facts` are the plan's facts under its own budgets, when the caller has inferred them already.
    """
    facts = facts or plan_facts(plan)
    result = facts.estimate
    found = _values_mismatches(plan, result)
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
    group_of = layout_group_of(plan, facts.flow.bindings)
    found += _layout_group_mismatches(plan, group_of)
    found += _elementwise_mismatches(facts, group_of)
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


def live_values(plan: Plan, result: Estimate, step: int,
                reasons: Mapping[int, object] | None = None) -> list[LiveValue]:
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

"""The contract battery of issue 35: on every plan of models/, the optimiser's output is accepted by `against` in its
scope, and rewrites generated from the plan, each breaking one rule of REPLAN.md (or none), are refused by the rule
they break (or accepted) in every scope. `benchmarks/battery.py --contract` prints the same battery as a table.

Each rewrite is built from the input plan by the battery itself (layouts written by hand, never asked of the
optimiser), its derived fields recomputed, so that a refusal names the rule and not a stale number. The legal ones
apply one candidate of the scope's own space (another split of a family, another storage layout) or flip a class.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from math import prod

import pytest
from reference import ALL_PLANS, REFERENCE, with_step, with_value

from ipuplan import InfeasibleBudget, Plan, load_plan
from ipuplan.facts.check import placement_problem
from ipuplan.facts.dataflow import layout_group_of
from ipuplan.facts.elementwise_families import OPERAND_COUNTS, Role
from ipuplan.facts.plan_facts import PlanFacts, plan_facts
from ipuplan.plan.debug_syntax import Atom, Call, Struct, int_atom
from ipuplan.plan.format import Value
from ipuplan.plan.layout import INTERLEAVED, STANDARD, Axis, AxisTiling, Layout, format_layout
from ipuplan.replan.against import GATHER_OPERATION, against, gathered_name
from ipuplan.replan.pipeline import optimize
from ipuplan.replan.rewrite import apply_choice, with_derived_fields
from ipuplan.space.scopes import candidate_space
from ipuplan.space.types import CandidateSpace

SCOPES = ("storage", "kernels", "full", "program")
WIDE = ("full", "program")
"""The scopes with the classes and element-wise levels."""
Expected = tuple[str, str] | None
"""(rule, words a line of that rule holds), or None: the rewrite is legal in the scope."""


@dataclass(frozen=True)
class Rewrite:
    name: str
    plan: Plan
    expected: dict[str, Expected]
    """Per scope."""


def everywhere(rule: str, words: str = "") -> dict[str, Expected]:
    return {scope: (rule, words) for scope in SCOPES}


def legal_in(scopes: tuple[str, ...], rule: str, words: str = "") -> dict[str, Expected]:
    """Legal in `scopes`, refused by `rule` in the others."""
    return {scope: None if scope in scopes else (rule, words) for scope in SCOPES}


@dataclass
class Subject:
    """One plan, and what the generators look up in it: its facts, its space per scope, its layout groups."""

    plan: Plan
    facts: PlanFacts = field(init=False)

    def __post_init__(self) -> None:
        self.facts = plan_facts(self.plan)

    @cached_property
    def spaces(self) -> dict[str, CandidateSpace]:
        return {scope: candidate_space(self.facts, scope) for scope in SCOPES}

    @cached_property
    def groups(self) -> dict[int, tuple[int, ...]]:
        """Value -> every value of its layout group (the check's own grouping)."""
        of = layout_group_of(self.plan, self.facts.flow.bindings)
        members: dict[int, list[int]] = {}
        for value, group in enumerate(of):
            members.setdefault(group, []).append(value)
        return {value: tuple(members[group]) for value, group in enumerate(of)}

    def value(self, v: int) -> Value:
        return self.plan.values[v]

    def set_layout(self, members, layout: Layout, plan: Plan | None = None) -> Plan:
        """`plan` (the subject's by default) with `members` laid out as `layout`, derived fields recomputed."""
        plan = plan or self.plan
        text = format_layout(layout)
        for m in members:
            plan = with_value(plan, m, layout=text, memory_class=layout.memory_class)
        return with_derived_fields(plan)


def legal(layout: Layout, shape: tuple[int, ...], tiles: int) -> bool:
    """A placement the format allows, and no padding where an axis rejects it."""
    return placement_problem(layout, tiles) is None and layout.padding_problem(shape) is None


def flat(layout: Layout, shape: tuple[int, ...], partitions: int) -> Layout:
    """RowMajor over the flattened tensor in 4-element blocks, as values 36, 40 and 89 of the reference plan."""
    padding = "Reject" if prod(shape) % 4 == 0 else "Zero"
    axis = AxisTiling(Axis("Linear"), partitions, 1, 4, 4, 1, padding, None)
    return Layout(Atom("RowMajor"), partitions, 1, (axis,), layout.memory_class)


def other_tiling(value: Value, tiles: int) -> Layout:
    """A legal flat layout of `value` other than its own, in its class."""
    own = value.parsed_layout
    for partitions in (2, 4, 8, 3, 1):
        option = flat(own, tuple(value.shape), partitions)
        if option != own and legal(option, tuple(value.shape), tiles):
            return option
    raise AssertionError(f"no other flat layout for value {value.id}")


def other_class(layout: Layout) -> Layout:
    return replace(layout, memory_class=INTERLEAVED if layout.memory_class == STANDARD else STANDARD)


def mixed_radix(layout: Layout, partitions: tuple[int, ...], replicas: int) -> Layout:
    """`layout` cut into `partitions`, its placed axes given mixed-radix strides in their own stride order."""
    placed = sorted((axis.tile_stride, i) for i, axis in enumerate(layout.axes) if axis.tile_stride is not None)
    strides: list[int | None] = [None] * len(layout.axes)
    radix = 1
    for _, i in placed:
        strides[i] = radix
        radix *= partitions[i]
    return layout.with_tiling(partitions, tuple(strides), replicas)


def last_axis(layout: Layout, rank: int) -> int | None:
    """The position of the axis over the last dimension, if the layout lists one."""
    return next((i for i, a in enumerate(layout.axes) if a.axis.dimension(rank) == rank - 1), None)


def first_family(subject: Subject, test: Callable) -> object | None:
    """The first element-wise family of the plan that `test` accepts."""
    return next((family for family in subject.facts.elementwise if test(family)), None)


def structure_rewrites(s: Subject) -> Iterator[Rewrite]:
    """Rule `structure`: what every value and step keeps."""
    first = next(v for v in s.plan.values if s.facts.live.first[v.id] >= 0)
    yield Rewrite(f"value {first.id}: copies changed", with_derived_fields(with_value(s.plan, first.id, copies=2)),
                  everywhere("structure", "copies changed"))
    step = next(st for st in s.plan.steps if len(st.live) > 1 and st.index + 1 < len(s.plan.steps)
                and st.live[-1] in s.plan.steps[st.index + 1].live)
    dropped = with_derived_fields(with_step(s.plan, step.index, live=step.live[:-1]))
    yield Rewrite(f"step {step.index}: live value {step.live[-1]} dropped", dropped,
                  everywhere("structure", "live set changed"))


def check_rewrites(s: Subject) -> Iterator[Rewrite]:
    """Rule `check`: the layout rules one plan shows (layout groups, element-wise families, row reducers)."""
    yield from group_rewrites(s)
    yield from bias_rewrites(s)
    yield from row_rewrites(s)


def group_rewrites(s: Subject) -> Iterator[Rewrite]:
    """One member of a body argument's group in another class; an in-place result re-tiled without its operand."""
    bound = next((a for a in s.facts.flow.bindings if len(s.groups[a]) > 2), None)
    if bound is not None:
        member = next(m for m in s.groups[bound] if m != bound)
        moved = s.set_layout([member], other_class(s.value(member).parsed_layout))
        yield Rewrite(f"value {member} moved without its group {s.groups[bound]}", moved,
                      everywhere("check", "share one layout"))
    alias = next((v for v in s.plan.values if v.is_alias and v.id not in s.facts.flow.bindings), None)
    if alias is not None:
        moved = s.set_layout([alias.id], other_tiling(alias, s.plan.tile_count))
        yield Rewrite(f"in-place result {alias.id} re-tiled without its operand {alias.root}", moved,
                      everywhere("check", "in-place aliases"))


def bias_rewrites(s: Subject) -> Iterator[Rewrite]:
    """The first bias an element-wise kernel reads, whole over N; a loop body's bias (an operand the dataflow does not
    show, the only one its kernel can read) whole on one tile, with its layers."""
    family = first_family(s, lambda f: f.hold is None and not f.rows_whole and any(
        f.roles.get(v) is Role.PARAMETER for k in f.kernels for v in k.operands))
    if family is not None:
        bias = next(v for k in family.kernels for v in k.operands if family.roles.get(v) is Role.PARAMETER)
        layout = s.value(bias).parsed_layout
        whole = mixed_radix(layout, (1,) * len(layout.axes), layout.replicas)
        if whole != layout:
            yield Rewrite(f"bias {bias} whole over N", s.set_layout(s.groups[bias], whole),
                          everywhere("check", "not beside"))
    for family in s.facts.elementwise:
        for kernel in family.kernels:
            missing = OPERAND_COUNTS.get(kernel.operation, 0) - len(kernel.operands)
            if kernel.operation == "Add" and missing == len(kernel.possible) == 1:
                loop = kernel.possible[0]
                moved = s.set_layout(s.groups[loop], mixed_radix(s.value(loop).parsed_layout, (1,), 1))
                yield Rewrite(f"loop bias {loop} of step {kernel.step} whole on one tile", moved,
                              everywhere("check", "the dataflow shows"))
                return


def elementwise_rewrites(s: Subject) -> Iterator[Rewrite]:
    """Per element-wise family that no rule holds (REPLAN.md level 4): a full-shape member re-tiled apart from the
    others (where one is not their alias), every member's padding rule changed as one unit (the check sees the unit
    alike; the input shows the rule changed), a broadcast parameter one replica short (a parameter its kernel reads
    is refused by the check; one it only may read, a loop body's, drops out of the operands the layouts show, and
    only the input tells)."""
    for family in (f for f in s.facts.elementwise if f.hold is None):
        kernel = family.kernels[-1]
        where = f"{kernel.operation} at step {kernel.step}"
        full = [m for m in family.members if family.roles.get(m) is not Role.PARAMETER]
        apart = next((m for m in reversed(full) if set(full) - set(s.groups[m])), None)
        if apart is not None:
            moved = s.set_layout(s.groups[apart], other_tiling(s.value(apart), s.plan.tile_count))
            yield Rewrite(f"{where}: value {apart} tiled apart", moved, everywhere("check", "not tiled as"))
        unit = padded_as_one_unit(s, family.members)
        if unit is not None:
            yield Rewrite(f"{where}: every member's padding rule changed", unit, everywhere("scope"))
        parameter = next((v for v in family.parameters if s.value(v).parsed_layout.replicas > 1), None)
        if parameter is not None:
            own = s.value(parameter).parsed_layout
            short = mixed_radix(own, tuple(a.partitions for a in own.axes), own.replicas - 1)
            read = any(parameter in k.operands for k in family.kernels)
            yield Rewrite(f"{where}: parameter {parameter} one replica short",
                          s.set_layout(s.groups[parameter], short), everywhere("check" if read else "scope"))


def padded_as_one_unit(s: Subject, members) -> Plan | None:
    """`members` with every axis that rejects padding made to allow zero padding; None when none rejects it."""
    plan, changed = s.plan, False
    for m in members:
        layout = s.value(m).parsed_layout
        axes = tuple(replace(a, padding="Zero") if a.padding == "Reject" else a for a in layout.axes)
        if axes != layout.axes:
            plan, changed = with_value(plan, m, layout=format_layout(replace(layout, axes=axes))), True
    return with_derived_fields(plan) if changed else None


def row_rewrites(s: Subject) -> Iterator[Rewrite]:
    """A LayerNorm outside the loop: its input and output split over the row; its scale sharded over N, then one
    replica short."""
    family = first_family(s, lambda f: any(k.operation == "LayerNorm" and k.operands and not k.possible
                                           for k in f.kernels))
    if family is None:
        return
    kernel = next(k for k in family.kernels if k.operation == "LayerNorm")
    rows = [v for v in (*kernel.operands, *kernel.results) if family.roles.get(v) is not Role.PARAMETER]
    layout, shape = s.value(rows[0]).parsed_layout, tuple(s.value(rows[0]).shape)
    position = last_axis(layout, len(shape))
    if position is not None:
        partitions = tuple(2 if i == position else a.partitions for i, a in enumerate(layout.axes))
        split = mixed_radix(layout, partitions, layout.replicas)
        if legal(split, shape, s.plan.tile_count):
            members = [m for v in rows for m in s.groups[v]]
            yield Rewrite(f"rows of LayerNorm {kernel.step} split", s.set_layout(members, split),
                          everywhere("check", "its rows are split"))
    scale = next(v for v in kernel.operands if family.roles.get(v) is Role.PARAMETER)
    own = s.value(scale).parsed_layout
    position = last_axis(own, len(s.value(scale).shape))
    if position is not None:
        sharded = mixed_radix(own, tuple(2 if i == position else 1 for i in range(len(own.axes))), own.replicas)
        yield Rewrite(f"scale {scale} of LayerNorm {kernel.step} sharded", s.set_layout(s.groups[scale], sharded),
                      everywhere("check", "sharded"))
    short = mixed_radix(own, tuple(a.partitions for a in own.axes), own.replicas - 1)
    yield Rewrite(f"scale {scale} of LayerNorm {kernel.step} one replica short", s.set_layout(s.groups[scale], short),
                  everywhere("check", "replicas"))


def gemm_rewrites(s: Subject) -> Iterator[Rewrite]:
    """A Gemm's accumulate and weights fields, its left operand's class, its right operand's column block; a Copy's
    reuse_local."""
    family = s.facts.families[0]
    text = s.plan.steps[family.gemm_step].operation
    for key, old, new in (("accumulate", "accumulate: F16", "accumulate: F32"),
                          ("accumulate", "accumulate: F32", "accumulate: F16"),
                          ("weights", "weights: Standard", "weights: Interleaved"),
                          ("weights", "weights: Interleaved", "weights: Standard")):
        if old in text:
            changed = with_step(s.plan, family.gemm_step, operation=text.replace(old, new))
            yield Rewrite(f"Gemm {family.gemm_step}: {key} changed", changed, everywhere("scope", f"{key} changed"))
    left = s.value(family.left).parsed_layout
    yield Rewrite(f"Gemm {family.gemm_step}: left operand {family.left} in the other class",
                  s.set_layout(s.groups[family.left], other_class(left)), everywhere("scope", "class"))
    right = s.value(family.right).parsed_layout
    order = right.order
    if isinstance(order, Call) and order.args and isinstance(order.args[0], Struct):
        inner = order.args[0]
        block = int(inner.get("column_block").text) * 2
        changed = replace(right, order=Call(order.name, (inner.replace("column_block", int_atom(block)),)))
        yield Rewrite(f"Gemm {family.gemm_step}: right operand {family.right}'s column block", 
                      s.set_layout(s.groups[family.right], changed), everywhere("scope"))
    copy = next(st for st in s.plan.steps if "reuse_local: true" in st.operation)
    flipped = with_step(s.plan, copy.index, operation=copy.operation.replace("reuse_local: true", "reuse_local: false"))
    yield Rewrite(f"step {copy.index}: reuse_local changed", flipped, everywhere("scope", "reuse_local changed"))


def scope_rewrites(s: Subject) -> Iterator[Rewrite]:
    """Rule `scope`: a class-only group re-tiled, a value frozen in every scope re-tiled, a softmax operand re-tiled
    (its rows whole), a loop body's parameter moved off the kernels that may read it, a Sum's scratch in the other
    class."""
    group = next(g for g in s.spaces["full"].free if g.kind == "class")
    retiled = s.set_layout(group.members, other_tiling(s.value(group.members[0]), s.plan.tile_count))
    yield Rewrite(f"class-only group {group.members} re-tiled", retiled, everywhere("scope"))
    held = set.intersection(*({m for g in space.frozen for m in g.members} for space in s.spaces.values()))
    frozen = min(held)
    yield Rewrite(f"value {frozen}, frozen in every scope, re-tiled",
                  s.set_layout(s.groups[frozen], other_tiling(s.value(frozen), s.plan.tile_count)),
                  everywhere("scope", "frozen"))
    yield from softmax_rewrites(s)
    yield from unshown_operand_rewrites(s)
    total = next(st for st in s.plan.steps if st.parsed_operation.sum_axis == 0 and st.scratch.standard
                 and not st.scratch.interleaved)
    moved = with_step(s.plan, total.index, scratch=total.scratch.model_copy(
        update={"standard": 0, "interleaved": total.scratch.standard}))
    yield Rewrite(f"step {total.index}: Sum scratch in the other class", with_derived_fields(moved),
                  everywhere("scope", "stays in its class"))


def softmax_rewrites(s: Subject) -> Iterator[Rewrite]:
    """An AttentionSoftmax operand whose first split axis is cut in half as many partitions (rows stay whole)."""
    kernel = next((k for f in s.facts.elementwise for k in f.kernels if k.operation == "AttentionSoftmax"), None)
    if kernel is None or not kernel.operands:
        return
    value = s.value(kernel.operands[0])
    layout, shape = value.parsed_layout, tuple(value.shape)
    position = next(i for i, a in enumerate(layout.axes) if a.partitions > 1)
    partitions = tuple((a.partitions + 1) // 2 if i == position else a.partitions for i, a in enumerate(layout.axes))
    halved = mixed_radix(layout, partitions, layout.replicas)
    assert legal(halved, shape, s.plan.tile_count)
    yield Rewrite(f"softmax operand {value.id} of step {kernel.step} re-tiled",
                  s.set_layout(s.groups[value.id], halved), everywhere("scope"))


def unshown_operand_rewrites(s: Subject) -> Iterator[Rewrite]:
    """A loop body's parameter that one of several kernels may read (the dataflow does not show which), whole on one
    tile with its layers: the check cannot tell (another live value is the operand), the input can."""
    for family in s.facts.elementwise:
        for kernel in family.kernels:
            missing = OPERAND_COUNTS.get(kernel.operation, 0) - len(kernel.operands)
            if 0 < missing < len(kernel.possible):
                loop = kernel.possible[-1]
                whole = mixed_radix(s.value(loop).parsed_layout, (1,) * len(s.value(loop).parsed_layout.axes), 1)
                yield Rewrite(f"loop parameter {loop} of step {kernel.step} whole on one tile",
                              s.set_layout(s.groups[loop], whole), everywhere("scope"))
                return


def gather_sites(s: Subject) -> Iterator[tuple[int, int, bool]]:
    """(reading step, parameter, whether scope program may gather it there): each step run once without scratch
    that reads a program parameter held before it; the parameter's group in the program space says whether its
    gather level frees it (only kernels read it, no Gemm touches it)."""
    inputs = set(s.facts.flow.inputs)
    gatherable = {m for g in s.spaces["program"].free if g.kind == "gather" for m in g.members}
    for step in s.plan.steps:
        if step.execution_count != 1 or step.scratch.standard or step.scratch.interleaved:
            continue
        for value in s.facts.flow.steps[step.index].reads:
            if value in inputs and not s.value(value).is_alias and 0 <= s.facts.live.first[value] < step.index:
                yield step.index, value, value in gatherable


def with_gather(s: Subject, reading: int, parameter: int, layout: Layout | None = None) -> Plan:
    """A Copy inserted before `reading` that gathers `parameter` (kept as it is) into a new value laid out as
    `layout` (the parameter's own by default), written as REPLAN.md's "Optional scope `program`" says."""
    plan, original = s.plan, s.value(parameter)
    values, steps = list(plan.values), list(plan.steps)
    new, read = len(values), steps[reading]
    name = gathered_name(original, read.source, reading + 1)
    text = original.layout if layout is None else format_layout(layout)
    values.append(original.model_copy(update={"id": new, "root": new, "name": name, "group": name, "layout": text,
                                              "memory_class": (layout or original.parsed_layout).memory_class}))
    results = set(s.facts.live.born_at[reading]) - {parameter}
    gather = read.model_copy(update={"operation": GATHER_OPERATION, "live": [
        v for v in read.live if v not in results] + [new], "scratch": read.scratch.model_copy(
        update={"standard": 0, "interleaved": 0})})
    moved = [step.model_copy(update={"index": step.index + 1}) for step in steps[reading:]]
    moved[0] = moved[0].model_copy(update={"live": [*read.live, new]})
    timeline = plan.timeline.model_copy(update={"values": values, "steps": [*steps[:reading], gather, *moved]})
    return with_derived_fields(plan.model_copy(update={"timeline": timeline}))


def insertion_rewrites(s: Subject) -> Iterator[Rewrite]:
    """Rules `insertion` and `scope`: a gather of a parameter kept as it is (legal in scope program only), one whose
    copy is not laid out as its reader needs, and one of a parameter scope program does not gather (a Gemm's)."""
    sites = list(gather_sites(s))
    site = next(((step, value) for step, value, free in sites if free), None)
    if site is not None:
        reading, parameter = site
        yield Rewrite(f"gather of parameter {parameter} before step {reading}", with_gather(s, reading, parameter),
                      legal_in(("program",), "insertion", "inserted"))
        wrong = other_tiling(s.value(parameter), s.plan.tile_count)
        expected = everywhere("insertion", "inserted") | {"program": ("insertion", "layout")}
        yield Rewrite(f"gather of parameter {parameter} before step {reading}, copy laid out otherwise",
                      with_gather(s, reading, parameter, wrong), expected)
    held = next(((step, value) for step, value, free in sites if not free), None)
    if held is not None:
        reading, parameter = held
        expected = everywhere("insertion", "inserted") | {"program": ("scope", "gathers only")}
        yield Rewrite(f"gather of parameter {parameter} ({s.plan.steps[reading].parsed_operation.kind} at step "
                      f"{reading}), which scope program does not gather", with_gather(s, reading, parameter), expected)


def legal_rewrites(s: Subject) -> Iterator[Rewrite]:
    """What the scopes allow: a class-only group in the other class (full and program), another storage layout with
    another order (every scope), another split of a Gemm family and of an attention product (kernels and wider), of
    an element-wise family (full and wider)."""
    group = next(g for g in s.spaces["full"].free if g.kind == "class")
    flipped = s.set_layout(group.members, other_class(s.value(group.members[0]).parsed_layout))
    yield Rewrite(f"class-only group {group.members} in the other class", flipped, legal_in(WIDE, "scope", "frozen"))
    kinds = (("storage", "storage", SCOPES), ("kernel", "kernels", SCOPES[1:]), ("attention", "kernels", SCOPES[1:]),
             ("elementwise", "full", WIDE))
    for kind, scope, scopes in kinds:
        found = candidate_of(s, kind, scope)
        if found is not None:
            name, plan = found
            yield Rewrite(name, plan, legal_in(scopes, "scope"))


def candidate_of(s: Subject, kind: str, scope: str) -> tuple[str, Plan] | None:
    """The first free group of `kind` in `scope`'s space in its last candidate (for storage: the first whose order
    differs from the input's), applied to the plan."""
    space = s.spaces[scope]
    for g, group in enumerate(space.free):
        if group.kind != kind:
            continue
        own = s.value(group.members[0]).parsed_layout.order
        chosen = next((c for c in reversed(range(len(group.candidates))) if kind != "storage"
                       or group.candidates[c].layouts[0].order != own), None)
        if chosen is None or chosen == group.input_index:
            continue
        choice = tuple(chosen if i == g else other.input_index for i, other in enumerate(space.free))
        plan = with_derived_fields(apply_choice(s.plan, space, choice))
        return f"{kind} group {group.members[:4]} in candidate {chosen} ({group.candidates[chosen].label})", plan
    return None


GENERATORS = (structure_rewrites, check_rewrites, elementwise_rewrites, gemm_rewrites, scope_rewrites,
              insertion_rewrites, legal_rewrites)


def rewrites(subject: Subject) -> list[Rewrite]:
    return [rewrite for generate in GENERATORS for rewrite in generate(subject)]


def verdict(rewrite: Rewrite, scope: str, lines: list[str]) -> str | None:
    """Why `lines` (against's, in `scope`) are not what the rewrite expects there; None when they are."""
    expected = rewrite.expected[scope]
    if expected is None:
        return None if not lines else f"legal, refused: {lines[:2]}"
    rule, words = expected
    if not lines:
        return "illegal, accepted"
    if not any(line.startswith(f"{rule}: ") and words in line for line in lines):
        return f"refused, but not by {rule} ({words!r}): {lines[:2]}"
    return None


@dataclass
class Tally:
    """One plan and scope of the battery: how many rewrites of each kind, and what went wrong."""

    illegal: int = 0
    illegal_accepted: int = 0
    wrong_rule: int = 0
    legal: int = 0
    legal_refused: int = 0
    failures: list[str] = field(default_factory=list)


def run_battery(subject: Subject, scopes: tuple[str, ...] = SCOPES, extra: list[Rewrite] = ()) -> dict[str, Tally]:
    """Every generated rewrite of `subject`'s plan, and `extra` ones, judged by `against` in each of `scopes`."""
    tallies = {scope: Tally() for scope in scopes}
    for rewrite in [*rewrites(subject), *extra]:
        after = plan_facts(rewrite.plan)
        for scope in scopes:
            lines = against(subject.plan, rewrite.plan, scope, after_facts=after, before_facts=subject.facts,
                            space=subject.spaces[scope])
            tally, problem = tallies[scope], verdict(rewrite, scope, lines)
            if rewrite.expected[scope] is None:
                tally.legal += 1
                tally.legal_refused += problem is not None
            else:
                tally.illegal += 1
                tally.illegal_accepted += not lines
                tally.wrong_rule += bool(lines) and problem is not None
            if problem is not None:
                tally.failures.append(f"{scope}: {rewrite.name}: {problem}")
    return tallies


def output_rewrites(outputs: dict[str, Plan | None]) -> list[Rewrite]:
    """The optimiser's outputs (per scope; None where the budgets cannot be met) as rewrites of their input: each
    legal in its own scope and the wider ones within one timeline, refused in the narrower; scope program's legal in
    that scope alone (it inserts gathers)."""
    found = []
    for scope, plan in outputs.items():
        if plan is None:
            continue
        if scope == "program":
            expected = legal_in(("program",), "insertion", "inserted")
        else:
            expected = legal_in(SCOPES[SCOPES.index(scope):], "scope")
        found.append(Rewrite(f"the optimiser's output in scope {scope}", plan, expected))
    return found


CROSS = ("vit-so400m-finalist-5.json", "vit-so400m-finalist-5-tight.json", "vit-so400m-6layers-chip.json")
"""Plans optimised in every scope here; the others in scope full only (tests/test_models.py runs every one, and an
optimisation of unroll3 takes seconds)."""


def scopes_optimised(name: str) -> tuple[str, ...]:
    return SCOPES if name in CROSS else ("full",)


@pytest.fixture(scope="module")
def subject_of() -> Callable[[str], Subject]:
    """A plan's subject by file name, built once."""
    cache: dict[str, Subject] = {}

    def get(name: str) -> Subject:
        if name not in cache:
            cache[name] = Subject(load_plan(REFERENCE.parent / name))
        return cache[name]

    return get


@pytest.fixture(scope="module")
def output_of(subject_of) -> Callable[[str, str], Plan | None]:
    """The optimiser's output on a plan in a scope (one worker: deterministic), None when the budgets cannot be met;
    each run once."""
    cache: dict[tuple[str, str], Plan | None] = {}

    def get(name: str, scope: str) -> Plan | None:
        if (name, scope) not in cache:
            try:
                cache[name, scope] = optimize(subject_of(name).plan, workers=1, time_limit=10, scope=scope).plan
            except InfeasibleBudget:
                cache[name, scope] = None
        return cache[name, scope]

    return get


@pytest.mark.parametrize(("name", "scope"), [(p.name, scope) for p in ALL_PLANS for scope in scopes_optimised(p.name)])
def test_the_optimisers_output_is_accepted_in_its_scope(subject_of, output_of, name, scope):
    output = output_of(name, scope)
    if output is None:
        pytest.skip(f"the budgets of {name} cannot be met in scope {scope} (tests/test_models.py says so)")
    subject = subject_of(name)
    assert against(subject.plan, output, scope, before_facts=subject.facts, space=subject.spaces[scope]) == []


@pytest.mark.parametrize("name", [p.name for p in ALL_PLANS])
def test_each_generated_rewrite_is_judged_by_the_rule_it_breaks(subject_of, output_of, name):
    subject = subject_of(name)
    outputs = {scope: output_of(name, scope) for scope in scopes_optimised(name)}
    tallies = run_battery(subject, extra=output_rewrites(outputs))
    assert [failure for tally in tallies.values() for failure in tally.failures] == []
    for scope, tally in tallies.items():  # every rule has its rewrites, in every scope, and legal ones beside them
        assert tally.illegal >= 40 and tally.legal >= 1 + SCOPES.index(scope), (scope, tally)


def _issue_case(change: str) -> Plan:
    """The reference plan with one of issue 35's rewrites, derived fields recomputed."""
    s = Subject(load_plan(REFERENCE))
    layout = {v: s.value(v).parsed_layout for v in (1, 2, 20, 28, 67, 98, 134, 143)}
    if change == "value 4 flat":
        return s.set_layout([4], flat(layout[28], (1, 1, 1152), 2))
    if change == "weight 20 in the other class":
        return s.set_layout([20], other_class(layout[20]))
    if change == "value 67 on 729 tiles":
        return s.set_layout([67], mixed_radix(layout[67], (729, 1), 1))
    if change == "bias 2 one replica short":
        return s.set_layout([2], mixed_radix(layout[2], (2,), 728))
    if change == "LayerNorm 63 split over N":
        return s.set_layout([98, 99], mixed_radix(layout[98], (729, 2), 1))
    if change == "scale 28 sharded":
        return s.set_layout([28], mixed_radix(layout[28], (2,), 729))
    if change == "scale 28 on 700 tiles":
        return s.set_layout([28], mixed_radix(layout[28], (1,), 700))
    if change == "accumulate of step 12":
        text = s.plan.steps[12].operation.replace("accumulate: F16", "accumulate: F32")
        return with_step(s.plan, 12, operation=text)
    if change == "value 1 in the other class":
        return s.set_layout([1], other_class(layout[1]))
    if change == "softmax operand 143 re-tiled":
        return s.set_layout([143], mixed_radix(layout[143], (46, 16, 1), 1))
    assert change == "column block of value 134"
    inner = layout[134].order.args[0]
    order = Call(layout[134].order.name, (inner.replace("column_block", int_atom(32)),))
    return s.set_layout([134], replace(layout[134], order=order))


@pytest.mark.parametrize(("change", "scope", "line"), [
    ("value 4 flat", "full", ("check: value 4 (vit.encoder.layer0.attention_norm.scale): layout: laid out otherwise "
     "than value 5: a body argument and the values of its group 'vit.encoder.attention_norm.scale' share one layout")),
    ("weight 20 in the other class", "storage", ("check: value 20 (vit.encoder.layer0.mlp.up.weight): layout: laid out "
     "otherwise than value 21: a body argument and the values of its group 'vit.encoder.mlp.up.weight' share one "
     "layout")),
    ("value 67 on 729 tiles", "full", ("check: value 67 (operation 5 result 0): layout: laid out otherwise than value "
     "66: in-place aliases of one storage (root 66) share one layout")),
    ("bias 2 one replica short", "full", ("check: value 2 (vit.embedding.bias): element-wise family: Add at step 5: a "
     "broadcast parameter not beside value 3: 728 replicas where its activation has 729 groups")),
    ("LayerNorm 63 split over N", "full", ("check: value 98 (operation 24 result 0): row-reducing kernel: LayerNorm at "
     "step 63 reduces over rows: its rows are split (FromEnd(1) in 2 partitions)")),
    ("scale 28 sharded", "full", ("check: value 28 (vit.encoder.final_norm.scale): row-reducing kernel: LayerNorm at "
     "step 63 reduces over rows: a broadcast parameter sharded (FromStart(2) in 2 partitions), where it stays whole on "
     "every tile holding a row")),
    ("scale 28 on 700 tiles", "full", ("check: value 28 (vit.encoder.final_norm.scale): row-reducing kernel: LayerNorm "
     "at step 63 reduces over rows: a broadcast parameter not whole beside value 98: 700 replicas where its "
     "activation has 729 groups")),
    ("accumulate of step 12", "storage", ("scope: step 12: operation accumulate changed from F16 to F32 where scope "
     "storage allows no change (only a Gemm family or attention product re-split by scope kernels or wider rewrites "
     "an operation, and only its inner_block and output_columns)")),
    ("accumulate of step 12", "kernels", ("scope: step 12: operation accumulate changed from F16 to F32: split (pK=4, "
     "pM=10, pN=36) of the Gemm family rewrites only its inner_block and output_columns (expected 'Gemm { multiply: "
     "F8F143 { scale_exponent: -4 }, accumulate: F16, mode: Initialize, weights: Standard, inner_block: 288, "
     "output_columns: 96 }')")),
    ("value 1 in the other class", "full", ("scope: value 1 (vit.embedding.weight): class changed from "
     "'Ipu21Standard' to 'Ipu21Interleaved': an operand or result of the Gemm at step 2 keeps its class")),
    ("softmax operand 143 re-tiled", "full", ("scope: value 143 (operation 12 result 0): tiling or order changed where "
     "the classes level changes only its memory class")),
    ("column block of value 134", "kernels", ("scope: value 134 (operation 0 result 0): not laid out as split (pK=4, "
     "pM=8, pN=46) of the Gemm family at step 2 lays it out from the input (its class, order, padding and untouched "
     "numbers kept)")),
])
def test_the_issues_rewrites_are_refused_by_the_rule_they_break(reference_plan, change, scope, line):
    """Issue 35: each was accepted, the first seven by `check` (visible in one plan), the rest by `against`."""
    assert line in against(reference_plan, _issue_case(change), scope)


def test_an_input_that_breaks_a_layout_rule_is_refused_before_any_work(reference_plan):
    """The rules `check` gained are rules of the plan, as a Gemm family's are: `optimize` refuses such an input
    (exit 2) rather than freeze what breaks them and write a plan that breaks them too."""
    from ipuplan.errors import PlanError

    with pytest.raises(PlanError, match=r"input plan is inconsistent: value 67 \(operation 5 result 0\): layout: laid "
                                        "out otherwise than value 66"):
        optimize(_issue_case("value 67 on 729 tiles"), workers=1, time_limit=5)

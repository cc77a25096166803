"""Element-wise families (REPLAN.md, freedom level 4): the kernels that combine operands position by position,
or reduce over a row, with every full-shape operand and result they touch and the parameters they broadcast.

Recognised from the dataflow and the layouts, never from names:
- a family kernel is a step whose operation is element-wise (`ELEMENTWISE_KINDS`) or reduces over a row
  (`ROW_REDUCING_KINDS`); its operands are the values the dataflow shows it reading. Where an operation's
  operand count is known (`OPERAND_COUNTS`) and the dataflow shows fewer (a parameter that stays live after
  the step never dies there, as a loop body's bias does), the live values that can be the missing operand
  are its possible operands: the result's precision, a shape equal or broadcast to the result's, a body
  argument inside a loop and none outside one, laid out as the kernel must read it beside its activation;
- kernels that share a value join one family, and so do values that share a layout (in-place results and
  their root, a body argument and the values it stands for);
- a member of the kernels' result shape is an activation (a result, when a family kernel writes it); one whose
  shape has 1 where the result's does not is a broadcast parameter.

A family is held (it keeps its tiling, `FamilyHold` says which kernel and which rule) when a kernel outside it
reads or writes a member, an operand cannot be identified or has a shape that is neither the result's nor
broadcast to it, its full-shape members are not tiled alike, a row reducer's rows are split, or a parameter is
not tiled and placed beside its activation as the rule requires. The input is checked against the rule, never
assumed to follow it: the candidates a level derives for another split follow the same rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import Enum
from functools import lru_cache
from itertools import compress, product
from math import prod
from operator import attrgetter, ne

from ipuplan.facts.dataflow import Dataflow
from ipuplan.facts.exchange_proxy import placement
from ipuplan.facts.plan_exchange import TooLarge, replica_offsets
from ipuplan.plan.format import Plan, Step
from ipuplan.plan.layout import AxisTiling, Layout, parse_layout
from ipuplan.plan.operation import parse_operation

ELEMENTWISE_KINDS = frozenset({"Add", "Gelu"})
"""Operations that combine their operands position by position."""
ROW_REDUCING_KINDS = frozenset({"LayerNorm", "LayerNormMoments", "LayerNormApply", "AttentionSoftmax"})
"""Operations that reduce over a row (the last dimension): each row stays whole on a tile."""
FAMILY_KINDS = ELEMENTWISE_KINDS | ROW_REDUCING_KINDS
OPERAND_COUNTS = {"Add": 2, "Gelu": 1, "LayerNorm": 3}
"""Operands of the kinds whose count is known (LayerNorm: activation, scale, bias): only these have missing
operands inferred; for the others the dataflow's reads are all ipuplan knows."""


class Role(str, Enum):
    ACTIVATION = "activation"
    RESULT = "result"
    PARAMETER = "broadcast parameter"


class Hold(str, Enum):
    """What keeps a family's tiling: each a rule of REPLAN.md, freedom level 4."""

    OUTSIDE_READER = "read by a kernel outside the family"
    OUTSIDE_WRITER = "written by a kernel outside the family"
    OPERAND_UNKNOWN = "an operand the dataflow does not show, and no live value can be it"
    OPERAND_SHAPE = "an operand whose shape is neither the result's nor broadcast to it"
    TILED_APART = "full-shape members are not tiled alike"
    ROWS_SPLIT = "a kernel that reduces over a row has its rows split"
    MIXED_BROADCAST = "parameters broadcast over different dimensions"
    PARAMETER_PLACEMENT = "a broadcast parameter is not tiled and placed beside its activation"


LAYOUT_RULES = frozenset({Hold.TILED_APART, Hold.ROWS_SPLIT, Hold.MIXED_BROADCAST, Hold.PARAMETER_PLACEMENT})
"""The rules `_layout_holds` finds, asked only of a family no other rule holds: the only ones its layouts decide."""


@dataclass(frozen=True)
class FamilyHold:
    """Why a family keeps its tiling: the rule, the kernel it points at (its step and kind) and the member."""

    rule: Hold
    step: int | None = None
    operation: str = ""
    value: int | None = None
    detail: str = ""

    def __str__(self) -> str:
        kernel = f"{self.operation} at step {self.step}: " if self.step is not None else ""
        about = f"value {self.value} " if self.value is not None else ""
        return f"{kernel}{about}{self.rule.value}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class FamilyKernel:
    step: int
    operation: str
    """The step's operation kind."""
    operands: tuple[int, ...]
    """What the dataflow shows it reading."""
    possible: tuple[int, ...]
    """Live values that can be the operands the dataflow does not show (it reads some of them)."""
    results: tuple[int, ...]

    @property
    def reduces_rows(self) -> bool:
        return self.operation in ROW_REDUCING_KINDS


@dataclass(frozen=True)
class ElementwiseFamily:
    kernels: tuple[FamilyKernel, ...]
    members: tuple[int, ...]
    """Every value the kernels touch, with the values that share a layout with one (aliases, bound values)."""
    roles: dict[int, Role]
    """Member -> its role (a member of neither shape has none, and holds the family)."""
    shape: tuple[int, ...]
    """The kernels' result shape: every activation's and result's."""
    template: int
    """An activation: every full-shape member is tiled as it is."""
    broadcast: frozenset[int]
    """Dimensions the parameters broadcast over (size 1 in a parameter, more in the activations)."""
    carried_by: tuple[int, ...]
    """In-place steps outside the kernels that only pass a member's storage on (a loop's `Repeat` boundary)."""
    hold: FamilyHold | None

    @property
    def steps(self) -> frozenset[int]:
        """The steps that read and write members in whatever layout the family's split gives them."""
        return frozenset((*(kernel.step for kernel in self.kernels), *self.carried_by))

    @property
    def parameters(self) -> tuple[int, ...]:
        return tuple(m for m in self.members if self.roles.get(m) is Role.PARAMETER)

    @property
    def rows_whole(self) -> bool:
        """A kernel reduces over a row: the activations may be split over every dimension but the last."""
        return any(kernel.reduces_rows for kernel in self.kernels)


class _Judge:
    """The shape and layout rules of one recognition over `plan`, each judged once per distinct (shape, layout text):
    a large plan repeats a few dozen tensors thousands of times, and a `Layout` rehashes its whole tree where its
    text keeps its hash."""

    def __init__(self, plan: Plan) -> None:
        self.values = plan.values
        self.shapes = [tuple(value.shape) for value in plan.values]
        self.known: dict[tuple, object] = {}

    def _once(self, work: Callable, *arguments):
        """`work(*arguments)`, worked out once per distinct arguments."""
        key = (work, *arguments)
        found = self.known.get(key, self)
        if found is self:
            found = self.known[key] = work(*arguments)
        return found

    def broadcast(self, value: int, full: tuple[int, ...]) -> frozenset[int] | None:
        """`broadcast_dimensions` of a value's shape to `full`."""
        return self._once(broadcast_dimensions, self.shapes[value], full)

    def tiling(self, value: int) -> tuple:
        """`dimension_tiling` of a value."""
        return self._once(_tiling_of_text, self.shapes[value], self.values[value].layout)

    def problem(self, parameter: int, activation: int) -> str | None:
        """`broadcast_problem` of a parameter beside an activation, both as laid out."""
        return self._once(_problem_of_texts, self.shapes[parameter], self.values[parameter].layout,
                          self.shapes[activation], self.values[activation].layout)


def _tiling_of_text(shape: tuple[int, ...], layout: str) -> tuple:
    return dimension_tiling(shape, parse_layout(layout))


def _problem_of_texts(parameter_shape: tuple[int, ...], parameter: str, shape: tuple[int, ...],
                      layout: str) -> str | None:
    return broadcast_problem(parameter_shape, parse_layout(parameter), shape, parse_layout(layout))


def recognise_elementwise(plan: Plan, flow: Dataflow) -> tuple[ElementwiseFamily, ...]:
    """Every family of element-wise and row-reducing kernels, held or not, in the order of its first kernel."""
    judge = _Judge(plan)
    kernels = _kernels(plan, flow, judge)
    parent = list(range(len(plan.values)))
    for value in plan.values:
        if value.is_alias:
            _union(parent, value.id, value.root)
    for argument, bound in flow.bindings.items():
        for value_id in bound:
            _union(parent, argument, value_id)
    for kernel in kernels:
        touched = (*kernel.operands, *kernel.possible, *kernel.results)
        for value_id in touched[1:]:
            _union(parent, touched[0], value_id)
    components: dict[int, list[int]] = {}
    for value in plan.values:
        components.setdefault(_find(parent, value.id), []).append(value.id)
    by_component: dict[int, list[FamilyKernel]] = {}
    for kernel in kernels:
        touched = (*kernel.operands, *kernel.possible, *kernel.results)
        if touched:
            by_component.setdefault(_find(parent, touched[0]), []).append(kernel)
    return tuple(_family(plan, flow, judge, tuple(found), components[root]) for root, found in by_component.items())


def relaid_elementwise(before: Plan, families: tuple[ElementwiseFamily, ...], plan: Plan,
                       flow: Dataflow) -> tuple[ElementwiseFamily, ...]:
    """`recognise_elementwise(plan, flow)`, where `families` are `recognise_elementwise(before, flow)` under the very
    same dataflow. A family reads the layouts, shapes and precisions of its members and, through its kernels' possible
    operands, of the values live at its kernels; of the plans all else is compared (`_relaid_values`). While every
    kernel finds the same possible operands the families keep their members, and only those with a member relaid are
    found again (`_relaid_family`): a rewrite of 50k values relays 30k but changes few families (found afresh, they
    were 0.42 s of its re-check; so, 0.19 s)."""
    relaid = _relaid_values(before, plan)
    if relaid is None:
        return recognise_elementwise(plan, flow)
    changed, reshaped = relaid
    if not changed:
        return families
    judge = _Judge(plan)
    if not _possible_kept(plan, flow, judge, families, changed):  # a family may have joined or parted: found again
        return recognise_elementwise(plan, flow)
    return tuple(family if changed.isdisjoint(family.members) else _relaid_family(plan, flow, judge, family, reshaped)
                 for family in families)


def _relaid_values(before: Plan, plan: Plan) -> tuple[set[int], set[int]] | None:
    """The values relaid in `plan` from `before` (another layout, shape or precision: what `_Judge` reads), and those
    of them with another shape, where the two agree on all else the recognition reads (a value's id and storage; a
    step's index, loop, live set and operation); else None."""
    if len(before.values) != len(plan.values) or not _steps_read_alike(before.steps, plan.steps):
        return None
    changed: set[int] = set()
    reshaped: set[int] = set()
    for old, new in zip(before.values, plan.values):
        if old is new:
            continue
        if old.id != new.id or old.root != new.root:
            return None
        if old.shape != new.shape:
            reshaped.add(old.id)
            changed.add(old.id)
        elif old.layout != new.layout or old.precision != new.precision:
            changed.add(old.id)
    return changed, reshaped


def _steps_read_alike(olds: list[Step], news: list[Step]) -> bool:
    """Whether the recognition reads the same of two plans' steps (their index, loop and live set, and of an operation
    its kind and whether it moves or works in place), compared a field at a time: a rewrite writes every step's usage
    anew, but keeps its live set, the very same list."""
    if len(olds) != len(news) or any(list(map(read, olds)) != list(map(read, news)) for read in _STEP_FIELDS):
        return False
    return all(_operation_read(olds[s].operation) == _operation_read(news[s].operation)
               for s in compress(range(len(olds)), map(ne, map(_operation, olds), map(_operation, news))))


_STEP_FIELDS = (attrgetter("index"), attrgetter("execution_count"), attrgetter("live"))
_operation = attrgetter("operation")


def _operation_read(text: str) -> tuple[str, bool, bool]:
    """What the recognition reads of an operation (each worked out once per text: `Operation`)."""
    operation = parse_operation(text)
    return operation.kind, operation.is_mover, operation.is_in_place


def _relaid_family(plan: Plan, flow: Dataflow, judge: _Judge, family: ElementwiseFamily,
                   reshaped: set[int]) -> ElementwiseFamily:
    """`_family` of a family's kernels and members, some of them relaid: found again where a member's shape changed.
    Else its roles, its steps outside and the holds that read no layout are the family's own (`_family` reads no
    precision, and no layout but through `_layout_holds`), and only where none of those holds it are its layout holds
    found again."""
    if not reshaped.isdisjoint(family.members):
        return _family(plan, flow, judge, family.kernels, list(family.members))
    if family.hold is not None and family.hold.rule not in LAYOUT_RULES:
        return family
    # the family's shape is a member's, so it has full-shape members: `_family` asks for its layout holds
    holds = _layout_holds(judge, family.kernels, family.roles, family.template, _kernel_of(plan, family.kernels))
    hold = holds[0] if holds else None
    return family if hold == family.hold else replace(family, hold=hold)


def _possible_kept(plan: Plan, flow: Dataflow, judge: _Judge, families: tuple[ElementwiseFamily, ...],
                   changed: set[int]) -> bool:
    """Whether every kernel of `families` finds the same possible operands in `plan`, where only the `changed` values
    are relaid: found again only where one of them can be a possible operand (its storage live at the kernel) or is
    the kernel's own (its result's shape and precision, the activation they are judged beside)."""
    values, steps = plan.values, plan.steps
    roots = {values[v].root for v in changed}
    again = [kernel for family in families for kernel in family.kernels
             if kernel.results and _missing(kernel) > 0
             and not (roots.isdisjoint(steps[kernel.step].live)
                      and changed.isdisjoint(kernel.operands) and changed.isdisjoint(kernel.results))]
    if not again:
        return True
    written_at, sharing = _written_at_and_sharing(plan, flow)
    return all(_possible_operands(plan, flow, judge, kernel.step, written_at, sharing) == kernel.possible
               for kernel in again)


def _find(parent: list[int], v: int) -> int:
    while parent[v] != v:
        parent[v] = parent[parent[v]]
        v = parent[v]
    return v


def _union(parent: list[int], a: int, b: int) -> None:
    parent[_find(parent, a)] = _find(parent, b)


def _kernels(plan: Plan, flow: Dataflow, judge: _Judge) -> list[FamilyKernel]:
    """Every family kernel with its operands, possible operands and results."""
    written_at, sharing = _written_at_and_sharing(plan, flow)
    kernels = []
    for step, step_flow in zip(plan.steps, flow.steps):
        kind = step.parsed_operation.kind
        if kind not in FAMILY_KINDS:
            continue
        kernel = FamilyKernel(step.index, kind, step_flow.reads, (), step_flow.writes)
        if _missing(kernel) > 0 and step_flow.writes:
            possible = _possible_operands(plan, flow, judge, step.index, written_at, sharing)
            kernel = FamilyKernel(step.index, kind, step_flow.reads, possible, step_flow.writes)
        kernels.append(kernel)
    return kernels


def _written_at_and_sharing(plan: Plan, flow: Dataflow) -> tuple[dict[int, int], dict[int, list[int]]]:
    """Per value its first writer, and per storage root its versions (once: per kernel it was quadratic at 10k
    values)."""
    written_at = {v: steps[0] for v, steps in flow.writers.items()}
    sharing: dict[int, list[int]] = {}
    for value in plan.values:
        sharing.setdefault(value.root, []).append(value.id)
    return written_at, sharing


def _missing(kernel: FamilyKernel) -> int:
    """How many operands the dataflow does not show (a count known for the kernel's kind only)."""
    return OPERAND_COUNTS.get(kernel.operation, len(kernel.operands)) - len(kernel.operands)


def _operand_hold(kernel: FamilyKernel) -> FamilyHold | None:
    """A hold where an operand cannot be identified: fewer possible operands than missing ones, or none at all."""
    if _missing(kernel) <= len(kernel.possible) and (kernel.operands or kernel.possible):
        return None
    shown = ", ".join(map(str, kernel.operands)) or "nothing"
    return FamilyHold(Hold.OPERAND_UNKNOWN, kernel.step, kernel.operation,
                      detail=f"the dataflow shows it reading {shown}")


def _possible_operands(plan: Plan, flow: Dataflow, judge: _Judge, step: int, written_at: dict[int, int],
                       sharing: dict[int, list[int]]) -> tuple[int, ...]:
    """The live values that can be an operand the dataflow does not show: one per storage (its latest version that
    holds data at `step`: the root, or one written before; `sharing`: per storage root, its values), not the step's own
    operands or results, and laid out as the kernel must read them beside its activation."""
    values, step_flow, shapes = plan.values, flow.steps[step], judge.shapes
    result = step_flow.writes[0]
    full, precision = shapes[result], values[result].precision
    activation = next((v for v in step_flow.reads if shapes[v] == full), result)
    taken = {values[v].root for v in (*step_flow.reads, *step_flow.writes)}
    in_loop, bindings = plan.steps[step].execution_count > 1, flow.bindings
    latest: dict[int, int] = {}
    for root in plan.steps[step].live:
        if root in taken:  # every value of `sharing[root]` has that root
            continue
        for v in sharing.get(root, ()):
            if v != root and written_at.get(v, -1) >= step:
                continue
            if values[v].precision != precision or (v in bindings) != in_loop:
                continue
            if judge.broadcast(v, full) is None or not _readable_beside(judge, v, activation):
                continue
            current = latest.get(root)
            if current is None or written_at.get(v, -1) > written_at.get(current, -1):
                latest[root] = v
    return tuple(sorted(latest.values()))


def _readable_beside(judge: _Judge, value: int, activation: int) -> bool:
    """Whether a kernel beside `activation` can read `value` as it is laid out (the family rule, in the input)."""
    if judge.shapes[value] == judge.shapes[activation]:
        return judge.tiling(value) == judge.tiling(activation)
    return judge.problem(value, activation) is None


def broadcast_dimensions(shape: Iterable[int], full: Iterable[int]) -> frozenset[int] | None:
    """The dimensions `shape` broadcasts over to `full` (empty when equal), or None when it does not broadcast.

    >>> sorted(broadcast_dimensions([1, 1, 8], [1, 5, 8])), broadcast_dimensions([1, 8], [1, 5, 8])
    ([1], None)
    """
    shape, full = tuple(shape), tuple(full)
    if len(shape) != len(full) or any(a != b and a != 1 for a, b in zip(shape, full)):
        return None
    return frozenset(d for d, (a, b) in enumerate(zip(shape, full)) if a != b)


def _family(plan: Plan, flow: Dataflow, judge: _Judge, kernels: tuple[FamilyKernel, ...],
            members: list[int]) -> ElementwiseFamily:
    """The family of `kernels` over `members` (a component of shared values), with the first rule that holds it."""
    kernel_of = _kernel_of(plan, kernels)
    first = kernels[0]
    shape = judge.shapes[(*first.results, *first.operands, *first.possible)[0]]
    roles, shape_hold = _roles(judge, kernels, members, shape, kernel_of)
    carried, outside = _outside(plan, flow, members, {kernel.step for kernel in kernels})
    full = [m for m in members if roles.get(m) in (Role.ACTIVATION, Role.RESULT)]
    template = min(full) if full else members[0]
    parameters = [m for m in members if roles.get(m) is Role.PARAMETER]
    broadcast = judge.broadcast(parameters[0], shape) if parameters else frozenset()
    found = [hold for hold in map(_operand_hold, kernels) if hold is not None]
    found += [h for h in (shape_hold, outside) if h is not None]
    if not found and full:
        found += _layout_holds(judge, kernels, roles, template, kernel_of)
    return ElementwiseFamily(kernels, tuple(members), roles, shape, template, broadcast or frozenset(), carried,
                             found[0] if found else None)


def _kernel_of(plan: Plan, kernels: tuple[FamilyKernel, ...]) -> dict[int, FamilyKernel]:
    """Per storage root a kernel touches, the last kernel to touch it: the one a hold on a member names."""
    values = plan.values
    return {values[v].root: kernel for kernel in kernels for v in (*kernel.operands, *kernel.possible, *kernel.results)}


def _roles(judge: _Judge, kernels: tuple[FamilyKernel, ...], members: list[int], shape: tuple[int, ...],
           kernel_of: dict[int, FamilyKernel]) -> tuple[dict[int, Role], FamilyHold | None]:
    """Each member's role by its shape against the result shape; a hold for a member of neither shape."""
    values = judge.values
    written = {v for kernel in kernels for v in kernel.results}
    roles: dict[int, Role] = {}
    hold = None
    for m in members:
        dimensions = judge.broadcast(m, shape)
        if dimensions is None:
            if hold is None:
                kernel = kernel_of.get(values[m].root, kernels[0])
                hold = FamilyHold(Hold.OPERAND_SHAPE, kernel.step, kernel.operation, m,
                                  f"{list(values[m].shape)} beside {list(shape)}")
            continue
        roles[m] = Role.PARAMETER if dimensions else Role.RESULT if m in written else Role.ACTIVATION
    return roles, hold


def _outside(plan: Plan, flow: Dataflow, members: list[int],
             steps: set[int]) -> tuple[tuple[int, ...], FamilyHold | None]:
    """Steps outside the kernels that touch a member: movers absorb any layout, in-place steps that only pass one
    storage on carry it (returned), and any other kernel holds the family (the first one found)."""
    values = plan.values
    carried: set[int] = set()
    hold = None
    for m in members:
        readers = flow.readers.get(m, ())
        for step in (*readers, *flow.writers.get(m, ())):
            if step in steps or step in carried:
                continue
            operation = plan.steps[step].parsed_operation
            if operation.is_mover:
                continue
            touched = (*flow.steps[step].reads, *flow.steps[step].writes)
            if operation.is_in_place and len({values[v].root for v in touched}) == 1:
                carried.add(step)
            elif hold is None:
                rule = Hold.OUTSIDE_READER if step in readers else Hold.OUTSIDE_WRITER
                hold = FamilyHold(rule, step, operation.kind, m)
    return tuple(sorted(carried)), hold


def _layout_holds(judge: _Judge, kernels: tuple[FamilyKernel, ...], roles: dict[int, Role], template: int,
                  kernel_of: dict[int, FamilyKernel]) -> list[FamilyHold]:
    """Where the input's layouts break the family rule: full-shape members tiled apart, rows split under a row
    reducer, parameters broadcast differently or not tiled and placed beside the template."""
    values = judge.values
    shape, layout = judge.shapes[template], values[template].parsed_layout

    def hold(rule: Hold, m: int, detail: str = "") -> FamilyHold:
        kernel = kernel_of.get(values[m].root, kernels[0])
        return FamilyHold(rule, kernel.step, kernel.operation, m, detail)

    own = judge.tiling(template)
    found = [hold(Hold.TILED_APART, m) for m, role in roles.items()
             if role is not Role.PARAMETER and judge.tiling(m) != own]
    reducer = next((kernel for kernel in kernels if kernel.reduces_rows), None)
    if reducer is not None and any(a.partitions > 1 and a.axis.dimension(len(shape)) in (None, len(shape) - 1)
                                   for a in layout.axes):
        found.append(FamilyHold(Hold.ROWS_SPLIT, reducer.step, reducer.operation, template))
    parameters = [m for m, role in roles.items() if role is Role.PARAMETER]
    patterns = {judge.broadcast(m, shape) for m in parameters}
    if len(patterns) > 1:
        found.append(hold(Hold.MIXED_BROADCAST, parameters[0]))
    for m in parameters:
        problem = judge.problem(m, template)
        if problem is not None:
            found.append(hold(Hold.PARAMETER_PLACEMENT, m, problem))
    return found


@lru_cache(maxsize=65536)
def dimension_tiling(shape: tuple[int, ...], layout: Layout) -> tuple:
    """How a tensor is cut and placed, by dimension (-1: the flattened tensor), whatever its axes are called and
    its class: replicas, and per axis that cuts or pads its dimension, the numbers of the cut. Values of one shape
    tiled alike hold the same elements on the same tiles."""
    axes = []
    for axis in layout.axes:
        dimension = axis.axis.dimension(len(shape))
        size = prod(shape) if dimension is None else shape[dimension]
        if axis.partitions > 1 or axis.extent(size) != size:
            axes.append((-1 if dimension is None else dimension, *_cut(axis)))
    return layout.replicas, tuple(sorted(axes, key=repr))


def axis_blocks(axis: AxisTiling) -> tuple:
    """How an axis cuts its dimension into blocks (block size, padding): what a split keeps."""
    return axis.padding_groups, axis.block_size, axis.padding_multiple, axis.shard_padding_multiple, axis.padding


def _cut(axis: AxisTiling) -> tuple:
    """An axis's numbers but its name: what a parameter shares with its activation's axis on one dimension."""
    return axis.partitions, *axis_blocks(axis), axis.tile_stride if axis.partitions > 1 else None


@lru_cache(maxsize=65536)
def broadcast_problem(parameter_shape: tuple[int, ...], parameter: Layout, shape: tuple[int, ...],
                      layout: Layout) -> str | None:
    """Why a parameter is not tiled and placed as the family rule requires beside an activation, or None: over each
    dimension it does not broadcast over, cut exactly as the activation (partitions, blocks, padding, stride),
    whole over the others, `replicas` = the activation's replicas times its groups over the broadcast dimensions,
    and every tile holding an activation shard holding the matching parameter shard."""
    broadcast = broadcast_dimensions(parameter_shape, shape)
    if broadcast is None:
        return f"{list(parameter_shape)} does not broadcast to {list(shape)}"
    if any(a.axis.kind == "Linear" for a in (*layout.axes, *parameter.axes)):
        return "a flat (Linear) tiling has no dimension to broadcast over"
    own = {a.axis.dimension(len(shape)): a for a in parameter.axes}
    theirs = {a.axis.dimension(len(shape)): a for a in layout.axes}
    for dimension in sorted(set(own) | set(theirs)):
        mine, activation = own.get(dimension), theirs.get(dimension)
        split = mine is not None and mine.partitions > 1
        if dimension in broadcast or activation is None:
            if split:
                return f"split over dimension {dimension}, which its activation does not split"
        elif (split or activation.partitions > 1) and (mine is None or _cut(mine) != _cut(activation)):
            return f"dimension {dimension} is not cut as its activation's"
    groups = layout.replicas * prod(theirs[d].partitions for d in broadcast if d in theirs)
    if parameter.replicas != groups:
        return f"{parameter.replicas} replicas where its activation has {groups} groups"
    if not _beside(parameter_shape, parameter, shape, layout, broadcast):
        return "a tile holding an activation shard lacks the matching parameter shard"
    return None


def _beside(parameter_shape: tuple[int, ...], parameter: Layout, shape: tuple[int, ...], layout: Layout,
            broadcast: frozenset[int]) -> bool:
    """Every tile holding an activation shard holds the parameter's shard of the same index off `broadcast`, shards
    and replicas placed as docs/EXCHANGE.md defines (a placement too large to place holds nothing)."""
    try:
        held = set(_shards(parameter_shape, parameter, broadcast))
        return all(entry in held for entry in _shards(shape, layout, broadcast))
    except TooLarge:
        return False


def _shards(shape: tuple[int, ...], layout: Layout, broadcast: frozenset[int]) -> Iterable[tuple[int, tuple[int, ...]]]:
    """(tile, shard index over the dimensions not in `broadcast`) for every shard and replica of a layout."""
    where = placement(shape, layout)
    offsets = replica_offsets(where).tolist()
    for index in product(*(range(parts) for _, parts, _ in where.dimensions)):
        tile = sum(i * stride for i, (_, _, stride) in zip(index, where.dimensions))
        kept = tuple(i for d, i in enumerate(index) if d not in broadcast)
        yield from ((tile + offset, kept) for offset in offsets)

"""The candidate space: which values may change, and the layouts each may take.

Strategy generation, apart from the solver (as XLA's auto-sharding splits it): every free
group gets a list of candidate layouts with their byte costs; the solver only ever sees
indices and numbers. Everything not proven movable is frozen, with the reason.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from functools import lru_cache
from math import prod

from ipuplan.dataflow import Dataflow, dataflow
from ipuplan.errors import IpuplanError
from ipuplan.estimate import ValueBytes, amp_aligned_values, shard_bytes, value_bytes
from ipuplan.exchange import mapped_exchange_bytes
from ipuplan.format import Plan
from ipuplan.layout import MEMORY_CLASSES, Layout, parse_layout
from ipuplan.liveness import liveness

SCOPES = ("storage", "kernels")


MAX_CANDIDATES_PER_CLASS = 48


class UnknownScope(IpuplanError, ValueError):
    """A freedom level ipuplan does not offer."""


@dataclass(frozen=True)
class Candidate:
    """One way to lay out a group: everything a rewrite needs, and the bytes the model needs."""

    layouts: tuple[Layout, ...]
    """Per member of the group, in member order."""
    value_bytes: tuple[ValueBytes, ...]
    exchange_bytes: int
    """Bytes the group's mover steps send between tiles under this choice (see `exchange_cost`)."""
    scratch: tuple[tuple[int, int, int], ...] = ()
    """(step, standard, interleaved): scratch of steps that depend on this choice."""
    shapes: tuple[tuple[int, ...], ...] = ()
    """Per member, when the choice changes shapes (a kernel family's partials); empty otherwise."""
    operations: tuple[tuple[int, str], ...] = ()
    """(step, operation text) rewritten by this choice (a Gemm's inner_block and output_columns)."""
    label: str = ""

    def classes(self) -> tuple[str, ...]:
        return tuple(layout.memory_class for layout in self.layouts)


@dataclass(frozen=True)
class FreeGroup:
    members: tuple[int, ...]
    candidates: tuple[Candidate, ...]
    """`candidates[0]` is the input layout."""
    kind: str = "storage"


@dataclass(frozen=True)
class FrozenGroup:
    members: tuple[int, ...]
    reason: str


@dataclass(frozen=True)
class CandidateSpace:
    scope: str
    free: tuple[FreeGroup, ...]
    frozen: tuple[FrozenGroup, ...]

    @property
    def candidate_count(self) -> int:
        return sum(len(g.candidates) for g in self.free)


def layout_groups(plan: Plan, flow: Dataflow) -> list[tuple[int, ...]]:
    """Values that must share one layout: in-place aliases with their root, body arguments with their group."""
    parent = list(range(len(plan.values)))

    def find(v: int) -> int:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    def union(a: int, b: int) -> None:
        parent[find(a)] = find(b)

    for value in plan.values:
        union(value.id, value.root)
    for argument, members in flow.bindings.items():
        for member in members:
            union(argument, member)
    groups: dict[int, list[int]] = defaultdict(list)
    for value in plan.values:
        groups[find(value.id)].append(value.id)
    return [tuple(members) for members in groups.values()]


def freeze_reason(
    plan: Plan, flow: Dataflow, members: tuple[int, ...], context: Context, kernel_steps: frozenset[int] = frozenset()
) -> str | None:
    """Why a layout group must keep its layout, or None.

    Movers may read and write it; so may `kernel_steps`, the steps of a Gemm family that
    re-lays out the group together with its kernels.
    """
    values = plan.values
    if len({values[m].layout for m in members}) > 1:
        return "members (aliases or bound layers) have different layouts"
    for ambiguity in flow.ambiguities:
        if any(m in ambiguity.suspects for m in members):
            return f"involved in an ambiguity: {ambiguity}"
    for step in sorted({s for m in members for s in context.unknown_steps_of[m]}):
        return f"live at step {step}, an operation ipuplan does not know ({plan.steps[step].parsed_operation.kind})"
    readers = sorted({s for m in members for s in flow.readers.get(m, ())})
    writers = sorted({s for m in members for s in flow.writers.get(m, ())})
    if not readers:
        return "no reader identified (a kernel may read it without it dying there)"
    for step in readers + writers:
        operation = plan.steps[step].parsed_operation
        if not operation.is_mover and step not in kernel_steps:
            role = "read" if step in readers else "written"
            return f"{role} by {operation.kind} at step {step}"
    if not kernel_steps and any(m in context.aligned for m in members):
        return "AMP-aligned Gemm operand"
    return None


@dataclass(frozen=True)
class Context:
    unknown_steps_of: dict[int, tuple[int, ...]]
    aligned: frozenset[int]


def analysis_context(plan: Plan) -> Context:
    unknown: dict[int, list[int]] = defaultdict(list)
    for step in plan.steps:
        if not step.parsed_operation.is_known:
            for value_id in step.live:
                unknown[value_id].append(step.index)
    by_root: dict[int, tuple[int, ...]] = {}
    for value in plan.values:
        by_root[value.id] = tuple(unknown.get(value.root, ()))
    return Context(by_root, amp_aligned_values(plan, liveness(plan)))


def partition_options(blocks: int) -> list[int]:
    """The smallest partition count for each distinct number of blocks per shard.

    >>> partition_options(10)
    [1, 2, 3, 4, 5, 10]
    """
    options, count = [], 1
    while count <= blocks:
        options.append(count)
        per_shard = -(-blocks // count)
        if per_shard == 1:
            break
        count = -(-blocks // (per_shard - 1))
    return options


def partition_vectors(shape: tuple[int, ...], layout: Layout, tiles: int) -> list[tuple[int, ...]]:
    """One partition vector per distinct shard size, the fewest tiles for each, within `tiles`."""
    # shard elements -> (tiles used, vector); built axis by axis so that only distinct sizes survive.
    states: dict[int, tuple[int, tuple[int, ...]]] = {1: (1, ())}
    for axis in layout.axes:
        dimension = axis.axis.dimension(len(shape))
        size = prod(shape) if dimension is None else shape[dimension]
        blocks = axis.blocks(size)
        grown: dict[int, tuple[int, tuple[int, ...]]] = {}
        for extent, (used, vector) in states.items():
            for count in partition_options(blocks):
                if used * count > tiles:
                    break
                key = extent * -(-blocks // count) * axis.block_size
                if key not in grown or used * count < grown[key][0]:
                    grown[key] = (used * count, (*vector, count))
        states = grown
    return [vector for _, vector in sorted(states.values())]


def placed_strides(layout: Layout, partitions: tuple[int, ...]) -> tuple[int | None, ...]:
    """Mixed-radix strides over the axes the input placed, in the input's stride order: distinct tiles."""
    placed = sorted((axis.tile_stride, position) for position, axis in enumerate(layout.axes) if axis.tile_stride is not None)
    strides: list[int | None] = [None] * len(layout.axes)
    radix = 1
    for _, position in placed:
        strides[position] = radix
        radix *= partitions[position]
    return tuple(strides)


@lru_cache(maxsize=65536)
def tiling_signature(rank: int, layout: Layout) -> tuple:
    """How a tensor is cut and placed, independent of replicas and memory class."""
    return tuple(
        sorted(
            (axis.axis.dimension(rank) if axis.axis.kind != "Linear" else -1, axis.partitions, axis.block_size, axis.tile_stride)
            for axis in layout.axes
            if axis.partitions > 1
        )
    )


@dataclass(frozen=True)
class Move:
    """A mover step between a group member and a value outside the group."""

    position: int
    """The member's position in its group."""
    outgoing: bool
    """True when the member is the source (it is read), False when it is the result."""
    other: Layout
    other_shape: tuple[int, ...]
    logical_bytes: int


def moved_tensors(plan: Plan, flow: Dataflow, members: tuple[int, ...]) -> list[Move]:
    """Every mover step between a member and a non-member, with the other side's layout."""
    values = plan.values
    moved = []
    for position, member in enumerate(members):
        logical = prod(values[member].shape) * values[member].element_size
        for step in (*flow.readers.get(member, ()), *flow.writers.get(member, ())):
            step_flow = flow.steps[step]
            outgoing = member in step_flow.reads or member in flow.bindings
            for other in step_flow.writes if outgoing else step_flow.reads:
                if other not in members:
                    value = values[other]
                    moved.append(Move(position, outgoing, value.parsed_layout, tuple(value.shape), logical))
    return moved


def exchange_cost(plan: Plan, members: tuple[int, ...], moved: list[Move], layouts: tuple[Layout, ...]) -> int:
    """Bytes the group's mover steps send between tiles if its members take `layouts`.

    From the tile mappings (`ipuplan.exchange`) when both sides have one shape; between
    shapes (slices, views, padding) the whole tensor unless both sides are tiled identically.
    The other side is taken at its input layout, which keeps the cost linear in the choice.
    """
    total = 0
    for move in moved:
        value = plan.values[members[move.position]]
        own = layouts[move.position]
        if tuple(value.shape) == move.other_shape:
            source, target = (own, move.other) if move.outgoing else (move.other, own)
            total += mapped_exchange_bytes(move.other_shape, value.element_size, source, target)
        elif tiling_signature(len(value.shape), own) != tiling_signature(len(move.other_shape), move.other):
            total += move.logical_bytes
    return total


@lru_cache(maxsize=4096)
def layout_options(layout: Layout, shape: tuple[int, ...], element_size: int, tiles: int) -> tuple[tuple[Layout, int], ...]:
    """(layout, shard bytes) for each distinct shard size and memory class, at most the input's shard.

    At most MAX_CANDIDATES_PER_CLASS per class, spread over the sizes, the smallest always kept.
    """
    original = shard_bytes(shape, element_size, layout)
    tiled = []
    for partitions in partition_vectors(shape, layout, tiles):
        replicas = max(1, min(layout.replicas, tiles // prod(partitions)))
        option = layout.with_tiling(partitions, placed_strides(layout, partitions), replicas)
        size = shard_bytes(shape, element_size, option)
        if size <= original:
            tiled.append((option, size))
    tiled.sort(key=lambda pair: pair[1])
    if len(tiled) > MAX_CANDIDATES_PER_CLASS:
        stride = len(tiled) / MAX_CANDIDATES_PER_CLASS
        tiled = [tiled[int(i * stride)] for i in range(MAX_CANDIDATES_PER_CLASS)]
    options = [(replace(option, memory_class=c), size) for c in MEMORY_CLASSES for option, size in tiled]
    return tuple((option, size) for option, size in options if option != layout)


def candidates_for(
    plan: Plan, flow: Dataflow, members: tuple[int, ...], aligned: frozenset[int], ratios: list[tuple[int, int, int, int]]
) -> tuple[Candidate, ...]:
    """The input layout first, then every distinct smaller-or-equal shard size in each memory class.

    `ratios` are (step, member position, standard, interleaved): scratch that is a whole
    multiple of a member's shard keeps that multiple.
    """
    values = plan.values
    base = values[members[0]]
    layout = parse_layout(base.layout)
    moved = moved_tensors(plan, flow, members)

    def candidate(option: Layout) -> Candidate:
        sizes = tuple(value_bytes(values[m], m in aligned, option) for m in members)
        scratch = tuple(
            (step, sizes[position].shard_bytes * standard, sizes[position].shard_bytes * interleaved)
            for step, position, standard, interleaved in ratios
        )
        layouts = (option,) * len(members)
        return Candidate(layouts, sizes, exchange_cost(plan, members, moved, layouts), scratch)

    shape = tuple(base.shape)
    options = layout_options(layout, shape, base.element_size, plan.tile_count)
    return (candidate(layout), *(candidate(option) for option, _ in options))


def scratch_ratios(plan: Plan, flow: Dataflow, members: tuple[int, ...]) -> tuple[list[tuple[int, int, int, int]], str | None]:
    """(step, member position, standard ratio, interleaved ratio) for steps whose scratch scales with a member."""
    ratios = []
    for position, member in enumerate(members):
        for step in flow.writers.get(member, ()):
            scratch = plan.steps[step].scratch
            if scratch.standard == scratch.interleaved == 0:
                continue
            value = plan.values[member]
            shard = shard_bytes(value.shape, value.element_size, value.parsed_layout)
            if len(flow.steps[step].writes) != 1 or shard == 0 or scratch.standard % shard or scratch.interleaved % shard:
                return [], f"scratch of step {step} is not a whole multiple of its result's shard"
            ratios.append((step, position, scratch.standard // shard, scratch.interleaved // shard))
    return ratios, None


def candidate_space(plan: Plan, scope: str = "storage", flow: Dataflow | None = None) -> CandidateSpace:
    """Free groups with their candidates, and frozen groups with their reasons."""
    if scope not in SCOPES:
        raise UnknownScope(f"unknown scope {scope!r}; choose one of: {', '.join(SCOPES)}")
    flow = flow or dataflow(plan)
    context = analysis_context(plan)
    free, frozen = [], []
    groups = layout_groups(plan, flow)
    claimed: set[int] = set()
    if scope == "kernels":
        from ipuplan.kernels import kernel_groups

        kernel_free, kernel_frozen = kernel_groups(plan, flow, context, groups)
        free += kernel_free
        frozen += kernel_frozen
        claimed = {m for group in (*kernel_free, *kernel_frozen) for m in group.members}
    for members in groups:
        if claimed.intersection(members):
            continue
        reason = freeze_reason(plan, flow, members, context)
        if reason is not None:
            frozen.append(FrozenGroup(members, reason))
            continue
        ratios, reason = scratch_ratios(plan, flow, members)
        if reason is not None:
            frozen.append(FrozenGroup(members, reason))
            continue
        candidates = candidates_for(plan, flow, members, context.aligned, ratios)
        if len(candidates) == 1:
            frozen.append(FrozenGroup(members, "no other legal layout is smaller"))
        else:
            free.append(FreeGroup(members, candidates))
    return CandidateSpace(scope, tuple(free), tuple(frozen))

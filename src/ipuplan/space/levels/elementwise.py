"""Freedom level `elementwise` (part of scope `full`; REPLAN.md, freedom level 4): each element-wise family
(`facts.elementwise_families`) re-tiled as one unit.

A split gives each tiled dimension of the family's activations a partition count (the last one stays whole
under a kernel that reduces over a row). Every full-shape member is cut alike; each broadcast parameter is cut
exactly as the activations over the dimensions it does not broadcast over, whole over the others, with
`replicas` = the activations' groups over those; strides are mixed radix, the parameters' dimensions innermost,
so each parameter shard sits on every tile that holds its activation shards. Orders, padding rules and classes
stay; a family whose orders hold no block size (`RowMajor`) may also cut into any block size dividing its own.
Candidates: the input first, then the Pareto front of the members' bytes per tile over every split within the
chip, at most `MAX_SPLITS` spread over the front, as the Gemm level does: the rest of the front is carried by its
bytes (`LeftOut`) for the bound over the whole scope, and `promote` makes any of it candidates.

A family that a rule holds, that shares a group with a value an earlier level claimed, or whose split cannot
change is left to the levels after this one: the classes level may still move its values' class, and the last
level freezes them by the kernel that reads them (the family's own reason: `ElementwiseFamily.hold`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import product
from math import prod

import numpy as np

from ipuplan.facts.elementwise_families import (
    ElementwiseFamily,
    Role,
    axis_blocks,
)
from ipuplan.facts.estimate import value_bytes
from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.plan.layout import AxisTiling, Layout, ceil_div
from ipuplan.space import rules
from ipuplan.space.levels.gemm import MAX_SPLITS, SplitSearch, pareto_front, split_grid
from ipuplan.space.levels.storage_layouts import partition_options
from ipuplan.space.types import Candidate, Decisions, FreeGroup, LeftOut

KIND = "elementwise"
UNIT = "element-wise"
"""What a report calls one of this level's families."""
"""The kind of the free groups this level makes (their left-out splits are promoted by `promote`)."""
Split = tuple[tuple[int, int], ...]
"""(block size, partitions) per axis of the family's template (its activation), in the template's axis order."""
BLOCK_FREE_ORDERS = frozenset({"RowMajor"})
"""Orders whose text holds no block size: a family all of these orders may take smaller blocks."""


@dataclass(frozen=True)
class _SplitsAt:
    """Split `i` of the search as ((block, partitions) per axis): built only for the splits the front keeps, not
    for every row of every block choice's grid."""

    blocks: np.ndarray
    partitions: np.ndarray

    def __getitem__(self, i: int) -> tuple[tuple[int, int], ...]:
        return tuple(zip(self.blocks[i].tolist(), self.partitions[i].tolist()))


class _Cuts:
    """The family's tiled dimensions, the partition counts each may take, and the shard sizes a split gives, for
    one choice of block sizes."""

    def __init__(self, facts: PlanFacts, family: ElementwiseFamily, blocks: tuple[int, ...] | None = None) -> None:
        values = facts.plan.values
        self.family, self.values = family, values
        template = values[family.template]
        self.own, self.shape = template.parsed_layout, tuple(template.shape)
        self.blocks = blocks or tuple(axis.block_size for axis in self.own.axes)
        self.layout = replace(self.own, axes=tuple(map(_with_block, self.own.axes, self.blocks)))
        rank = len(self.shape)
        self.dimensions = tuple(axis.axis.dimension(rank) for axis in self.layout.axes)
        sizes = [prod(self.shape) if d is None else self.shape[d] for d in self.dimensions]
        self.counts = [axis.blocks(size) for axis, size in zip(self.layout.axes, sizes)]
        """Blocks per axis: a flat tensor has millions, so shard sizes are computed for the splits asked only."""
        tiled = set(self.dimensions)
        self.whole = prod(size for d, size in enumerate(self.shape) if d not in tiled)
        self.parameter_whole = prod(size for d, size in enumerate(self.shape) if d not in tiled | family.broadcast)

    def block_choices(self) -> list[tuple[int, ...]]:
        """Every choice of block sizes: per axis its own, or (orders permitting) any size dividing it; the input's
        first, then those closest to it, so that of splits with equal bytes the front keeps the least changed."""
        orders = {self.values[m].parsed_layout.order_kind for m in self.family.members}
        per_axis = []
        for position, axis in enumerate(self.own.axes):
            free = orders <= BLOCK_FREE_ORDERS and not self._fixed(position)
            per_axis.append([b for b in range(1, axis.block_size + 1) if axis.block_size % b == 0] if free
                            else [axis.block_size])
        own = tuple(axis.block_size for axis in self.own.axes)
        return sorted(product(*per_axis), key=lambda blocks: (sum(map(int.__ne__, blocks, own)), [-b for b in blocks]))

    def options(self) -> list[list[int]]:
        """Per template axis, the partition counts it may take: its own alone where a rule fixes it."""
        return [[axis.partitions] if self._fixed(position) else partition_options(self.counts[position])
                for position, axis in enumerate(self.layout.axes)]

    def _fixed(self, position: int) -> bool:
        """The row of a row reducer, and a dimension some member does not cut by the template's blocks."""
        dimension = self.dimensions[position]
        if self.family.rows_whole and dimension in (None, len(self.shape) - 1):
            return True
        blocks = axis_blocks(self.own.axes[position])
        for m in self.family.members:
            if self.family.roles.get(m) is Role.PARAMETER and dimension in self.family.broadcast:
                continue
            own = {a.axis.dimension(len(self.shape)): a for a in self.values[m].parsed_layout.axes}.get(dimension)
            if own is None or axis_blocks(own) != blocks:
                return True
        return False

    def vectors(self, splits: np.ndarray) -> np.ndarray:
        """Per split: elements per shard of an activation, and of a parameter (when the family has one)."""
        activation = np.full(len(splits), self.whole, dtype=np.int64)
        parameter = np.full(len(splits), self.parameter_whole, dtype=np.int64)
        for position, dimension in enumerate(self.dimensions):
            extent = ceil_div(self.counts[position], splits[:, position]) * self.layout.axes[position].block_size
            activation = activation * extent
            if dimension not in self.family.broadcast:
                parameter = parameter * extent
        return np.column_stack((activation, parameter)) if self.family.parameters else activation[:, None]


def _with_block(axis: AxisTiling, block: int) -> AxisTiling:
    """The axis cut into blocks of `block` elements, its padding rule kept (a multiple of the block stays one)."""
    if block == axis.block_size:
        return axis
    multiple = block if axis.padding_multiple == axis.block_size else axis.padding_multiple
    return replace(axis, block_size=block, padding_multiple=multiple)


def splits_of(facts: PlanFacts, family: ElementwiseFamily, members: rules.LayoutGroup) -> SplitSearch:
    """The input's split, then the Pareto-best others over every block choice by bytes per tile (at most
    MAX_SPLITS, spread over the front); the rest of the front left out, with each member's shard bytes under it.
    A split off the front is dominated: a split of the front has, member by member, no more bytes."""
    first = _Cuts(facts, family)
    own = tuple((axis.block_size, axis.partitions) for axis in first.own.axes)
    block_rows, grids, vectors = [], [], []
    for blocks in first.block_choices():
        cuts = _Cuts(facts, family, blocks)
        grid = split_grid(cuts.options(), facts.plan.tile_count // cuts.layout.replicas)
        block_rows.append(np.tile(np.array(blocks, dtype=np.int64), (len(grid), 1)))
        grids.append(grid)
        vectors.append(cuts.vectors(grid))
    if not any(len(grid) for grid in grids):
        return SplitSearch([own], [], {})
    vectors = np.concatenate(vectors)
    front = np.array(pareto_front(vectors), dtype=np.int64)
    found = _SplitsAt(np.concatenate(block_rows), np.concatenate(grids))
    kept = front
    if len(front) > MAX_SPLITS:
        order = np.argsort(vectors[front].sum(axis=1), kind="stable")
        kept = front[[order[int(i * len(order) / MAX_SPLITS)] for i in range(MAX_SPLITS)]]
    rest = np.array([i for i in np.setdiff1d(front, kept).tolist() if found[i] != own], dtype=np.int64)
    values = facts.plan.values
    column = {m: 1 if family.roles.get(m) is Role.PARAMETER else 0 for m in members}
    shards = {m: vectors[rest, column[m]] * values[m].element_size for m in members} if len(rest) else {}
    return SplitSearch([own, *(found[i] for i in kept.tolist() if found[i] != own)], [found[i] for i in rest.tolist()],
                       shards)


def split_layouts(facts: PlanFacts, family: ElementwiseFamily, members: rules.LayoutGroup,
                  split: Split) -> tuple[Layout, ...]:
    """Every member's layout under `split`: full-shape members cut as the template, parameters beside them."""
    values = facts.plan.values
    template = values[family.template].parsed_layout
    rank = len(family.shape)
    dimensions = [axis.axis.dimension(rank) for axis in template.axes]
    order = sorted(range(len(dimensions)), key=lambda i: (dimensions[i] in family.broadcast,
                                                           template.axes[i].tile_stride is None,
                                                           template.axes[i].tile_stride or 0, i))
    cuts, radix = {}, 1
    for i in order:
        cuts[dimensions[i]] = (*split[i], radix)
        radix *= split[i][1]
    groups = prod(cuts[d][1] for d in dimensions if d in family.broadcast)
    layouts = []
    for m in members:
        own, replicas = cuts, template.replicas
        if family.roles.get(m) is Role.PARAMETER:
            own = {d: cut for d, cut in cuts.items() if d not in family.broadcast}
            replicas *= groups
        layouts.append(_cut_as(values[m].parsed_layout, rank, own, replicas))
    return tuple(layouts)


def _cut_as(layout: Layout, rank: int, cuts: dict, replicas: int) -> Layout:
    """`layout` with each dimension in `cuts` cut as given (block size, partitions, stride where it cuts), and
    `replicas` copies."""
    axes = []
    for axis in layout.axes:
        dimension = axis.axis.dimension(rank)
        if dimension in cuts:
            block, parts, stride = cuts[dimension]
            axis = replace(_with_block(axis, block), partitions=parts,
                           tile_stride=stride if parts > 1 else axis.tile_stride)
        axes.append(axis)
    return replace(layout, axes=tuple(axes), replicas=replicas, tile_count=replicas * prod(a.partitions for a in axes))


def _candidate(facts: PlanFacts, family: ElementwiseFamily, members: rules.LayoutGroup, split: Split,
               moved: tuple[rules.Move, ...], ratios: tuple[rules.ScratchRatio, ...]) -> Candidate:
    values = facts.plan.values
    layouts = split_layouts(facts, family, members, split)
    sizes = tuple(value_bytes(values[m], m in facts.amp_aligned, layout) for m, layout in zip(members, layouts))
    scratch = rules.scaled_scratch(ratios, tuple(size.shard_bytes for size in sizes))
    label = "element-wise split " + " x ".join(f"{parts} (blocks of {block})" for block, parts in split)
    return Candidate(layouts, sizes, rules.exchange_cost(facts, members, moved, layouts), scratch, label=label)


@dataclass(frozen=True)
class _Parts:
    """What every candidate of a free family shares: its members (every value of its groups), the mover steps
    between them and the rest, and the scratch that scales with a member's shard."""

    members: rules.LayoutGroup
    moved: tuple[rules.Move, ...]
    ratios: tuple[rules.ScratchRatio, ...]


def _parts(context: rules.Context, family: ElementwiseFamily, group_of: dict[int, rules.LayoutGroup]) -> _Parts | None:
    """The family's parts, or None when a rule holds it or a rule of every level holds one of its groups (its own
    kernels allowed to read and write them, and to be the readers of a parameter the dataflow does not show)."""
    groups = {group_of[m] for m in family.members}
    if family.hold is not None or any(rules.freeze_reason(context, g, family.steps) is not None for g in groups):
        return None
    members = tuple(sorted({v for m in family.members for v in group_of[m]}))
    try:
        ratios = rules.scratch_ratios(context.facts, members)
    except rules.Frozen:
        return None
    return _Parts(members, rules.moved_tensors(context.facts, members), ratios)


def family_group(context: rules.Context, family: ElementwiseFamily, group_of: dict[int, rules.LayoutGroup],
                 cache: dict) -> FreeGroup | None:
    """The family as one free group (the input first, then its other splits, and the splits a cap left out), or
    None when it cannot change.

    `cache` maps a family's signature to its candidates and left-out splits (steps relative to its first kernel),
    so repeated layers and unrolled copies derive them once.
    """
    parts = _parts(context, family, group_of)
    if parts is None:
        return None
    start = _first_step(family)
    key = _signature(context.facts, family, parts)
    if key not in cache:
        cache[key] = _choices(context.facts, family, parts)
    found = cache[key]
    if found is None:
        return None
    candidates, left_out = found
    return FreeGroup(parts.members, tuple(c.shifted(start) for c in candidates), input_index=0, kind=KIND,
                     left_out=None if left_out is None else left_out.shifted(start))


def _first_step(family: ElementwiseFamily) -> int:
    """The step a family's cached candidates are relative to: equal families at other steps shift them along."""
    return family.kernels[0].step


def _signature(facts: PlanFacts, family: ElementwiseFamily, parts: _Parts) -> tuple:
    """Everything a free family's candidates depend on, with steps relative to its first kernel: each member's
    sizing and part in the family, the family's shape and rules, its scratch ratios and movers."""
    members = parts.members
    places = tuple((family.roles.get(m), m in family.members, m == family.template) for m in members)
    return (rules.family_key(facts, members, members, {m: m for m in members}, parts.ratios,
                             _first_step(family), parts.moved),
            places, family.shape, family.broadcast, family.rows_whole)


def _choices(facts: PlanFacts, family: ElementwiseFamily,
             parts: _Parts) -> tuple[tuple[Candidate, ...], LeftOut | None] | None:
    """The family's candidates (the input first) and the splits their cap left out, with steps relative to its
    first kernel; None when no other split is kept."""
    members, moved, ratios = parts.members, parts.moved, parts.ratios
    values = facts.plan.values
    layouts = tuple(values[m].parsed_layout for m in members)
    original = Candidate(layouts, tuple(facts.estimate.values[m] for m in members),
                         rules.exchange_cost(facts, members, moved, layouts),
                         rules.scaled_scratch(ratios, tuple(facts.estimate.values[m].shard_bytes for m in members)))
    search = splits_of(facts, family, members)
    others = [_candidate(facts, family, members, split, moved, ratios) for split in search.kept[1:]]
    if not others:
        return None
    left_out = rules.left_out_of(facts, members, {m: m for m in members}, tuple(search.left_out), search.shards,
                                 ratios, None)
    start = _first_step(family)
    return (tuple(c.shifted(-start) for c in (original, *others)),
            None if left_out is None else left_out.shifted(-start))


def promote(context: rules.Context, members: rules.LayoutGroup, splits) -> tuple[Candidate, ...]:
    """The candidates of the family whose free group is `members` under `splits` (some of its left-out choices)."""
    family = next(f for f in context.facts.elementwise if f.members[0] in members)
    parts = _parts(context, family, context.group_of)
    if parts is None:
        return ()
    return tuple(_candidate(context.facts, family, parts.members, split, parts.moved, parts.ratios) for split in splits)


def elementwise_level(context: rules.Context, groups: tuple[rules.LayoutGroup, ...]) -> Decisions:
    """Every element-wise family whose groups are all unclaimed and that may change: one free group each."""
    group_of = {m: group for group in groups for m in group}
    free, cache = [], {}
    for family in context.facts.elementwise:
        if all(m in group_of for m in family.members):
            group = family_group(context, family, group_of, cache)
            if group is not None:
                free.append(group)
    return Decisions(free=tuple(free))


def families(facts: PlanFacts) -> list[tuple[rules.Kernels, tuple[int, ...]]]:
    """Each element-wise family this level may re-tile (not held) as a report shows it: its kernels and members."""
    return [(tuple((k.step, k.operation) for k in family.kernels), family.members) for family in facts.elementwise
            if family.hold is None]

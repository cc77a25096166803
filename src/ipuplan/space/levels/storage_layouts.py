"""What freedom level `storage` (level 1) is built from: a value only movers touch takes any smaller shard, in
either class.

Per free group: the input layout, then one layout per distinct shard size (the fewest tiles for that size,
within the chip, no larger than the input's shard) in each memory class, with mixed-radix tile strides over
the axes the input placed. `storage.storage_level` adds other block sizes and the flat layout to the
partitions found here.

At most MAX_CANDIDATES_PER_CLASS sizes are kept per class, the smallest always: every byte of a storage
group grows with its shard (its members' bytes, and the scratch that is a multiple of it), so at every step
the smallest shard of a class is no larger than any size left out in that class, and the cap never raises the
least peak nor breaks a budget (`tests/test_space_storage.py` checks it on the reference plan). A layout with a
larger shard than the input's is left out for the same reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from math import prod

from ipuplan.facts.estimate import shard_bytes, value_bytes
from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.plan.layout import MEMORY_CLASSES, Layout, ceil_div
from ipuplan.space import rules
from ipuplan.space.types import Candidate, Decisions, FreeGroup, Freeze, FreezeReason, FrozenGroup

MAX_CANDIDATES_PER_CLASS = 48


def partition_options(blocks: int) -> list[int]:
    """The smallest partition count for each distinct number of blocks per shard.

    >>> partition_options(10)
    [1, 2, 3, 4, 5, 10]
    """
    options, count = [], 1
    while count <= blocks:
        options.append(count)
        per_shard = ceil_div(blocks, count)
        if per_shard == 1:
            break
        count = ceil_div(blocks, per_shard - 1)
    return options


def partition_vectors(shape: tuple[int, ...], layout: Layout, tiles: int) -> list[tuple[int, ...]]:
    """One partition vector per distinct shard size, the fewest tiles for each, within `tiles`."""
    # shard elements -> (tiles used, vector); built axis by axis so that only distinct sizes survive.
    states: dict[int, tuple[int, tuple[int, ...]]] = {1: (1, ())}
    for axis in layout.axes:
        dimension = axis.axis.dimension(len(shape))
        blocks = axis.blocks(prod(shape) if dimension is None else shape[dimension])
        grown: dict[int, tuple[int, tuple[int, ...]]] = {}
        for extent, (used, vector) in states.items():
            for count in partition_options(blocks):
                if used * count > tiles:
                    break
                key = extent * axis.extent_of_blocks(blocks, count)
                if key not in grown or used * count < grown[key][0]:
                    grown[key] = (used * count, (*vector, count))
        states = grown
    return [vector for _, vector in sorted(states.values())]


def placed_strides(layout: Layout, partitions: tuple[int, ...]) -> tuple[int | None, ...]:
    """Mixed-radix strides over the axes the input placed, in the input's stride order: distinct tiles."""
    placed = sorted((axis.tile_stride, position)
                    for position, axis in enumerate(layout.axes) if axis.tile_stride is not None)
    strides: list[int | None] = [None] * len(layout.axes)
    radix = 1
    for _, position in placed:
        strides[position] = radix
        radix *= partitions[position]
    return tuple(strides)


def partition_sizes(layout: Layout, shape: tuple[int, ...], element_size: int,
                    tiles: int) -> list[tuple[tuple[int, ...], int]]:
    """(partitions, shard bytes) of `layout`'s partition vectors whose shard is no larger than its own: sized
    without building a layout, as most of them share a size with another and are never built."""
    original = shard_bytes(shape, element_size, layout)
    found = []
    for partitions in partition_vectors(shape, layout, tiles):
        size = shard_bytes_at(layout, shape, element_size, partitions)
        if size <= original:
            found.append((partitions, size))
    return found


def shard_bytes_at(layout: Layout, shape: tuple[int, ...], element_size: int, partitions: tuple[int, ...]) -> int:
    """`shard_bytes` of `layout` cut into `partitions`, without building that layout."""
    extents = list(shape)
    for axis, parts in zip(layout.axes, partitions, strict=True):
        dimension = axis.axis.dimension(len(shape))
        if dimension is None:
            return axis.extent_of_blocks(axis.blocks(prod(shape)), parts) * element_size
        extents[dimension] = axis.extent_of_blocks(axis.blocks(shape[dimension]), parts)
    return prod(extents) * element_size


def tiling(layout: Layout, partitions: tuple[int, ...], tiles: int) -> Layout:
    """`layout` cut into `partitions`, as many of its replicas as the tiles hold, strides in the input's order."""
    replicas = max(1, min(layout.replicas, tiles // prod(partitions)))
    return layout.with_tiling(partitions, placed_strides(layout, partitions), replicas)


def spread_sizes(tiled: list[tuple[Layout, int]]) -> list[Layout]:
    """Sorted by shard size; at most MAX_CANDIDATES_PER_CLASS, spread over the sizes, the smallest kept."""
    tiled = sorted(tiled, key=lambda pair: pair[1])
    if len(tiled) > MAX_CANDIDATES_PER_CLASS:
        stride = len(tiled) / MAX_CANDIDATES_PER_CLASS
        tiled = [tiled[int(i * stride)] for i in range(MAX_CANDIDATES_PER_CLASS)]
    return [option for option, _ in tiled]


def in_both_classes(layout: Layout, options: list[Layout]) -> tuple[Layout, ...]:
    """Each option in every memory class, the input layout itself left out."""
    return tuple(option for option in (replace(o, memory_class=c) for c in MEMORY_CLASSES for o in options)
                 if option != layout)


LayoutOptions = Callable[[Layout, tuple[int, ...], int, int], tuple[Layout, ...]]
"""(input layout, shape, element size, chip tiles) -> the other layouts a free group may take."""


def storage_candidates(facts: PlanFacts, members: rules.LayoutGroup, moved: tuple[rules.Move, ...],
                       options: LayoutOptions) -> tuple[Candidate, ...]:
    """The input layout first, then every distinct smaller-or-equal shard size in each memory class (no scratch yet)."""
    values = facts.plan.values
    base = values[members[0]]
    layout = base.parsed_layout

    def candidate(option: Layout) -> Candidate:
        sizes = tuple(value_bytes(values[m], m in facts.amp_aligned, option) for m in members)
        layouts = (option,) * len(members)
        return Candidate(layouts, sizes, rules.exchange_cost(facts, members, moved, layouts))

    others = options(layout, tuple(base.shape), base.element_size, facts.plan.tile_count)
    return (candidate(layout), *(candidate(option) for option in others))


Alternatives = Callable[[PlanFacts, rules.LayoutGroup, tuple[rules.Move, ...], tuple[Candidate, ...]],
                        tuple[Candidate, ...]]
"""More candidates derived from a group's candidates (e.g. other tile strides of the same tiling)."""


def storage_group(context: rules.Context, members: rules.LayoutGroup, options: LayoutOptions,
                  alternatives: Alternatives | None, cache: dict) -> FreeGroup | FrozenGroup:
    reason = rules.freeze_reason(context, members)
    if reason is not None:
        return FrozenGroup(members, reason)
    facts = context.facts
    try:
        ratios = rules.scratch_ratios(facts, members)
    except rules.Frozen as frozen:
        return FrozenGroup(members, frozen.reason)
    moved = rules.moved_tensors(facts, members)
    key = rules.group_key(facts, members, moved)
    if key not in cache:
        found = storage_candidates(facts, members, moved, options)
        cache[key] = found if alternatives is None else alternatives(facts, members, moved, found)
    candidates = cache[key]
    if ratios:
        candidates = tuple(c.with_scratch(rules.scaled_scratch(ratios, tuple(b.shard_bytes for b in c.value_bytes)))
                           for c in candidates)
    if len(candidates) == 1:
        return FrozenGroup(members, FreezeReason(Freeze.NO_SMALLER_LAYOUT))
    return FreeGroup(members, candidates, input_index=0)


def level_with(options: LayoutOptions, alternatives: Alternatives | None = None):
    """A freedom level that decides about every group: free with `options` as its layouts (and their
    `alternatives`), or frozen."""

    def level(context: rules.Context, groups: tuple[rules.LayoutGroup, ...]) -> Decisions:
        cache: dict[tuple, tuple[Candidate, ...]] = {}
        decided = [storage_group(context, members, options, alternatives, cache) for members in groups]
        return Decisions(
            free=tuple(g for g in decided if isinstance(g, FreeGroup)),
            frozen=tuple(g for g in decided if isinstance(g, FrozenGroup)),
        )

    return level

"""Freedom level `storage` (level 1, in every scope): storage values take any layout the format allows.

A value that only movers read and write is re-laid out by them anyway (REPLAN.md, freedom level 1),
so besides other partition counts it may take other block sizes of its own order and a flat
`RowMajor` layout on the `Linear` axis (4-element blocks, over up to all tiles), in either class,
with its tile strides as decisions (`space.strides`). The exchange term still prefers, among layouts
of equal peak, the one its movers send least for.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from itertools import takewhile
from math import prod

from ipuplan.facts.estimate import shard_bytes
from ipuplan.plan.debug_syntax import Atom, Call, Struct, int_atom
from ipuplan.plan.layout import Axis, AxisTiling, Layout
from ipuplan.space.levels.storage_layouts import (
    in_both_classes,
    level_with,
    partition_options,
    partition_sizes,
    spread_sizes,
    tiling,
)
from ipuplan.space.strides import with_stride_choices

FLAT_BLOCK = 4
"""Elements per block of a flat layout, as the compiler lays out values 36, 40 and 89 of the reference plan."""
MATRIX_GRANULE = 16
"""Block sizes of a BlockMajor order stay whole multiples of this many elements."""
BLOCK_FIELDS = {"Matrix": ("row_block", "column_block"), "TransposedMatrix": ("column_block", "row_block")}
"""Per BlockMajor order: the order field holding the block of FromEnd(2), then of FromEnd(1)."""


def flat_tiling(shape: tuple[int, ...], partitions: int) -> AxisTiling:
    """The `Linear` axis of a flat `RowMajor` layout of the tensor over `partitions` tiles."""
    padding = "Reject" if prod(shape) % FLAT_BLOCK == 0 else "Zero"
    return AxisTiling(Axis("Linear"), partitions, 1, FLAT_BLOCK, FLAT_BLOCK, 1, padding, None)


def flat_layout(layout: Layout, shape: tuple[int, ...], partitions: int) -> Layout:
    """`RowMajor` over the flattened tensor, over `partitions` tiles, in the class of `layout`."""
    return Layout(Atom("RowMajor"), partitions, 1, (flat_tiling(shape, partitions),), layout.memory_class)


def flat_sizes(shape: tuple[int, ...], element_size: int, tiles: int) -> list[tuple[int, int]]:
    """(partitions, shard bytes) of a flat layout, one per distinct number of blocks per tile, within `tiles`."""
    axis = flat_tiling(shape, 1)
    blocks = axis.blocks(prod(shape))
    return [(count, axis.extent_of_blocks(blocks, count) * element_size)  # `shard_bytes` of a `Linear` axis
            for count in takewhile(lambda count: count <= tiles, partition_options(blocks))]


def block_variants(layout: Layout) -> list[Layout]:
    """The layout with the K (row) block of its BlockMajor order cut into whole granules, order fields kept in step."""
    order = layout.order
    if not (isinstance(order, Call) and order.name == "BlockMajor" and order.args
            and isinstance(order.args[0], Struct)):
        return []
    inner = order.args[0]
    fields = BLOCK_FIELDS.get(inner.name)
    position = next((i for i, a in enumerate(layout.axes) if a.axis == Axis("FromEnd", 2)), None)
    if fields is None or position is None or fields[0] not in {key for key, _ in inner.fields}:
        return []
    axis = layout.axes[position]
    sizes = [b for b in range(MATRIX_GRANULE, axis.block_size, MATRIX_GRANULE) if axis.block_size % b == 0]
    variants = []
    for size in sizes:
        multiple = size if axis.padding_multiple == axis.block_size else axis.padding_multiple
        axes = list(layout.axes)
        axes[position] = replace(axis, block_size=size, padding_multiple=multiple)
        variants.append(replace(layout, order=Call(order.name, (inner.replace(fields[0], int_atom(size)),)),
                                axes=tuple(axes)))
    return variants


@lru_cache(maxsize=4096)
def retiled_options(layout: Layout, shape: tuple[int, ...], element_size: int, tiles: int) -> tuple[Layout, ...]:
    """Every distinct shard size (no larger than the input's) reachable by partitions, other K blocks of the
    same order, or a flat layout; per size the layout closest to the input (its own order, then the flat one)."""
    original = shard_bytes(shape, element_size, layout)
    # shard size -> its layout, or the partitions of its flat layout: a large tensor has hundreds of
    # flat sizes, so only the ones `spread_sizes` keeps are built
    by_size: dict[int, Layout | int] = {}
    for variant in (layout, *block_variants(layout)):
        for partitions, size in partition_sizes(variant, shape, element_size, tiles):
            if size not in by_size:
                by_size[size] = tiling(variant, partitions, tiles)
    for partitions, size in flat_sizes(shape, element_size, tiles):
        if size <= original:
            by_size.setdefault(size, partitions)
    kept = spread_sizes([(option, size) for size, option in by_size.items()])
    return in_both_classes(layout, [flat_layout(layout, shape, o) if isinstance(o, int) else o for o in kept])


storage_level = level_with(retiled_options, with_stride_choices)
"""Level 1 with its full re-tiling: partitions, block sizes, the flat layout and strides, either class."""

"""Bytes a mover sends between tiles, from the two layouts' tile mappings.

A shard's tile is the sum over axes of `index * tile_stride`; replicas repeat the whole
placement at multiples of its span. Where the plan leaves a stride to the compiler (`None`),
a canonical placement is assumed: those axes are laid out, in listed order, after the span
of the placed ones. An element is sent to every destination tile that does not already hold
it in the source layout. Tensors of different shapes (slices, views, padding) have no common
coordinates: then every element is counted as sent, unless both sides are tiled identically.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import prod

import numpy as np

from ipuplan.layout import Layout


@dataclass(frozen=True)
class Placement:
    """Per dimension: (extent per shard, partitions, stride); plus the replicas and their spacing."""

    dimensions: tuple[tuple[int, int, int], ...]
    replicas: int
    span: int


def placement(shape: tuple[int, ...], layout: Layout) -> Placement | None:
    """Where each shard sits; None for a `Linear` tiling (no per-dimension coordinates)."""
    rank = len(shape)
    if any(axis.axis.kind == "Linear" for axis in layout.axes):
        return None
    placed_span = 1 + sum((a.partitions - 1) * a.tile_stride for a in layout.axes if a.tile_stride is not None)
    radix = placed_span
    per_dimension = {d: (size, 1, 0) for d, size in enumerate(shape)}
    for axis in layout.axes:
        stride = axis.tile_stride
        if stride is None:
            stride, radix = radix, radix * axis.partitions
        dimension = axis.axis.dimension(rank)
        per_dimension[dimension] = (axis.extent(shape[dimension]), axis.partitions, stride)
    return Placement(tuple(per_dimension[d] for d in range(rank)), layout.replicas, radix)


def _segments(size: int, source: tuple[int, int, int], target: tuple[int, int, int]):
    """Lengths of the runs of one dimension on which both shard indices are constant, and the offsets."""
    cuts = {0, size}
    for extent, _, _ in (source, target):
        cuts.update(range(extent, size, extent))
    edges = np.array(sorted(cuts))
    starts, lengths = edges[:-1], np.diff(edges)
    offsets = [np.minimum(starts // extent, parts - 1) * stride for extent, parts, stride in (source, target)]
    return lengths, offsets[0], offsets[1]


@lru_cache(maxsize=65536)
def mapped_exchange_bytes(shape: tuple[int, ...], element_size: int, source: Layout, target: Layout) -> int:
    """Bytes sent to give every tile of `target` its shard from `source` (same logical tensor)."""
    a, b = placement(shape, source), placement(shape, target)
    if a is None or b is None:
        return 0 if source.axes == target.axes else prod(shape) * element_size
    elements = np.ones(1, dtype=np.int64)
    offset_a = np.zeros(1, dtype=np.int64)
    offset_b = np.zeros(1, dtype=np.int64)
    for size, dim_a, dim_b in zip(shape, a.dimensions, b.dimensions):
        lengths, off_a, off_b = _segments(size, dim_a, dim_b)
        elements = np.multiply.outer(elements, lengths).ravel()
        offset_a = np.add.outer(offset_a, off_a).ravel()
        offset_b = np.add.outer(offset_b, off_b).ravel()
    difference = np.add.outer(offset_b - offset_a, np.arange(b.replicas, dtype=np.int64) * b.span)
    local = (difference >= 0) & (difference % a.span == 0) & (difference // a.span < a.replicas)
    return int((elements[:, None] * ~local).sum()) * element_size

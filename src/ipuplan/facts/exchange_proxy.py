"""The optimiser's proxy for the bytes a mover sends between tiles, from the two layouts' tile mappings: a
candidate's price against the other side at its input layout (linear in the choice). Not the definition of a
plan's exchange: that is `facts.plan_exchange` (docs/EXCHANGE.md); this module's placement rule is shared by both.

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

from ipuplan.facts import price_store
from ipuplan.plan.layout import Layout


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
def kept_exchange_bytes(shape: tuple[int, ...], element_size: int, source: Layout, target: Layout) -> int:
    """`mapped_exchange_bytes`, kept across runs where a store is open (`price_store`: a plan's candidates price the
    same 1,391 pairs of layouts again on every run of the reference plan, 0.13 s); the prices found here are kept at
    `price_store.flush`."""
    step = price_store.step_key("proxy", shape, (), element_size, "mapped")
    pair = (price_store.layout_key(source), price_store.layout_key(target))
    found = price_store.kept_price(step, pair)
    if found is None:
        found = mapped_exchange_bytes(shape, element_size, source, target)
        price_store.keep_later(step, pair, found)
    return found


@lru_cache(maxsize=65536)
def mapped_exchange_bytes(shape: tuple[int, ...], element_size: int, source: Layout, target: Layout) -> int:
    """Bytes sent to give every tile of `target` its shard from `source` (same logical tensor).

    Whether a run of elements is local depends only on how far its target tile is from its source
    tile, so runs are summed per distance as the dimensions are added: distances span a narrow
    range, and there are far fewer of them than runs.
    """
    a, b = placement(shape, source), placement(shape, target)
    if a is None or b is None:
        return 0 if source.axes == target.axes else prod(shape) * element_size
    distances = np.zeros(1, dtype=np.int64)
    elements = np.ones(1, dtype=np.int64)
    for size, dim_a, dim_b in zip(shape, a.dimensions, b.dimensions):
        if min(dim_a[0], dim_b[0]) >= size:  # one run, in the first shard on both sides: no distance added
            elements = elements * size
            continue
        lengths, off_a, off_b = _segments(size, dim_a, dim_b)
        distances, elements = _per_distance(np.add.outer(distances, off_b - off_a).ravel(),
                                            np.multiply.outer(elements, lengths).ravel())
    difference = np.add.outer(distances, np.arange(b.replicas, dtype=np.int64) * b.span)
    local = (difference >= 0) & (difference % a.span == 0) & (difference // a.span < a.replicas)
    return int((elements[:, None] * ~local).sum()) * element_size


def _per_distance(distances: np.ndarray, elements: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each distance with the elements at it, where their range is shorter than the list (counted at once).

    The float sums are exact: a tensor has far fewer than 2**53 elements.
    """
    lowest = int(distances.min())
    span = int(distances.max()) - lowest + 1
    if span >= len(distances):
        return distances, elements
    totals = np.bincount(distances - lowest, weights=elements, minlength=span)
    present = np.flatnonzero(totals)
    return present + lowest, totals[present].astype(np.int64)

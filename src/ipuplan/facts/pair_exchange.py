"""The exchange of one step (docs/EXCHANGE.md) for many source layouts x many result layouts at once.

`plan_exchange.step_bytes` prices one pair of layouts in about 5 ms; the optimiser needs a step's
every pair of candidate layouts (40,000 pairs on the reference plan). Here the count is per tile:
in a legal placement a tile holds at most one shard of a layout (replicas included), and a shard
is a box of the step's common index space (an axis tiling) or a run of its row-major order (a
`Linear` tiling). An element wanted on a tile is held there when the source's shard on that tile
contains it, so

    bytes = element_size x sum over tiles (|result shard| - |result shard n source shard|)

with boxes and runs intersected in closed form, every result layout of the step at once. Where
that form does not apply (a view, a flat layout whose order is not the common one, two shards on
one tile) each pair is priced by `step_bytes`, the definition itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import product
from math import prod

import numpy as np

from ipuplan.facts.exchange import placement
from ipuplan.facts.plan_exchange import MAX_TILES, TooLarge, flattened, replica_offsets, step_bytes
from ipuplan.plan.layout import Layout
from ipuplan.plan.operation import Operation


@dataclass(frozen=True)
class Meeting:
    """How a step's two sides meet: the common space (the result's elements: a reduction's result repeats each
    element once per partial), where the source's index is the common one plus `offsets`, and the region of the
    common space the source has elements for (outside it: padding, never sent)."""

    space: tuple[int, ...]
    offsets: tuple[int, ...]
    partials: int
    """A reduction's partials (the leading axis of its source); 0 for a mover."""
    valid_low: tuple[int, ...]
    valid_high: tuple[int, ...]

    @property
    def whole(self) -> bool:
        return self.valid_low == (0,) * len(self.space) and self.valid_high == self.space


def meeting_of(operation: Operation, source_shape: tuple[int, ...], result_shape: tuple[int, ...]) -> Meeting | None:
    """The step's meeting, or None where the closed form does not apply (views, ranks that differ)."""
    if operation.kind == "Sum":
        if operation.sum_axis != 0 or source_shape[1:] != result_shape:
            return None
        return Meeting(result_shape, (0,) * len(result_shape), source_shape[0], (0,) * len(result_shape), result_shape)
    if operation.has_view or len(source_shape) != len(result_shape):
        return None
    offsets = operation.copy_offsets or (0,) * len(result_shape)
    if len(offsets) != len(result_shape):
        return None
    low = tuple(max(0, -o) for o in offsets)
    high = tuple(max(lo, min(n, s - o)) for lo, n, s, o in zip(low, result_shape, source_shape, offsets))
    return Meeting(result_shape, offsets, 0, low, high)


@dataclass(frozen=True)
class Shards:
    """One side's shards, one per tile it uses: boxes `[low, high)` of the common space, or runs `[low, high)` of its
    row-major order (`flat`), each `weight` times (a reduction's source: the partials it holds)."""

    tiles: np.ndarray
    low: np.ndarray
    high: np.ndarray
    weight: np.ndarray
    flat: bool
    order: tuple[int, ...] = ()
    """A flat side's tensor shape, whose row-major order its runs follow."""


@lru_cache(maxsize=8192)
def source_shards(meeting: Meeting, shape: tuple[int, ...], layout: Layout) -> Shards | None:
    """The source's shards in the common space, or None where the closed form does not apply."""
    if meeting.partials:
        boxes = _boxes(shape, layout)
        if boxes is None:
            return None
        tiles, low, high = boxes
        return _unique_tiles(Shards(tiles, low[:, 1:], high[:, 1:], high[:, 0] - low[:, 0], flat=False))
    if _is_linear(layout):
        return _unique_tiles(_runs(shape, layout))
    boxes = _boxes(shape, layout)
    if boxes is None:
        return None
    tiles, low, high = boxes
    offsets = np.array(meeting.offsets, dtype=np.int64)
    space = np.array(meeting.space, dtype=np.int64)
    low, high = np.clip(low - offsets, 0, space), np.clip(high - offsets, 0, space)
    return _unique_tiles(Shards(tiles, low, np.maximum(high, low), np.ones(len(tiles), dtype=np.int64), flat=False))


@lru_cache(maxsize=8192)
def result_shards(meeting: Meeting, shape: tuple[int, ...], layout: Layout) -> Shards | None:
    """The result's shards, cut to the region the source has elements for; None where the closed form does not
    apply."""
    weight = max(meeting.partials, 1)
    if _is_linear(layout):
        if not meeting.whole:
            return None
        runs = _runs(shape, layout)
        return _unique_tiles(Shards(runs.tiles, runs.low, runs.high, runs.weight * weight, flat=True, order=shape))
    boxes = _boxes(shape, layout)
    if boxes is None:
        return None
    tiles, low, high = boxes
    valid_low, valid_high = np.array(meeting.valid_low, dtype=np.int64), np.array(meeting.valid_high, dtype=np.int64)
    low, high = np.clip(low, valid_low, valid_high), np.clip(high, valid_low, valid_high)
    return _unique_tiles(Shards(tiles, low, np.maximum(high, low), np.full(len(tiles), weight, dtype=np.int64),
                                flat=False))


def _is_linear(layout: Layout) -> bool:
    return any(axis.axis.kind == "Linear" for axis in layout.axes)


def _boxes(shape: tuple[int, ...], layout: Layout) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(tile, low corner, high corner) of every shard of every replica of an axis tiling, in the tensor's own
    coordinates; None past MAX_TILES."""
    place = placement(shape, layout)
    if place is None:
        return None
    try:
        replicas = replica_offsets(place)
    except TooLarge:
        return None
    if prod(parts for _, parts, _ in place.dimensions) * len(replicas) > MAX_TILES:
        return None
    index = np.array(list(product(*(range(parts) for _, parts, _ in place.dimensions))), dtype=np.int64)
    index = index.reshape(-1, len(shape))
    extent = np.array([e for e, _, _ in place.dimensions], dtype=np.int64)
    stride = np.array([s for _, _, s in place.dimensions], dtype=np.int64)
    size = np.array(shape, dtype=np.int64)
    low = np.minimum(index * extent, size)
    high = np.minimum(low + extent, size)
    tiles = (index @ stride)[None, :] + replicas[:, None]
    repeat = len(replicas)
    return tiles.ravel(), np.tile(low, (repeat, 1)), np.tile(high, (repeat, 1))


def _runs(shape: tuple[int, ...], layout: Layout) -> Shards:
    """A `Linear` tiling's shards: runs of the tensor's row-major order, on their tiles, every replica."""
    total = prod(shape)
    place = placement((total,), flattened(layout))
    extent, parts, stride = place.dimensions[0]
    replicas = replica_offsets(place)
    shard = np.arange(parts, dtype=np.int64)
    low = np.minimum(shard * extent, total)
    high = np.minimum(low + extent, total)
    tiles = (shard * stride)[None, :] + replicas[:, None]
    repeat = len(replicas)
    ones = np.ones(parts * repeat, dtype=np.int64)
    return Shards(tiles.ravel(), np.tile(low, repeat), np.tile(high, repeat), ones, flat=True, order=shape)


def _unique_tiles(shards: Shards) -> Shards | None:
    """The shards, unless two share a tile (an illegal placement: the per-tile count would not hold)."""
    return shards if len(np.unique(shards.tiles)) == len(shards.tiles) else None


def pair_bytes(operation: Operation, source_shape: tuple[int, ...], result_shape: tuple[int, ...], element_size: int,
               sources: tuple[Layout, ...], results: tuple[Layout, ...]) -> np.ndarray:
    """Per (source layout, result layout), the bytes the step sends (`step_bytes`; 0 where it cannot be priced,
    as the plan's figure leaves such a step out)."""
    meeting = meeting_of(operation, source_shape, result_shape)
    found = np.zeros((len(sources), len(results)), dtype=np.int64)
    sending = [source_shards(meeting, source_shape, s) if meeting else None for s in sources]
    receiving = [result_shards(meeting, result_shape, r) if meeting else None for r in results]
    closed = {flat: [j for j, r in enumerate(receiving) if r is not None and r.flat == flat] for flat in (False, True)}
    dense = {flat: _Dense.of([receiving[j] for j in chosen]) for flat, chosen in closed.items() if chosen}
    for i, source in enumerate(sending):
        for flat, chosen in closed.items():
            if source is not None and chosen and (held := _held(meeting, source, dense[flat])) is not None:
                found[i, chosen] = (dense[flat].wanted - held) * element_size
            else:
                _priced_one_by_one(found, i, chosen, operation, source_shape, result_shape, element_size, sources, results)
        unpriced = [j for j, r in enumerate(receiving) if r is None]
        _priced_one_by_one(found, i, unpriced, operation, source_shape, result_shape, element_size, sources, results)
    return found


def _priced_one_by_one(found: np.ndarray, i: int, columns: list[int], operation: Operation, source_shape, result_shape,
                       element_size: int, sources: tuple[Layout, ...], results: tuple[Layout, ...]) -> None:
    for j in columns:
        sent = step_bytes(operation, source_shape, result_shape, element_size, sources[i], results[j])
        found[i, j] = 0 if isinstance(sent, str) else sent


@dataclass(frozen=True)
class _Dense:
    """Result sides of one kind by tile (an empty shard where a side has none): low, high (sides x tiles [x rank]),
    and per side the (element, tile) pairs it wants."""

    low: np.ndarray
    high: np.ndarray
    wanted: np.ndarray
    flat: bool

    @classmethod
    def of(cls, sides: list[Shards]) -> _Dense:
        tiles = 1 + max(int(side.tiles.max(initial=0)) for side in sides)
        rank = sides[0].low.shape[1:]
        low = np.zeros((len(sides), tiles, *rank), dtype=np.int64)
        high = np.zeros_like(low)
        for k, side in enumerate(sides):
            low[k, side.tiles], high[k, side.tiles] = side.low, side.high
        wanted = np.array([int((side.weight * _sizes(side.low, side.high, side.flat)).sum()) for side in sides],
                          dtype=np.int64)
        return cls(low, high, wanted, sides[0].flat)


def _sizes(low: np.ndarray, high: np.ndarray, flat: bool) -> np.ndarray:
    return high - low if flat else np.prod(high - low, axis=-1)


def _held(meeting: Meeting, source: Shards, results: _Dense) -> np.ndarray | None:
    """Per result side, the (element, result tile) pairs whose tile holds the element in the source's shard: the
    results' shards on the source's tiles against its shards; None where the closed form does not apply (two
    runs in different orders)."""
    on = source.tiles < results.low.shape[1]
    tiles, weight = source.tiles[on], source.weight[on]
    own_low, own_high = source.low[on], source.high[on]
    low, high = results.low[:, tiles], results.high[:, tiles]
    if source.flat and results.flat:
        if source.order != meeting.space:
            return None
        common = np.clip(np.minimum(own_high, high) - np.maximum(own_low, low), 0, None)
    elif source.flat:  # result boxes, in the source's coordinates, against the source's runs
        shift = np.array(meeting.offsets, dtype=np.int64)
        common = _in_run(source.order, low + shift, high + shift, own_low, own_high)
    elif results.flat:  # result runs against the source's boxes
        common = _in_run(meeting.space, own_low[None], own_high[None], low, high)
    else:
        common = np.prod(np.clip(np.minimum(own_high, high) - np.maximum(own_low, low), 0, None), axis=-1)
    return (weight * common).sum(axis=-1)


def _in_run(space: tuple[int, ...], low: np.ndarray, high: np.ndarray, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """Elements of boxes `[low, high)` (... x rank) whose row-major index in `space` lies in `[start, stop)`."""
    return _before(space, low, high, np.maximum(stop, start)) - _before(space, low, high, start)


def _before(space: tuple[int, ...], low: np.ndarray, high: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """Elements of boxes `[low, high)` whose row-major index is below `limit`: digit by digit, the elements that
    match `limit` on every earlier dimension and fall below its digit here, times every later dimension."""
    total = prod(space)
    lengths = np.clip(high - low, 0, None)
    whole = np.prod(lengths, axis=-1)
    capped = np.minimum(limit, total)
    weights = [prod(space[d + 1:]) for d in range(len(space))]
    count = np.zeros(np.broadcast_shapes(whole.shape, capped.shape), dtype=np.int64)
    matching = np.ones_like(count)
    for d, size in enumerate(space):
        digit = capped // weights[d] % size
        later = np.prod(lengths[..., d + 1:], axis=-1)
        count = count + matching * np.clip(np.minimum(digit, high[..., d]) - low[..., d], 0, None) * later
        matching = matching * ((low[..., d] <= digit) & (digit < high[..., d]))
    return np.where(capped >= total, whole, count)

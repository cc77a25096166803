"""The exchange of one step (docs/EXCHANGE.md) for many source layouts x many result layouts at once.

`plan_exchange.step_bytes` prices one pair of layouts in about 5 ms; the optimiser needs a step's
every pair of candidate layouts (20,000 distinct pairs on the reference plan). Here the count is per
tile: in a legal placement a tile holds at most one shard of a layout (replicas included). Each shard
is cut into **pieces**, boxes of the step's common index space (the result's): an axis tiling's shard
is one box, a `Linear` tiling's run of the row-major order at most `2 x rank - 1` boxes, and through
an `AxisFactorView` each box splits into one piece per factor. An element wanted on a tile is held
there when one of the source's pieces on that tile contains it, so

    bytes = element_size x sum over tiles (|result pieces| - |result pieces n source pieces|)

with the pieces of every source and result layout of a step intersected tile by tile in one numpy
pass. Layouts that place the same (axes, replicas, tile count: not the memory class nor the order) are
priced once. Where the closed form does not apply (a view of another kind, a move between ranks, two
shards on one tile) each pair is priced by `step_bytes`, the definition itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from itertools import product
from math import prod

import numpy as np

from ipuplan.facts import price_store
from ipuplan.facts.exchange_proxy import Placement, placement
from ipuplan.facts.plan_exchange import (
    MAX_ENUMERATED,
    MAX_TILES,
    OUTER,
    TooLarge,
    axis_factor_view,
    correspondence_of,
    flattened,
    replica_offsets,
    step_bytes,
)
from ipuplan.plan.debug_syntax import Atom
from ipuplan.plan.layout import STANDARD, Layout
from ipuplan.plan.operation import Operation

ANY_ORDER = Atom("RowMajor")
"""The order `placed_only` gives every layout (no step's bytes depend on it)."""
CHUNK = 1 << 16
"""Corners compared in one numpy pass (pieces looked up x columns laid out by tile x rank): bounds its memory to
what the caches hold (the reference plan's `held_pairs`: 0.12 s from 1 << 14 to 1 << 18; the rows of a few numbers
this once took, 0.40 s at 1 << 21, 0.35 s at 1 << 16)."""


@dataclass(frozen=True)
class Meeting:
    """How a step's two sides meet: the common space (the result's elements: a reduction's result repeats each
    element once per partial), where the source's index is the common one plus `offsets` (or through `view`), and
    the region of the common space the source has elements for (outside it: padding, never sent)."""

    space: tuple[int, ...]
    offsets: tuple[int, ...]
    partials: int
    """A reduction's partials (the leading axis of its source); 0 for a mover."""
    valid_low: tuple[int, ...]
    valid_high: tuple[int, ...]
    view: tuple[int, int, int, bool] | None = None
    """An `AxisFactorView`'s (split_axis, merge_axis, factor, reversed)."""
    reading: str = OUTER
    """How the view is read (`plan_exchange.OUTER` or `INNER`)."""

    @property
    def in_source_space(self) -> bool:
        """A reversed view read `INNER` sends a source box to strided result elements, but a result box to source
        boxes: the common space is then the source's, and the result's pieces are mapped into it."""
        return self.view is not None and self.view[3] and self.reading != OUTER


@lru_cache(maxsize=4096)
def meeting_of(operation: Operation, source_shape: tuple[int, ...], result_shape: tuple[int, ...],
               reading: str = OUTER) -> Meeting | None:
    """The step's meeting, or None where the closed form does not apply (a view of another kind, ranks that differ
    without a view, shapes the definition cannot pair)."""
    rank = len(result_shape)
    if max((*source_shape, *result_shape), default=1) > MAX_ENUMERATED:
        return None
    if isinstance(correspondence_of(operation, source_shape, result_shape, reading), str):
        return None
    if operation.kind == "Sum":
        return Meeting(result_shape, (0,) * rank, source_shape[0], (0,) * rank, result_shape)
    if operation.has_view:
        view = axis_factor_view(operation)
        split, _, factor, reverse = view
        if reverse and reading != OUTER:  # the source's cut axis may be padded: beyond the inner part, dropped
            high = list(source_shape)
            high[split] = result_shape[split] // factor
            return Meeting(source_shape, (0,) * rank, 0, (0,) * rank, tuple(high), view, reading)
        high = list(result_shape)
        if not reverse:  # the result may pad the cut axis: beyond the inner part, nothing to send
            high[split] = min(high[split], source_shape[split] // factor)
        return Meeting(result_shape, (0,) * rank, 0, (0,) * rank, tuple(high), view, reading)
    offsets = operation.copy_offsets or (0,) * rank
    low = tuple(max(0, -o) for o in offsets)
    high = tuple(max(lo, min(n, s - o)) for lo, n, s, o in zip(low, result_shape, source_shape, offsets))
    return Meeting(result_shape, offsets, 0, low, high)


@dataclass(frozen=True)
class Pieces:
    """One side of a step as disjoint boxes `[low, high)` of the common space (size-1 dimensions dropped), each on
    its tile; `weight`: a source piece's partials held (1 for a mover), a result piece's copies wanted. The corners
    are dimension-major, `(rank, pieces)`: numpy runs through one dimension of every piece at once several times
    faster than through rows of a few numbers."""

    tiles: np.ndarray
    low: np.ndarray
    high: np.ndarray
    weight: np.ndarray

    @cached_property
    def wanted(self) -> int:
        return int(self.weight @ _volumes(self.low, self.high))


@lru_cache(maxsize=8192)
def source_pieces(meeting: Meeting, shape: tuple[int, ...], layout: Layout) -> Pieces | None:
    """The source's pieces in the common space, or None where the closed form does not apply."""
    boxes = _own_boxes(shape, layout)
    if boxes is None:
        return None
    tiles, low, high = boxes
    if meeting.partials:
        return _kept(meeting, tiles, low[1:], high[1:], high[0] - low[0])
    if meeting.in_source_space:
        low, high = _within(shape, low, high, (0,) * len(shape), meeting.valid_low, meeting.valid_high)
    elif meeting.view is not None and meeting.reading != OUTER:
        tiles, low, high = _cut_inner(meeting.view, shape, tiles, low, high)
    elif meeting.view is not None:
        tiles, low, high = _through_view(meeting.view, shape, meeting.space, tiles, low, high)
    else:
        low, high = _within(shape, low, high, meeting.offsets, (0,) * len(shape), meeting.space)
    return _kept(meeting, tiles, low, high, np.ones(len(tiles), dtype=np.int64))


@lru_cache(maxsize=8192)
def result_pieces(meeting: Meeting, shape: tuple[int, ...], layout: Layout) -> Pieces | None:
    """The result's pieces, cut to the region the source has elements for; None where the closed form does not
    apply."""
    boxes = _own_boxes(shape, layout)
    if boxes is None:
        return None
    tiles, low, high = boxes
    if meeting.in_source_space:
        tiles, low, high = _cut_inner(meeting.view, shape, tiles, low, high)
    else:
        low, high = _within(shape, low, high, (0,) * len(shape), meeting.valid_low, meeting.valid_high)
    return _kept(meeting, tiles, low, high, np.full(len(tiles), max(meeting.partials, 1), dtype=np.int64))


def _within(shape: tuple[int, ...], low: np.ndarray, high: np.ndarray, shift: tuple[int, ...],
            floor: tuple[int, ...], ceiling: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Boxes of a tensor of `shape` moved back by `shift` and cut to `[floor, ceiling)`, only along the dimensions
    where they move or may cross a bound (a box lies within `[0, shape)`)."""
    moved = [d for d, (n, s, lo, hi) in enumerate(zip(shape, shift, floor, ceiling)) if s or lo > 0 or hi < n]
    if not moved:
        return low, high
    low, high = low.copy(), high.copy()
    for d in moved:
        for corner in (low[d], high[d]):
            if shift[d]:
                corner -= shift[d]
            np.minimum(np.maximum(corner, floor[d], out=corner), ceiling[d], out=corner)
    return low, high


def _volumes(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """The elements of each box."""
    volume = np.ones(low.shape[1], dtype=np.int64)
    for near, far in zip(low, high):
        volume *= far - near
    return volume


def _cut_inner(view: tuple[int, int, int, bool], whole: tuple[int, ...], tiles: np.ndarray, low: np.ndarray,
               high: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Boxes of the side whose `split_axis` is whole, in the other side's coordinates, the view read `INNER`:
    `(m0, c x factor + f)` along (merge, split) is `(f x whole[merge] + m0, c)`. A box is one piece per factor `f`;
    one that spans the merge axis whole is at most three (the factors whose columns start and stop alike are one
    run of the merge axis), so that a side split along the cut axis is priced at the cost of the `OUTER` reading."""
    split, merge, factor, _ = view
    along, inner = whole[merge], whole[split] // factor
    full = (low[merge] == 0) & (high[merge] >= along)
    cut, spanning = np.flatnonzero(~full), np.flatnonzero(full)
    # a box cut along merge is one piece per factor; one spanning it, a piece per run [f0, f1) of factors between
    # 0, low mod F, high mod F and F (over each, the columns a factor takes start and stop alike)
    ends = np.sort(np.stack([low[split, spanning] % factor, high[split, spanning] % factor]), axis=0)
    starts = np.concatenate([np.zeros((1, len(spanning)), dtype=np.int64), ends])
    stops = np.concatenate([ends, np.full((1, len(spanning)), factor, dtype=np.int64)])
    runs = np.flatnonzero(stops > starts)
    found = []
    for box, f0, f1 in ((np.repeat(cut, factor), np.tile(np.arange(factor), len(cut)), None),
                        (spanning[runs % max(len(spanning), 1)], starts.ravel()[runs], stops.ravel()[runs])):
        new_low, new_high = np.take(low, box, axis=1), np.take(high, box, axis=1)
        for corner in (new_low[split], new_high[split]):
            np.clip(-((f0 - corner) // factor), 0, inner, out=corner)
        if f1 is not None:  # spanning the merge axis: the factors' columns one run of it
            new_low[merge], new_high[merge] = f0 * along, f1 * along
        else:
            new_low[merge] += f0 * along
            new_high[merge] += f0 * along
        found.append((tiles[box], new_low, new_high))
    return tuple(np.concatenate(parts, axis=-1) for parts in zip(*found))


def alike_sides(operation: Operation, sides: tuple[tuple[tuple[int, ...], Layout], ...], source: bool) -> np.ndarray:
    """`reads_alike` of every (shape, layout) side of a step, each distinct placement judged once (and across runs,
    `price_store`: 1 a side that reads alike, 0 one that does not)."""
    placed = [(shape, placed_only(layout)) for shape, layout in sides]
    kept, index = _distinct(tuple(placed), lambda side: side)
    found = np.zeros(len(kept), dtype=bool)
    for shape in dict.fromkeys(shape for shape, _ in kept):
        layouts = [layout for other, layout in kept if other == shape]
        step = price_store.step_key(operation.text, shape, (), int(source), "reads alike")
        found[np.array([other == shape for other, _ in kept])] = price_store.kept_or_priced(
            step, [(price_store.layout_key(layout), 0) for layout in layouts],
            lambda missing, shape=shape, layouts=layouts: [reads_alike(operation, shape, layouts[k], source)
                                                           for k in missing])
    return found[index]


@lru_cache(maxsize=8192)
def reads_alike(operation: Operation, shape: tuple[int, ...], layout: Layout, source: bool) -> bool:
    """Whether a view step's `source` (or result) side at `layout` sends the same bytes read `OUTER` or `INNER`
    whatever the other side: every shard spans the coupled axes whole (the cut axis of the side that has it whole;
    the cut side's part of it and its merge axis), so both readings map a shard onto the same elements."""
    view = axis_factor_view(operation)
    boxes = _own_boxes(shape, placed_only(layout)) if view is not None else None
    if boxes is None:
        return False
    _, low, high = boxes
    split, merge, _, reverse = view
    spanned = [split] if source != reverse else [split, merge]
    return bool(all((low[d] == 0).all() and (high[d] >= shape[d]).all() for d in spanned))


def _kept(meeting: Meeting, tiles: np.ndarray, low: np.ndarray, high: np.ndarray, weight: np.ndarray) -> Pieces:
    """The non-empty pieces, the common space's size-1 dimensions dropped (a piece spans them whole)."""
    keep = weight > 0
    for near, far in zip(low, high):
        keep &= far > near
    wide = [d for d, n in enumerate(meeting.space) if n > 1]
    if not wide:  # one element: a dimension [0, 1) kept, so that a tile's empty slot (`_ByTile`) holds none of it
        low, high = np.zeros((1, len(tiles)), dtype=np.int64), np.ones((1, len(tiles)), dtype=np.int64)
    elif len(wide) < len(meeting.space):
        low, high = low[wide], high[wide]
    if keep.all():
        return Pieces(tiles, low, high, weight)
    at = np.flatnonzero(keep)
    return Pieces(tiles[at], np.take(low, at, axis=1), np.take(high, at, axis=1), weight[at])


@lru_cache(maxsize=8192)
def _own_boxes(shape: tuple[int, ...], layout: Layout) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(tile, low corner, high corner) of every piece of every replica in the tensor's own coordinates (the corners
    dimension-major, as `Pieces`'): an axis tiling's shards, a `Linear` tiling's runs cut into boxes; None past
    MAX_TILES or with two shards on a tile."""
    flat = any(axis.axis.kind == "Linear" for axis in layout.axes)
    size = (prod(shape),) if flat else shape
    place = placement(size, flattened(layout) if flat else layout)
    if place is None:
        return None
    replicas = _replicas(place)
    if replicas is None or prod(parts for _, parts, _ in place.dimensions) * len(replicas) > MAX_TILES:
        return None
    index = np.indices([parts for _, parts, _ in place.dimensions], dtype=np.int64).reshape(len(size), -1)
    tiles = (sum(row * stride for row, (_, _, stride) in zip(index, place.dimensions))[None, :]
             + replicas[:, None]).ravel()
    if np.bincount(tiles).max(initial=0) > 1:
        return None
    low = np.tile(np.minimum(index * np.array([[extent] for extent, _, _ in place.dimensions]),
                             np.array(size)[:, None]), len(replicas))
    high = np.minimum(low + np.array([[extent] for extent, _, _ in place.dimensions]), np.array(size)[:, None])
    boxes = _run_boxes(shape, tiles, low[0], high[0]) if flat else (tiles, low, high)
    for array in boxes:  # cached: shared by every step and reading that meets this layout
        array.flags.writeable = False
    return boxes


def _replicas(place: Placement) -> np.ndarray | None:
    """`replica_offsets`, None where it is too large; a lone replica at 0 without looking for gaps in its pattern
    (most layouts have one: a sixth of the cost of `_own_boxes`)."""
    if place.replicas == 1:
        span = 1 + sum((parts - 1) * stride for _, parts, stride in place.dimensions)
        return _AT_ZERO if max(span, prod(parts for _, parts, _ in place.dimensions)) <= MAX_TILES else None
    try:
        return replica_offsets(place)
    except TooLarge:
        return None


_AT_ZERO = np.zeros(1, dtype=np.int64)
_AT_ZERO.flags.writeable = False


def run_boxes(shape: tuple[int, ...], tiles: np.ndarray, start: np.ndarray,
              stop: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs `[start, stop)` of `shape`'s row-major order as boxes (at most `2 x rank - 1` each, a row each), with
    their tiles.

    >>> run_boxes((2, 3), np.array([7]), np.array([1]), np.array([5]))[1:]
    (array([[0, 1],
           [1, 0]]), array([[1, 3],
           [2, 2]]))
    """
    tiles, low, high = _run_boxes(shape, tiles, start, stop)
    return tiles, low.T, high.T


def _run_boxes(shape: tuple[int, ...], tiles: np.ndarray, start: np.ndarray,
               stop: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`run_boxes`, the corners dimension-major. With `unit[d]` the elements of one index of dimension `d` and
    `up[d]`, `down[d]` a run's ends rounded inward to whole units of `d`: at the first `d` whose units the run has a
    whole one of, the box `[up[d], down[d])`; below it, a head `[up[d], up[d - 1])` and a tail
    `[down[d - 1], down[d])`. Each is a box of whole units of its `level` within one unit of `level - 1`."""
    rank = len(shape)
    unit = [prod(shape[d + 1:]) for d in range(rank)]
    up = np.stack([-(-start // n) * n for n in unit])
    down = np.stack([stop // n * n for n in unit])
    whole = up[:-1] <= down[:-1]  # the run has a whole unit of d (below it, heads and tails)
    # per segment (the middles of every level, the heads, the tails) and run, its ends and whether it is kept
    begin, end = np.concatenate([up, up[1:], down[:-1]]), np.concatenate([down, up[:-1], down[1:]])
    kept = end > begin
    kept[1:rank] &= ~whole
    kept[rank:] &= np.concatenate([whole, whole])
    at = np.flatnonzero(kept)
    counts = kept.sum(axis=1)
    level = np.repeat([*range(rank), *range(1, rank), *range(1, rank)], counts)
    run = at - np.repeat(np.arange(len(counts)) * len(start), counts)
    begin, end = np.take(begin, at), np.take(end, at)
    low, high = np.empty((rank, len(at)), dtype=np.int64), np.empty((rank, len(at)), dtype=np.int64)
    outer = 0  # the index of the unit of d - 1 a box is in, counted from the tensor's start
    for d in range(rank):  # above `level` one index, at it the box's units, below it whole
        index = begin // unit[d]
        low[d] = np.where(level >= d, index - outer * shape[d], 0)
        high[d] = np.where(level > d, low[d] + 1, np.where(level == d, end // unit[d] - outer * shape[d], shape[d]))
        outer = index
    return tiles[run], low, high


def _through_view(view: tuple[int, int, int, bool], shape: tuple[int, ...], space: tuple[int, ...], tiles: np.ndarray,
                  low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source boxes through an `AxisFactorView` (`plan_exchange.viewed`): not reversed, source `(m0, f x inner + c)`
    along (merge, split) is result `(f x S[merge] + m0, c)`; reversed, source `(f x R[merge] + m0, c)` is result
    `(m0, f x inner + c)` (source `c >= inner`: dropped). A box is one piece per factor it meets, or, where it spans
    the other coupled axis whole, at most three (`_factor_runs`): a shard of the heads is then priced as few pieces
    as it is boxes, not one per head."""
    split, merge, factor, reverse = view
    if not reverse:
        inner, along = shape[split] // factor, shape[merge]
        full = (low[merge] == 0) & (high[merge] >= along)
        box, f0, f1 = _factor_runs(low[split], high[split], inner, factor, full)
        new_low, new_high = np.take(low, box, axis=1), np.take(high, box, axis=1)
        new_low[split] = np.clip(new_low[split] - f0 * inner, 0, inner)
        new_high[split] = np.clip(new_high[split] - f0 * inner, 0, inner)
        new_low[merge] += f0 * along
        new_high[merge] += (f1 - 1) * along
    else:
        inner, along = space[split] // factor, space[merge]
        full = (low[split] == 0) & (high[split] >= inner)
        box, f0, f1 = _factor_runs(low[merge], high[merge], along, factor, full)
        new_low, new_high = np.take(low, box, axis=1), np.take(high, box, axis=1)
        new_low[merge] = np.clip(new_low[merge] - f0 * along, 0, along)
        new_high[merge] = np.clip(new_high[merge] - f0 * along, 0, along)
        new_low[split] = f0 * inner + np.minimum(new_low[split], inner)
        new_high[split] = (f1 - 1) * inner + np.minimum(new_high[split], inner)
    return tiles[box], new_low, new_high


def _factor_runs(start: np.ndarray, stop: np.ndarray, unit: int, factor: int,
                 full: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per box `[start, stop)` along the factored axis (factor `f` is `[f x unit, (f + 1) x unit)`), the runs
    `[f0, f1)` of factors it becomes, with each run's box: each factor it meets alone, or, for a box `full` (the
    other coupled axis whole, so that whole factors in a row are one box), the partial first factor, the whole ones,
    the partial last one."""
    first, last = np.minimum(start // unit, factor), np.minimum(-(-stop // unit), factor)
    whole_first, whole_last = np.minimum(-(-start // unit), factor), np.minimum(stop // unit, factor)
    alone = np.where(full, 0, np.maximum(last - first, 0))
    box = np.repeat(np.arange(len(start)), alone)
    f0 = first[box] + np.arange(len(box)) - np.repeat(np.cumsum(alone) - alone, alone)
    runs = [(box, f0, f0 + 1)]
    for begin, end, kept in ((first, first + 1, start % unit > 0), (whole_first, whole_last, whole_last > whole_first),
                             (whole_last, whole_last + 1, (stop % unit > 0) & (whole_last >= whole_first))):
        kept = full & kept & (end > begin) & (begin < factor)
        runs.append((np.flatnonzero(kept), begin[kept], end[kept]))
    return tuple(np.concatenate(parts) for parts in zip(*runs))


def pair_bytes(operation: Operation, source_shape: tuple[int, ...], result_shape: tuple[int, ...], element_size: int,
               sources: tuple[Layout, ...], results: tuple[Layout, ...], reading: str = OUTER) -> np.ndarray:
    """Per (source layout, result layout), the bytes the step sends (`step_bytes`; 0 where it cannot be priced,
    as the plan's figure leaves such a step out), a view read `reading`."""
    source_keys, source_index = _placements(sources)
    result_keys, result_index = _placements(results)
    distinct = _distinct_pair_bytes(operation, source_shape, result_shape, element_size, source_keys, result_keys,
                                    reading)
    return distinct[np.ix_(source_index, result_index)]


def pairs_kept(operation: Operation, source_shape: tuple[int, ...], result_shape: tuple[int, ...], element_size: int,
               sources: tuple[Layout, ...], results: tuple[Layout, ...], reading: str = OUTER) -> bool:
    """Whether the price store keeps `pair_bytes` of every pair of these layouts (a plan priced by an earlier run)."""
    return price_store.keeps_all(*_stored_pairs(operation, source_shape, result_shape, element_size,
                                                _placements(sources)[0], _placements(results)[0], reading))


def _stored_pairs(operation: Operation, source_shape: tuple[int, ...], result_shape: tuple[int, ...],
                  element_size: int, sources: tuple[Layout, ...], results: tuple[Layout, ...],
                  reading: str) -> tuple[int, list[tuple[int, int]]]:
    """The price store's step key of `pair_bytes` of layouts that each place differently, and its pairs' keys
    (source-major)."""
    step = price_store.step_key(operation.text, source_shape, result_shape, element_size, reading)
    return step, list(product(map(price_store.layout_key, sources), map(price_store.layout_key, results)))


def matched_bytes(operation: Operation, source_shape: tuple[int, ...], result_shape: tuple[int, ...],
                  element_size: int, sources: tuple[Layout, ...], results: tuple[Layout, ...],
                  reading: str = OUTER) -> np.ndarray:
    """Per k, the bytes the step sends from `sources[k]` to `results[k]` (`pair_bytes`' diagonal, without its other
    pairs: a step within one group pairs each candidate's two sides only)."""
    kept, index = _distinct(tuple(zip(sources, results)), lambda pair: tuple(map(placement_key, pair)))
    pairs = tuple((placed_only(s), placed_only(r)) for s, r in kept)
    return _distinct_matched_bytes(operation, source_shape, result_shape, element_size, pairs, reading)[index]


@lru_cache(maxsize=1024)
def _distinct_matched_bytes(operation: Operation, source_shape: tuple[int, ...], result_shape: tuple[int, ...],
                            element_size: int, pairs: tuple[tuple[Layout, Layout], ...], reading: str) -> np.ndarray:
    """`matched_bytes` of pairs that each place differently (cached: repeated layers price the same step; and across
    runs, `price_store`)."""
    step = price_store.step_key(operation.text, source_shape, result_shape, element_size, reading)
    found = price_store.kept_or_priced(
        step, [(price_store.layout_key(s), price_store.layout_key(r)) for s, r in pairs],
        lambda missing: _priced_matched(operation, source_shape, result_shape, element_size,
                                        tuple(pairs[k] for k in missing), reading))
    found.flags.writeable = False
    return found


def _priced_matched(operation: Operation, source_shape: tuple[int, ...], result_shape: tuple[int, ...],
                    element_size: int, pairs: tuple[tuple[Layout, Layout], ...], reading: str) -> np.ndarray:
    """`matched_bytes` of pairs that each place differently, priced here."""
    meeting = meeting_of(operation, source_shape, result_shape, reading)
    sending = [source_pieces(meeting, source_shape, s) if meeting else None for s, _ in pairs]
    receiving = [result_pieces(meeting, result_shape, r) if meeting else None for _, r in pairs]
    closed = [k for k, (s, r) in enumerate(zip(sending, receiving)) if s is not None and r is not None]
    found = np.zeros(len(pairs), dtype=np.int64)
    if closed:
        wanted = np.array([receiving[k].wanted for k in closed], dtype=np.int64)
        held = _held_matched([sending[k] for k in closed], [receiving[k] for k in closed])
        found[closed] = (wanted - held) * element_size
    for k, (source, result) in enumerate(pairs):
        if sending[k] is None or receiving[k] is None:
            sent = step_bytes(operation, source_shape, result_shape, element_size, source, result, reading)
            found[k] = 0 if isinstance(sent, str) else sent
    found.flags.writeable = False
    return found


def placement_key(layout: Layout) -> tuple:
    """What of a layout decides where its elements are: its axes, replicas and tile count, not its memory class nor
    its order (layouts with one key send the same bytes on every step)."""
    return layout.axes, layout.replicas, layout.tile_count


def _placements(layouts: tuple[Layout, ...]) -> tuple[tuple[Layout, ...], np.ndarray]:
    """The layouts that place differently (one per `placement_key`, in `placed_only` form), and each layout's among
    them."""
    kept, index = _distinct(layouts, placement_key)
    return tuple(placed_only(layout) for layout in kept), index


def _distinct(items: tuple, key: Callable[[object], tuple]) -> tuple[tuple, np.ndarray]:
    """The first item of each `key`, in order, and each item's among them."""
    first: dict[tuple, int] = {}
    index = np.array([first.setdefault(key(item), len(first)) for item in items], dtype=np.int64)
    kept: dict[int, object] = {}
    for item, k in zip(items, index.tolist()):
        kept.setdefault(k, item)
    return tuple(kept[k] for k in range(len(kept))), index


def placed_only(layout: Layout) -> Layout:
    """`layout` with the order and memory class that every layout of its `placement_key` is given here: the caches
    keyed by layouts then price a placement once, whichever class and order its candidates carry."""
    return replace(layout, order=ANY_ORDER, memory_class=STANDARD)


@lru_cache(maxsize=1024)
def _distinct_pair_bytes(operation: Operation, source_shape: tuple[int, ...], result_shape: tuple[int, ...],
                         element_size: int, sources: tuple[Layout, ...], results: tuple[Layout, ...],
                         reading: str) -> np.ndarray:
    """`pair_bytes` of layouts that each place differently (cached: repeated layers price the same step; and across
    runs, `price_store`): only the sources with a pair not kept are priced."""
    width = len(results)

    def priced(missing: list[int]) -> np.ndarray:
        """The missing pairs (positions in the flattened matrix), their sources' rows priced whole."""
        rows, at = np.unique(np.array(missing) // width, return_inverse=True)
        whole = _priced_pairs(operation, source_shape, result_shape, element_size,
                              tuple(sources[i] for i in rows.tolist()), results, reading)
        return whole[at, np.array(missing) % width]

    step, keys = _stored_pairs(operation, source_shape, result_shape, element_size, sources, results, reading)
    found = price_store.kept_or_priced(step, keys, priced).reshape(len(sources), width)
    found.flags.writeable = False
    return found


def _priced_pairs(operation: Operation, source_shape: tuple[int, ...], result_shape: tuple[int, ...],
                  element_size: int, sources: tuple[Layout, ...], results: tuple[Layout, ...],
                  reading: str) -> np.ndarray:
    """`pair_bytes` of layouts that each place differently, priced here."""
    meeting = meeting_of(operation, source_shape, result_shape, reading)
    sending = [source_pieces(meeting, source_shape, s) if meeting else None for s in sources]
    receiving = [result_pieces(meeting, result_shape, r) if meeting else None for r in results]
    rows = [i for i, s in enumerate(sending) if s is not None]
    columns = [j for j, r in enumerate(receiving) if r is not None]
    found = np.zeros((len(sources), len(results)), dtype=np.int64)
    if rows and columns:
        wanted = np.array([receiving[j].wanted for j in columns], dtype=np.int64)
        held = held_pairs([sending[i] for i in rows], [receiving[j] for j in columns])
        found[np.ix_(rows, columns)] = (wanted[None, :] - held) * element_size
    for i, j in product(range(len(sources)), range(len(results))):
        if sending[i] is None or receiving[j] is None:
            sent = step_bytes(operation, source_shape, result_shape, element_size, sources[i], results[j], reading)
            found[i, j] = 0 if isinstance(sent, str) else sent
    found.flags.writeable = False
    return found


def held_pairs(sources: list[Pieces], results: list[Pieces]) -> np.ndarray:
    """Per (source, result), the wanted (element, tile) pairs the source already holds there: every source piece
    against every result piece on its tile, intersected, weighted by the source's partials. One side is laid out by
    tile (`_ByTile`: the side whose columns times the other's pieces are fewer), the other's pieces are looked up in
    it, a chunk at a time."""
    tiles = 1 + max(int(side.tiles.max(initial=0)) for side in (*sources, *results))
    source_slots, result_slots = _slots(sources, tiles), _slots(results, tiles)
    if source_slots.sum() * sum(len(r.tiles) for r in results) < result_slots.sum() * sum(
            len(s.tiles) for s in sources):
        return _held_by_tile(_ByTile.of(sources, source_slots, tiles, weighted=True), results, weighted=False).T
    return _held_by_tile(_ByTile.of(results, result_slots, tiles, weighted=False), sources, weighted=True)


def _held_matched(sources: list[Pieces], results: list[Pieces]) -> np.ndarray:
    """Per k, `held_pairs` of `sources[k]` and `results[k]` alone, in one pass: pair k's tiles moved to
    `k x tiles + tile`, apart from every other pair's, its results laid out as one side."""
    tiles = 1 + max(int(side.tiles.max(initial=0)) for side in (*sources, *results))
    moved = [(replace(s, tiles=s.tiles + k * tiles), replace(r, tiles=r.tiles + k * tiles))
             for k, (s, r) in enumerate(zip(sources, results))]
    laid = [Pieces(*(np.concatenate([getattr(r, name) for _, r in moved], axis=-1)
                     for name in ("tiles", "low", "high", "weight")))]
    return _held_by_tile(_ByTile.of(laid, _slots(laid, tiles * len(moved)), tiles * len(moved), weighted=False),
                         [s for s, _ in moved], weighted=True)[:, 0]


def _joined(sides: list[Pieces]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The tiles, corners (as 32-bit numbers: half the memory to read) and weights of the pieces of `sides` in a
    row."""
    return (np.concatenate([side.tiles for side in sides]),
            np.concatenate([side.low for side in sides], axis=1, dtype=np.int32, casting="same_kind"),
            np.concatenate([side.high for side in sides], axis=1, dtype=np.int32, casting="same_kind"),
            np.concatenate([side.weight for side in sides]))


def _slots(sides: list[Pieces], tiles: int) -> np.ndarray:
    """Per side, the most pieces it has on one tile (at least 1: an empty side keeps its column)."""
    key = np.concatenate([side.tiles + k * tiles for k, side in enumerate(sides)])
    return np.maximum(np.bincount(key, minlength=len(sides) * tiles).reshape(len(sides), tiles).max(axis=1), 1)


@dataclass(frozen=True)
class _ByTile:
    """Sides laid out by tile: per dimension, tile and column (a side's slots, as many as it has pieces on its most
    crowded tile, from `starts[side]` on), the corners (empty where a side has fewer pieces there) and, for sources,
    the partials held (None for results, and where every piece holds one: each piece wanted once per partial is
    counted by `Pieces.wanted`). Dimension-major: a dimension's corners of the pieces looked up are then one
    contiguous block, which numpy's loops run through several times faster than rows of a few numbers."""

    low: np.ndarray
    high: np.ndarray
    weight: np.ndarray | None
    starts: np.ndarray

    @classmethod
    def of(cls, sides: list[Pieces], slots: np.ndarray, tiles: int, weighted: bool) -> _ByTile:
        starts = np.cumsum(slots) - slots
        at, low, high, weight = _joined(sides)
        side = np.repeat(np.arange(len(sides)), [len(side.tiles) for side in sides])
        column = starts[side] + (_slot(side * tiles + at) if (slots > 1).any() else 0)
        cell = at * int(slots.sum()) + column
        laid = np.zeros((2, len(low), tiles, int(slots.sum())), dtype=np.int32)
        for d in range(len(low)):
            laid[0, d].put(cell, low[d])
            laid[1, d].put(cell, high[d])
        held = None
        if weighted and (weight != 1).any():
            held = np.zeros(laid.shape[2:], dtype=np.int64)
            held.put(cell, weight)
        return cls(laid[0], laid[1], held, starts)


def _slot(key: np.ndarray) -> np.ndarray:
    """Per item, how many items before it have its key."""
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    slot = np.empty_like(order)
    slot[order] = np.arange(len(ordered)) - np.searchsorted(ordered, ordered, "left")
    return slot


def _held_by_tile(laid: _ByTile, others: list[Pieces], weighted: bool) -> np.ndarray:
    """`held_pairs` with one side `laid` out by tile, the `others` looked up in it, all others' pieces in a row a
    chunk at a time: per other side and laid side, the held pairs (weighted by the partials of whichever side is the
    source: the others' own where `weighted`)."""
    rank, _, columns = laid.low.shape
    at, low, high, weight = _joined(others)
    owner = np.repeat(np.arange(len(others)), [len(other.tiles) for other in others])
    if not weighted or (weight == 1).all():
        weight = None
    # a product of extents in 32 bits where no piece looked up is as large as 2 ** 31 elements (the held part of
    # one is at most the whole): a third less time than in 64
    wide = prod(int((high[d] - low[d]).max(initial=0)) for d in range(rank)) >= 1 << 31
    held = np.zeros((len(others), columns), dtype=np.int64)
    step = max(1, CHUNK // max(1, columns * rank))
    for a in range(0, len(at), step):
        picked = at[a:a + step]
        near, far = np.take(laid.low, picked, axis=1), np.take(laid.high, picked, axis=1)
        np.minimum(far, high[:, a:a + step, None], out=far)
        np.maximum(near, low[:, a:a + step, None], out=near)
        np.subtract(far, near, out=far)
        np.maximum(far, 0, out=far)
        count = far[0].astype(np.int64) if wide else far[0]
        for d in range(1, rank):
            np.multiply(count, far[d], out=count)
        if laid.weight is not None:
            count = count * np.take(laid.weight, picked, axis=0)
        if weight is not None:
            count = count * weight[a:a + step, None]
        mine = owner[a:a + step]
        first = np.flatnonzero(np.concatenate(([True], mine[1:] != mine[:-1])))
        held[mine[first]] += np.add.reduceat(count, first, axis=0, dtype=np.int64)
    return np.add.reduceat(held, laid.starts, axis=1)

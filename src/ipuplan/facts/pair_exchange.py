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
from functools import lru_cache
from itertools import product
from math import prod

import numpy as np

from ipuplan.facts import price_store
from ipuplan.facts.exchange_proxy import placement
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
"""Corners compared in one numpy pass (pieces x sides laid out by tile x slots x rank): bounds its memory to what
the caches hold (the reference plan's pricing, `held_pairs`: 0.40 s at 1 << 21, 0.35 s at 1 << 16)."""


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
    its tile; `weight`: a source piece's partials held (1 for a mover), a result piece's copies wanted."""

    tiles: np.ndarray
    low: np.ndarray
    high: np.ndarray
    weight: np.ndarray

    @property
    def wanted(self) -> int:
        return int((self.weight * np.prod(self.high - self.low, axis=1)).sum())


@lru_cache(maxsize=8192)
def source_pieces(meeting: Meeting, shape: tuple[int, ...], layout: Layout) -> Pieces | None:
    """The source's pieces in the common space, or None where the closed form does not apply."""
    boxes = _own_boxes(shape, layout)
    if boxes is None:
        return None
    tiles, low, high = boxes
    if meeting.partials:
        weight = high[:, 0] - low[:, 0]
        return _kept(meeting, tiles, low[:, 1:], high[:, 1:], weight)
    if meeting.in_source_space:
        low, high = _clipped(meeting, low, high)
    elif meeting.view is not None and meeting.reading != OUTER:
        tiles, low, high = _cut_inner(meeting.view, shape, tiles, low, high)
    elif meeting.view is not None:
        tiles, low, high = _through_view(meeting.view, shape, meeting.space, tiles, low, high)
    else:
        offsets, space = np.array(meeting.offsets, dtype=np.int64), np.array(meeting.space, dtype=np.int64)
        low, high = np.clip(low - offsets, 0, space), np.clip(high - offsets, 0, space)
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
        low, high = _clipped(meeting, low, high)
    return _kept(meeting, tiles, low, high, np.full(len(tiles), max(meeting.partials, 1), dtype=np.int64))


def _clipped(meeting: Meeting, low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Boxes cut to the region of the common space both sides have elements for."""
    valid_low, valid_high = np.array(meeting.valid_low, dtype=np.int64), np.array(meeting.valid_high, dtype=np.int64)
    # minimum of maximum, not np.clip: the same numbers at a third of the cost on these small arrays
    return np.minimum(np.maximum(low, valid_low), valid_high), np.minimum(np.maximum(high, valid_low), valid_high)


def _cut_inner(view: tuple[int, int, int, bool], whole: tuple[int, ...], tiles: np.ndarray, low: np.ndarray,
               high: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Boxes of the side whose `split_axis` is whole, in the other side's coordinates, the view read `INNER`:
    `(m0, c x factor + f)` along (merge, split) is `(f x whole[merge] + m0, c)`. A box is one piece per factor `f`;
    one that spans the merge axis whole is at most three (the factors whose columns start and stop alike are one
    run of the merge axis), so that a side split along the cut axis is priced at the cost of the `OUTER` reading."""
    split, merge, factor, _ = view
    along = whole[merge]
    full = (low[:, merge] == 0) & (high[:, merge] >= along)
    # per box, runs [first, last) of factors: each factor alone for a box cut along merge, else the runs between
    # 0, low mod F, high mod F and F (over each, the columns a factor takes start and stop alike)
    width = max(factor, 3)
    single = np.minimum(np.arange(width + 1, dtype=np.int64), factor)[None, :]
    cuts = np.sort(np.column_stack([np.zeros(len(tiles), dtype=np.int64), low[:, split] % factor,
                                    high[:, split] % factor, np.full(len(tiles), factor, dtype=np.int64)]), axis=1)
    runs = np.pad(cuts, ((0, 0), (0, width - 3)), mode="edge")
    first = np.where(full[:, None], runs[:, :-1], single[:, :-1])
    last = np.where(full[:, None], runs[:, 1:], single[:, 1:])
    keep = last > first
    box = np.repeat(np.arange(len(tiles)), keep.sum(axis=1))
    f0, f1 = first[keep], last[keep]
    new_low, new_high = low[box].copy(), high[box].copy()
    inner = whole[split] // factor
    new_low[:, split] = np.clip(-((f0 - low[box, split]) // factor), 0, inner)
    new_high[:, split] = np.clip(-((f0 - high[box, split]) // factor), 0, inner)
    merged = full[box]
    new_low[:, merge] = np.where(merged, f0 * along, f0 * along + low[box, merge])
    new_high[:, merge] = np.where(merged, f1 * along, f0 * along + high[box, merge])
    return tiles[box], new_low, new_high


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
    return bool(all((low[:, d] == 0).all() and (high[:, d] >= shape[d]).all() for d in spanned))


def _kept(meeting: Meeting, tiles: np.ndarray, low: np.ndarray, high: np.ndarray, weight: np.ndarray) -> Pieces:
    """The non-empty pieces, the common space's size-1 dimensions dropped (a piece spans them whole)."""
    keep = (high > low).all(axis=1) & (weight > 0)
    wide = [d for d, n in enumerate(meeting.space) if n > 1]
    if len(wide) < len(meeting.space):
        low, high = low[:, wide], high[:, wide]
    if keep.all():
        return Pieces(tiles, low, high, weight)
    return Pieces(tiles[keep], low[keep], high[keep], weight[keep])


@lru_cache(maxsize=8192)
def _own_boxes(shape: tuple[int, ...], layout: Layout) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(tile, low corner, high corner) of every piece of every replica in the tensor's own coordinates: an axis
    tiling's shards, a `Linear` tiling's runs cut into boxes; None past MAX_TILES or with two shards on a tile."""
    flat = any(axis.axis.kind == "Linear" for axis in layout.axes)
    place = placement((prod(shape),), flattened(layout)) if flat else placement(shape, layout)
    if place is None:
        return None
    try:
        replicas = replica_offsets(place)
    except TooLarge:
        return None
    parts = prod(parts for _, parts, _ in place.dimensions)
    if parts * len(replicas) > MAX_TILES:
        return None
    index = np.indices([parts for _, parts, _ in place.dimensions], dtype=np.int64).reshape(len(place.dimensions), -1).T
    extent = np.array([e for e, _, _ in place.dimensions], dtype=np.int64)
    size = np.array([n for n in ((prod(shape),) if flat else shape)], dtype=np.int64)
    low = np.minimum(index * extent, size)
    high = np.minimum(low + extent, size)
    tiles = ((index @ np.array([s for _, _, s in place.dimensions], dtype=np.int64))[None, :]
             + replicas[:, None]).ravel()
    if np.bincount(tiles).max(initial=0) > 1:
        return None
    low, high = np.tile(low, (len(replicas), 1)), np.tile(high, (len(replicas), 1))
    boxes = (tiles, low, high) if not flat else run_boxes(shape, tiles, low[:, 0], high[:, 0])
    for array in boxes:  # cached: shared by every step and reading that meets this layout
        array.flags.writeable = False
    return boxes


def run_boxes(shape: tuple[int, ...], tiles: np.ndarray, start: np.ndarray,
              stop: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs `[start, stop)` of `shape`'s row-major order as boxes (at most `2 x rank - 1` each), with their tiles:
    the part of a run in its first slab of dimension 0, the whole slabs, the part in its last slab, the partial
    slabs cut the same way along the next dimension.

    >>> run_boxes((2, 3), np.array([7]), np.array([1]), np.array([5]))[1:]
    (array([[0, 1],
           [1, 0]]), array([[1, 3],
           [2, 2]]))
    """
    if len(shape) == 1:
        keep = stop > start
        return tiles[keep], start[keep, None], stop[keep, None]
    inner = prod(shape[1:])
    first, last = -(-start // inner), stop // inner
    found = []
    whole = last > first
    found.append((tiles[whole], first[whole], last[whole], np.zeros((whole.sum(), len(shape) - 1), dtype=np.int64),
                  np.tile(np.array(shape[1:], dtype=np.int64), (whole.sum(), 1))))
    slab = start // inner
    head = (start % inner > 0) & (start < stop)
    tail = (stop % inner > 0) & (last >= first) & (start < stop)
    for mask, at, begin, end in ((head, slab, start - slab * inner,
                                  np.minimum(stop, (slab + 1) * inner) - slab * inner),
                                 (tail, last, np.zeros_like(stop), stop - last * inner)):
        sub_tiles, sub_low, sub_high = run_boxes(shape[1:], np.flatnonzero(mask), begin[mask], end[mask])
        found.append((tiles[sub_tiles], at[sub_tiles], at[sub_tiles] + 1, sub_low, sub_high))
    return (np.concatenate([t for t, *_ in found]),
            np.concatenate([np.column_stack([lo0, lo]) for _, lo0, _, lo, _ in found]),
            np.concatenate([np.column_stack([hi0, hi]) for _, _, hi0, _, hi in found]))


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
        full = (low[:, merge] == 0) & (high[:, merge] >= along)
        box, f0, f1 = _factor_runs(low[:, split], high[:, split], inner, factor, full)
        new_low, new_high = low[box].copy(), high[box].copy()
        new_low[:, split] = np.clip(low[box, split] - f0 * inner, 0, inner)
        new_high[:, split] = np.clip(high[box, split] - f0 * inner, 0, inner)
        new_low[:, merge], new_high[:, merge] = f0 * along + low[box, merge], (f1 - 1) * along + high[box, merge]
    else:
        inner, along = space[split] // factor, space[merge]
        full = (low[:, split] == 0) & (high[:, split] >= inner)
        box, f0, f1 = _factor_runs(low[:, merge], high[:, merge], along, factor, full)
        new_low, new_high = low[box].copy(), high[box].copy()
        new_low[:, merge] = np.clip(low[box, merge] - f0 * along, 0, along)
        new_high[:, merge] = np.clip(high[box, merge] - f0 * along, 0, along)
        new_low[:, split] = f0 * inner + np.minimum(low[box, split], inner)
        new_high[:, split] = (f1 - 1) * inner + np.minimum(high[box, split], inner)
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
        laid = _ByTile.of([receiving[k] for k in closed], weighted=False)
        held = [_held_by_tile(_ByTile(laid.low[:, n:n + 1], laid.high[:, n:n + 1], None), [sending[k]])[0, 0]
                for n, k in enumerate(closed)]  # each source against its own result only
        found[closed] = (wanted - np.array(held, dtype=np.int64)) * element_size
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
    step = price_store.step_key(operation.text, source_shape, result_shape, element_size, reading)
    width = len(results)

    def priced(missing: list[int]) -> np.ndarray:
        """The missing pairs (positions in the flattened matrix), their sources' rows priced whole."""
        rows, at = np.unique(np.array(missing) // width, return_inverse=True)
        whole = _priced_pairs(operation, source_shape, result_shape, element_size,
                              tuple(sources[i] for i in rows.tolist()), results, reading)
        return whole[at, np.array(missing) % width]

    keys = list(product(map(price_store.layout_key, sources), map(price_store.layout_key, results)))
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
    tile (`_ByTile`: the side with fewer pieces on a tile), the other's pieces are looked up in it, a chunk at a
    time."""
    source_slots = max(int(np.bincount(s.tiles).max(initial=0)) for s in sources)
    result_slots = max(int(np.bincount(r.tiles).max(initial=0)) for r in results)
    if source_slots * len(sources) * sum(len(r.tiles) for r in results) < result_slots * len(results) * sum(
            len(s.tiles) for s in sources):
        return _held_by_tile(_ByTile.of(sources, weighted=True), [replace(r, weight=np.ones_like(r.weight))
                                                                   for r in results]).T
    return _held_by_tile(_ByTile.of(results, weighted=False), sources)


@dataclass(frozen=True)
class _ByTile:
    """Sides laid out by tile (tile-major, so that the sides of one tile are read together): per tile, side and slot
    (a side's pieces on one tile), the corners (empty where a side has fewer pieces there) and, for sources, the
    partials held (None for results: each piece wanted once per partial is counted by `Pieces.wanted`)."""

    low: np.ndarray
    high: np.ndarray
    weight: np.ndarray | None

    @classmethod
    def of(cls, sides: list[Pieces], weighted: bool) -> _ByTile:
        tiles = 1 + max(int(side.tiles.max(initial=0)) for side in sides)
        slots = max(int(np.bincount(side.tiles).max(initial=0)) for side in sides)
        rank = sides[0].low.shape[1]
        low = np.zeros((tiles, len(sides), slots, rank), dtype=np.int32)
        high = np.zeros_like(low)
        weight = np.zeros((tiles, len(sides), slots), dtype=np.int64) if weighted else None
        for k, side in enumerate(sides):
            order = np.argsort(side.tiles, kind="stable")
            at = side.tiles[order]
            slot = np.arange(len(at)) - np.searchsorted(at, at, "left")
            low[at, k, slot], high[at, k, slot] = side.low[order], side.high[order]
            if weight is not None:
                weight[at, k, slot] = side.weight[order]
        return cls(low, high, weight)


def _held_by_tile(laid: _ByTile, others: list[Pieces]) -> np.ndarray:
    """`held_pairs` with one side `laid` out by tile, the `others` looked up in it: per other side and laid side,
    the held pairs (weighted by the partials of whichever side is the source)."""
    tiles, sides, slots, rank = laid.low.shape
    held = np.zeros((len(others), sides), dtype=np.int64)
    step = max(1, CHUNK // max(1, sides * slots * max(rank, 1)))
    for o, other in enumerate(others):
        on = other.tiles < tiles
        at, low, high, weight = other.tiles[on], other.low[on], other.high[on], other.weight[on]
        for a in range(0, len(at), step):
            picked = at[a:a + step]
            near, far = laid.low[picked], laid.high[picked]
            np.minimum(far, high[a:a + step, None, None, :].astype(np.int32), out=far)
            np.maximum(near, low[a:a + step, None, None, :].astype(np.int32), out=near)
            np.subtract(far, near, out=far)
            np.maximum(far, 0, out=far)
            count = np.ones(far.shape[:3], dtype=np.int64)
            for d in range(rank):
                count *= far[..., d]
            if laid.weight is not None:
                count *= laid.weight[picked]
            held[o] += weight[a:a + step] @ count.sum(axis=2)
    return held

"""The exchange of a written plan: the bytes its mover and reduction steps send between tiles.

A function of the plan alone (docs/EXCHANGE.md is the definition). Each mover step (`Copy ..`,
`Convert DirectRetile`, `Convert StageLogicalThenTransform`) and each reduction (`Sum { axis: 0 }`
of partials) is priced once, from its source's tile mapping to its result's as written: every
element of the result goes to every result tile (every replica) that does not hold it in the
source layout (any replica); padding is never sent.

Counted per block, not per element: both layouts' tile of an element is a sum of terms, each a
function of a few coordinates (one dimension for an axis tiling; the whole flattened index for a
`Linear` one; the two axes a view couples). Coordinates coupled by a term form a group; each group
is enumerated on its own and the groups are combined per tile distance, as in
`ipuplan.facts.exchange_proxy`, so a [729, 4304] tensor split on both axes costs 729 + 4304 entries, not
3.1 M.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from math import prod
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ipuplan.errors import SyntaxProblem
from ipuplan.facts import price_store
from ipuplan.facts.dataflow import Dataflow, dataflow
from ipuplan.facts.exchange_proxy import Placement, _per_distance, placement
from ipuplan.plan.collector import gc_paused
from ipuplan.plan.debug_syntax import Call, Struct, as_int, as_name
from ipuplan.plan.layout import Axis, Layout
from ipuplan.plan.operation import Operation, parse_operation

if TYPE_CHECKING:
    from ipuplan.plan.format import Plan, Value


class WithFlow(Protocol):
    """What `plan_exchange` reads of a plan's facts (a `PlanFacts`, which itself reads this module's families)."""

    flow: Dataflow

MOVER = "mover"
REDUCTION = "reduction"

OUTER = "outer"
"""An `AxisFactorView`'s factor as the outer part of the cut axis (head-major): the reading every figure reports."""
INNER = "inner"
"""The factor as the inner part: the plan format does not say which, so a rewrite keeps the views it changes to
layouts where both readings send the same bytes (docs/EXCHANGE.md)."""

MAX_TILES = 1 << 16
"""Tiles a layout may span, replicas included, to be priced (a chip has 1,472): beyond, a damaged plan's placement."""
MAX_ENUMERATED = 1 << 24
"""Entries (elements, runs, replica pairs) one step may enumerate; the reference plan's largest array has 0.9 M."""

Coordinates = tuple[np.ndarray, ...]
"""Per dimension of one tensor, the coordinate of each element of a common index space (broadcastable to it)."""


class TooLarge(Exception):
    """A step whose counting would need more than `MAX_TILES` or `MAX_ENUMERATED`: left unpriced, not crashed on."""


@dataclass(frozen=True)
class StepExchange:
    """What one step sends, counted once (not multiplied by its `execution_count`)."""

    step: int
    kind: str
    """`mover` or `reduction`."""
    source: int
    result: int
    bytes: int


@dataclass(frozen=True)
class Unpriced:
    """A mover or reduction the definition cannot price (its source unknown, shapes it cannot map): not in the total."""

    step: int
    reason: str


@dataclass(frozen=True)
class OtherReading:
    """A view step whose `INNER` reading sends other bytes than the `OUTER` one its figure counts."""

    step: int
    bytes: int
    inner_bytes: int


@dataclass(frozen=True)
class PlanExchange:
    steps: tuple[StepExchange, ...]
    unpriced: tuple[Unpriced, ...]
    other_readings: tuple[OtherReading, ...] = ()
    """The view steps whose figure depends on how the compiler reads the view (none on a plan it wrote itself)."""

    @property
    def total(self) -> int:
        return self.movers + self.reductions

    @property
    def inner_total(self) -> int:
        """The total with every view read `INNER` (equal to `total` where no view's bytes depend on the reading)."""
        return self.total + sum(o.inner_bytes - o.bytes for o in self.other_readings)

    @property
    def movers(self) -> int:
        return sum(s.bytes for s in self.steps if s.kind == MOVER)

    @property
    def reductions(self) -> int:
        return sum(s.bytes for s in self.steps if s.kind == REDUCTION)

    def executed(self, plan: Plan) -> int:
        """The total with each step counted `execution_count` times (every layer of a loop body)."""
        return sum(s.bytes * plan.steps[s.step].execution_count for s in self.steps)


def priced_kind(operation: Operation) -> str | None:
    """MOVER or REDUCTION for the steps this figure prices (when they read one value and write one), else None."""
    return MOVER if operation.is_mover else REDUCTION if operation.kind == "Sum" else None


def plan_exchange(plan: Plan, facts: WithFlow | None = None) -> PlanExchange:
    """Bytes `plan`'s steps send between tiles, per mover and reduction step (`facts`: the plan's, if at hand)."""
    with gc_paused():  # a report counts it after the run, whose objects no longer set aside: 4.3 s at 200k values
        return _plan_exchange(plan, facts)


def _plan_exchange(plan: Plan, facts: WithFlow | None) -> PlanExchange:
    flow = facts.flow if facts is not None else dataflow(plan)
    priced: list[StepExchange] = []
    unpriced: list[Unpriced] = []
    other: list[OtherReading] = []
    kinds: dict[str, str | None] = {}
    # by text: a large plan repeats a few dozen steps, and hashing their `Layout`s walks whole trees
    sent_by_text: dict[tuple, tuple[int | str, int | str]] = {}
    for step in flow.steps:
        text = plan.steps[step.index].operation
        if text not in kinds:
            kinds[text] = priced_kind(parse_operation(text))
        kind = kinds[text]
        if kind is None:
            continue
        if len(step.reads) != 1 or len(step.writes) != 1:
            unpriced.append(Unpriced(step.index,
                                     f"{kind} reads {len(step.reads)} and writes {len(step.writes)} values"))
            continue
        source, result = plan.values[step.reads[0]], plan.values[step.writes[0]]
        key = (text, tuple(source.shape), tuple(result.shape), source.precision, source.layout, result.layout)
        if key not in sent_by_text:
            sent_by_text[key] = _kept_readings(text, source, result)
        sent, inner = sent_by_text[key]
        if isinstance(sent, str):
            unpriced.append(Unpriced(step.index, sent))
            continue
        priced.append(StepExchange(step.index, kind, source.id, result.id, sent))
        if inner != sent:
            other.append(OtherReading(step.index, sent, inner))
    price_store.flush()
    return PlanExchange(tuple(priced), tuple(unpriced), tuple(other))


def _kept_readings(text: str, source: Value, result: Value) -> tuple[int | str, int | str]:
    """`both_readings` of a step that reads `source` and writes `result`, kept across runs in the price store by the
    step's text and its layouts' texts: a plan optimised again prices none of its steps again (its input's and its
    output's took 0.13-0.17 s of a 1.05 s run of the reference plan). A step that cannot be priced is asked each time
    (its figure is the reason why)."""
    operation = parse_operation(text)
    shapes, size = (tuple(source.shape), tuple(result.shape)), source.element_size
    steps = [price_store.step_key(text, *shapes, size, f"plan {reading}")
             for reading in ((OUTER, INNER) if operation.has_view else (OUTER,))]
    pair = (price_store.text_key(source.layout), price_store.text_key(result.layout))
    kept = [price_store.kept_price(step, pair) for step in steps]
    if None not in kept:
        return kept[0], kept[-1]
    found = both_readings(operation, *shapes, size, source.parsed_layout, result.parsed_layout)
    if not any(isinstance(sent, str) for sent in found):
        for step, sent in zip(steps, found):
            price_store.keep_later(step, pair, sent)
    return found


def both_readings(operation: Operation, source_shape: tuple[int, ...], result_shape: tuple[int, ...],
                  element_size: int, source: Layout, result: Layout) -> tuple[int | str, int | str]:
    """`step_bytes` read `OUTER` and `INNER` (the same figure twice for a step without a view)."""
    outer = step_bytes(operation, source_shape, result_shape, element_size, source, result)
    if not operation.has_view or isinstance(outer, str):
        return outer, outer
    return outer, step_bytes(operation, source_shape, result_shape, element_size, source, result, INNER)


@lru_cache(maxsize=65536)
def step_bytes(operation: Operation, source_shape: tuple[int, ...], result_shape: tuple[int, ...], element_size: int,
               source: Layout, result: Layout, reading: str = OUTER) -> int | str:
    """Bytes one mover or reduction sends from `source` to `result`, or why it cannot be priced.

    Cached: repeated layers and unrolled copies repeat the same steps. An element is sent in the
    source's precision (a conversion converts where the element arrives).
    """
    if max((*source_shape, *result_shape), default=1) > MAX_ENUMERATED:
        return f"a dimension of more than {MAX_ENUMERATED:,} elements"
    correspondence = correspondence_of(operation, source_shape, result_shape, reading)
    if isinstance(correspondence, str):
        return correspondence
    shape, source_coordinates, result_coordinates = correspondence
    try:
        sending, receiving = (tiled(source_shape, source, source_coordinates),
                              tiled(result_shape, result, result_coordinates))
        if len(sending.replicas) * len(receiving.replicas) > MAX_ENUMERATED:
            raise TooLarge(f"more than {MAX_ENUMERATED:,} pairs of replicas")
        present = tuple((c >= 0) & (c < size) for c, size in zip(source_coordinates, source_shape))
        present = tuple(mask for mask in present if not mask.all())
        elements, local = counts_at(shape, receiving.terms + tuple(-t for t in sending.terms), present,
                                    local_distances(sending.replicas, receiving.replicas))
    except TooLarge as reason:
        return str(reason)
    return (elements * len(receiving.replicas) - local) * element_size


def correspondence_of(operation: Operation, source_shape: tuple[int, ...], result_shape: tuple[int, ...],
                      reading: str = OUTER) -> tuple[tuple[int, ...], Coordinates, Coordinates] | str:
    """The common index space of a step, and per element of it the source and result element it pairs.

    A reduction pairs partial `(p, *e)` with result element `e`; a mover pairs each result element with
    the source element it copies (an index outside the source's shape is padding, never sent).
    """
    if operation.kind == "Sum":
        if operation.sum_axis != 0 or source_shape[1:] != result_shape:
            return f"a Sum over axis {operation.sum_axis} of {list(source_shape)} into {list(result_shape)}"
        axes = index_axes(source_shape)
        return source_shape, axes, axes[1:]
    axes = index_axes(result_shape)
    if operation.has_view:
        source = viewed(operation, source_shape, result_shape, axes, reading)
    elif operation.copy_offsets:
        offsets = operation.copy_offsets
        same_rank = len(offsets) == len(source_shape) == len(result_shape)
        source = tuple(a + o for a, o in zip(axes, offsets)) if same_rank else "offsets of another rank"
    elif len(source_shape) == len(result_shape):  # the same shape, or one cropped or padded: equal indices pair
        source = axes
    else:
        source = f"a move of {list(source_shape)} into {list(result_shape)} without a view"
    return source if isinstance(source, str) else (result_shape, source, axes)


def index_axes(shape: tuple[int, ...]) -> Coordinates:
    """Each dimension's index, shaped to broadcast along that dimension of `shape`."""
    rank = len(shape)
    return tuple(np.arange(n, dtype=np.int64).reshape([n if d == k else 1 for k in range(rank)])
                 for d, n in enumerate(shape))


def viewed(operation: Operation, source_shape: tuple[int, ...], result_shape: tuple[int, ...],
           axes: Coordinates, reading: str = OUTER) -> Coordinates | str:
    """Source coordinates of a `Copy` through `AxisFactorView { split_axis, merge_axis, factor, reversed }`.

    Not reversed: the source's `split_axis` is cut into `factor` x (size / factor), the factor outer, and
    the factor becomes the outer part of `merge_axis` ([1, 729, 1152] -> [16, 729, 72]: result
    (h, j, c) is source (0, j, 72 h + c), head-major); the result may pad the cut axis ([16, 729, 80]:
    c >= 72 is padding). Reversed: the inverse, so the result's `split_axis` is cut and its outer factor
    joins the source's `merge_axis` ([16, 729, 72] -> [1, 729, 1152]). `INNER` reads the factor as the cut axis's
    inner part instead (result (h, j, c) is source (0, j, 16 c + h)).
    """
    view = axis_factor_view(operation)
    if view is None:
        return "a view other than AxisFactorView"
    split, merge, factor, reverse = view
    whole, cut = (result_shape, source_shape) if reverse else (source_shape, result_shape)
    if not (0 <= split < len(whole) and 0 <= merge < len(whole) and split != merge and len(whole) == len(cut)):
        return "a view of axes the shapes do not have"
    inner = whole[split] // factor
    others = all(w == c for d, (w, c) in enumerate(zip(whole, cut)) if d not in (split, merge))
    if whole[split] % factor or cut[merge] != whole[merge] * factor or cut[split] < inner or not others:
        return f"a view that does not turn {list(source_shape)} into {list(result_shape)}"
    source = list(axes)
    outer = reading == OUTER
    if reverse:  # result split index k = f * inner + c (outer) or c * factor + f (inner)
        source[split] = axes[split] % inner if outer else axes[split] // factor
        part = axes[split] // inner if outer else axes[split] % factor
        source[merge] = part * result_shape[merge] + axes[merge]
    else:  # result merge index m = f * S[merge] + m0; a result index c >= inner along split is padding
        source[merge] = axes[merge] % source_shape[merge]
        part = axes[merge] // source_shape[merge]
        flat = part * inner + axes[split] if outer else axes[split] * factor + part
        source[split] = np.where(axes[split] < inner, flat, source_shape[split])
    return tuple(source)


def axis_factor_view(operation: Operation) -> tuple[int, int, int, bool] | None:
    """(split_axis, merge_axis, factor, reversed) of a `Copy`'s `Some(AxisFactorView { .. })`, or None."""
    view = operation.copy_view
    if not (isinstance(view, Call) and view.name == "Some" and len(view.args) == 1):
        return None
    fields = view.args[0]
    if not (isinstance(fields, Struct) and fields.name == "AxisFactorView"):
        return None
    try:
        split, merge, factor = (as_int(fields.get(k), k) for k in ("split_axis", "merge_axis", "factor"))
        reverse = as_name(fields.get("reversed"), "reversed")
    except (KeyError, SyntaxProblem):
        return None
    return (split, merge, factor, reverse == "true") if factor > 0 and reverse in ("true", "false") else None


@dataclass(frozen=True)
class FlatTerm:
    """The term of a `Linear` tiling whose tensor runs through `dimensions` of the common index space in its own
    row-major order: the tile changes every `extent` elements of that order, so it is counted per run."""

    dimensions: tuple[int, ...]
    extent: int
    stride: int

    def __neg__(self) -> FlatTerm:
        return replace(self, stride=-self.stride)

    def array(self, shape: tuple[int, ...]) -> np.ndarray:
        """The term at every element of `shape` (where its group cannot be counted per run)."""
        spanned = tuple(n if d in self.dimensions else 1 for d, n in enumerate(shape))
        return np.arange(prod(spanned), dtype=np.int64).reshape(spanned) // self.extent * self.stride


Term = np.ndarray | FlatTerm


@dataclass(frozen=True)
class Tiled:
    """Where one side of a step holds each element of the common index space."""

    terms: tuple[Term, ...]
    """Summed, the tile of the element's shard in the first replica."""
    replicas: np.ndarray
    """The tile offset of every replica."""


def tiled(shape: tuple[int, ...], layout: Layout, coordinates: Coordinates) -> Tiled:
    """The tile terms of `layout` at `coordinates` (elements of a tensor of `shape`).

    An axis tiling adds one term per split dimension; a `Linear` tiling cuts the row-major flattened
    index, so its one term couples every dimension (a `FlatTerm` when that index is the common one's).
    """
    place = placement(shape, layout)
    if place is None:  # Linear: the flattened tensor is its one dimension
        place = placement((prod(shape),), flattened(layout))
        extent, parts, stride = place.dimensions[0]
        dimensions = in_order(shape, coordinates)
        if dimensions is not None:
            return Tiled((FlatTerm(dimensions, extent, stride),) if parts > 1 else (), replica_offsets(place))
        strides = np.cumprod((1, *shape[:0:-1]))[::-1]
        coordinates = (np.asarray(sum(c * int(s) for c, s in zip(coordinates, strides))),)
    terms = tuple(c // extent * stride
                  for c, (extent, parts, stride) in zip(coordinates, place.dimensions) if parts > 1)
    return Tiled(terms, replica_offsets(place))


def in_order(shape: tuple[int, ...], coordinates: Coordinates) -> tuple[int, ...] | None:
    """The common dimensions that `coordinates` run through whole, in the tensor's own order, or None (offsets,
    crops, views: the tensor's flattened index is not the common space's)."""
    found: list[int] = []
    for coordinate, size in zip(coordinates, shape):
        along = [d for d, n in enumerate(coordinate.shape) if n > 1]
        if not along:
            if size != 1 or int(coordinate.flat[0]) != 0:
                return None
            continue
        if len(along) != 1 or (found and along[0] <= found[-1]) or coordinate.size != size:
            return None
        if not np.array_equal(coordinate.ravel(), np.arange(size)):
            return None
        found.append(along[0])
    return tuple(found)


@lru_cache(maxsize=4096)
def flattened(layout: Layout) -> Layout:
    """A `Linear` layout as the tiling of dimension 0 of the flattened tensor, so that `placement` places it."""
    return replace(layout, axes=tuple(replace(axis, axis=Axis("FromStart", 0)) for axis in layout.axes))


@lru_cache(maxsize=4096)
def replica_offsets(place: Placement) -> np.ndarray:
    """Tile offsets of the replicas: each at the first offset where the shards' tiles meet no earlier replica.

    When the shards fill tiles 0..span-1, that is every `span` tiles (as `ipuplan.facts.exchange_proxy` places
    them); when strides leave gaps, replicas fill the gaps first (16 x 8 shards at tiles h + 176 m,
    11 replicas: offsets 0, 16, .., 160), so that they stay within the layout's `tile_count`.
    """
    span = 1 + sum((parts - 1) * stride for _, parts, stride in place.dimensions)
    if max(span, prod(parts for _, parts, _ in place.dimensions)) * place.replicas > MAX_TILES:
        raise TooLarge(f"a placement over more than {MAX_TILES:,} tiles")
    pattern = np.zeros(1, dtype=np.int64)
    for _, parts, stride in place.dimensions:
        pattern = np.add.outer(pattern, np.arange(parts, dtype=np.int64) * stride).ravel()
    if len(sorted_unique(pattern)) == span:
        offsets = np.arange(place.replicas, dtype=np.int64) * span
    else:
        occupied, chosen = np.zeros(place.replicas * span + span, dtype=bool), []
        for offset in range(place.replicas * span):
            if not occupied[pattern + offset].any():
                occupied[pattern + offset] = True
                chosen.append(offset)
                if len(chosen) == place.replicas:
                    break
        offsets = np.array(chosen, dtype=np.int64)
    offsets.flags.writeable = False
    return offsets


def counts_at(shape: tuple[int, ...], terms: tuple[Term, ...], present: tuple[np.ndarray, ...],
              keys: np.ndarray) -> tuple[int, int]:
    """The elements of `shape` (those outside a `present` mask not counted), and the sum over `keys` of how many are
    at that distance (the sum of `terms`: receiving tile less sending tile).

    Dimensions that a term or mask couples are enumerated together (`group_counts`); the groups but the one with the
    most distances are combined per distance, and that one is looked up at each key less each of their distances
    (exact: every term is a function of its group alone): a step needs a few distances, not all of them
    (a Convert of 729 x 1152 elements between two 2-axis tilings: 200k combined distances, one key)."""
    histograms = []
    for group in coupled_dimensions(len(shape), terms + present):
        members = tuple(t for t in terms if varying(t) <= group)
        masks = tuple(m for m in present if varying(m) <= group)
        histograms.append(group_counts(shape, group, members, masks))
    elements = prod(int(counts.sum()) for _, counts in histograms)
    if not elements:  # every element outside a crop: nothing sent, nothing to look up
        return 0, 0
    widest = max(range(len(histograms)), key=lambda k: len(histograms[k][0]))
    distances, counts = np.zeros(1, dtype=np.int64), np.ones(1, dtype=np.int64)
    for k, (group_distances, group_elements) in enumerate(histograms):
        if k != widest:
            distances, counts = _per_distance(np.add.outer(distances, group_distances).ravel(),
                                              np.multiply.outer(counts, group_elements).ravel())
    return elements, _looked_up(distances, counts, *_summed(*histograms[widest]), keys)


def _summed(distances: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each distance once, ascending, with its counts summed."""
    order = np.argsort(distances, kind="stable")
    ordered = distances[order]
    starts = np.flatnonzero(np.append(True, ordered[1:] != ordered[:-1]))
    return ordered[starts], np.add.reduceat(counts[order], starts) if len(starts) else counts[:0]


LOOKUPS = 1 << 22
"""Lookups `_looked_up` makes at once at most."""


def _looked_up(distances: np.ndarray, counts: np.ndarray, other: np.ndarray, other_counts: np.ndarray,
               keys: np.ndarray) -> int:
    """The sum over `keys` of the pairs of a distance of each list whose sum is that key, each pair counted as the
    product of its counts (`other`: ascending, each once)."""
    found = 0
    step = max(1, LOOKUPS // max(len(distances), 1))
    for at in range(0, len(keys), step):
        wanted = keys[at:at + step, None] - distances[None, :]
        slots = np.minimum(np.searchsorted(other, wanted), len(other) - 1)
        hit = other[slots] == wanted
        found += int((counts[None, :] * other_counts[slots] * hit).sum())
    return found


def local_distances(sending: np.ndarray, receiving: np.ndarray) -> np.ndarray:
    """The distances at which an element is already on its tile, once per (sending, receiving) pair of replicas: a
    receiving replica r of an element at distance d is local when d + receiving[r] is a sending replica's offset
    (replica offsets are distinct)."""
    return (sending[None, :] - receiving[:, None]).ravel()


def group_counts(shape: tuple[int, ...], group: frozenset[int], terms: tuple[Term, ...],
                 present: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Per distance, the elements of one group: per run where a flat term allows it, else per element."""
    dimensions = tuple(d for d in sorted(group) if d >= 0 and shape[d] > 1)
    flat = [t for t in terms if isinstance(t, FlatTerm)]
    others = [t for t in terms if not isinstance(t, FlatTerm)] + list(present)
    if flat and all(t.dimensions == dimensions for t in flat) and all(len(varying(t) - {-1}) <= 1 for t in others):
        return run_counts(shape, dimensions, terms, present)
    group_shape = tuple(n if d in group else 1 for d, n in enumerate(shape))
    if prod(group_shape) > MAX_ENUMERATED:
        raise TooLarge(f"more than {MAX_ENUMERATED:,} elements coupled by a flat layout or a view")
    distance = np.zeros(group_shape, dtype=np.int64)
    for term in terms:
        distance = distance + (term.array(shape) if isinstance(term, FlatTerm) else term)
    if present:  # masks are 0 or 1: the elements outside one are left out, not counted as 0
        distance = distance[np.logical_and.reduce([np.broadcast_to(mask, group_shape) for mask in present])]
    return _elements_per_distance(distance.ravel())


def _elements_per_distance(distances: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each distance of `distances` (an element each) with the elements at it (`_per_distance` of ones, counted in
    integers: half its time on a view's 840k elements)."""
    if not len(distances):
        return distances, np.zeros(0, dtype=np.int64)
    lowest = int(distances.min())
    totals = np.bincount(distances - lowest)
    present = np.flatnonzero(totals)
    return present + lowest, totals[present]


def run_counts(shape: tuple[int, ...], dimensions: tuple[int, ...], terms: tuple[Term, ...],
               present: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Per distance, the elements of a group with flat terms, run by run: in the group's row-major order every term
    is constant between cuts where a flat shard ends or a one-dimension term or mask changes value."""
    sizes = [shape[d] for d in dimensions]
    total = prod(sizes)
    inner = {d: prod(sizes[i + 1:]) for i, d in enumerate(dimensions)}
    flat = [t for t in terms if isinstance(t, FlatTerm)]
    along = [(array, min(varying(array))) for array in terms if not isinstance(array, FlatTerm)]
    masks = [(mask, min(varying(mask))) for mask in present]
    changes = {id(array): np.flatnonzero(np.diff(array.ravel())) + 1 for array, d in along + masks if d >= 0}
    runs = sum(total // t.extent for t in flat) + sum(
        total // (shape[d] * inner[d]) * (len(changes[id(a)]) + 1) for a, d in along + masks if d >= 0)
    if runs > MAX_ENUMERATED:
        raise TooLarge(f"more than {MAX_ENUMERATED:,} runs of a flat layout")
    cuts = [np.zeros(1, dtype=np.int64)] + [np.arange(0, total, t.extent) for t in flat]
    for array, d in along + masks:
        if d >= 0:
            cuts.append(np.add.outer(np.arange(0, total, shape[d] * inner[d]),
                                     np.append(0, changes[id(array)]) * inner[d]).ravel())
    starts = sorted_unique(np.concatenate(cuts))

    def at_starts(array: np.ndarray, d: int) -> np.ndarray:
        return array.ravel()[starts // inner[d] % shape[d]] if d >= 0 else array.ravel()[0]

    distance = sum((starts // t.extent * t.stride for t in flat), np.zeros(len(starts), dtype=np.int64))
    distance = sum((at_starts(array, d) for array, d in along), distance)
    count = np.diff(np.append(starts, total))
    for mask, d in masks:
        count = count * at_starts(mask, d)
    return _per_distance(distance, count)


def sorted_unique(numbers: np.ndarray) -> np.ndarray:
    """The distinct numbers in increasing order: `np.unique` by a sort (numpy 2.4's hashing `np.unique` took a
    second on the optimised reference plan's flat layouts). A stable sort, since the cuts of `run_counts` are a few
    sorted runs one after another, which it merges (a tenth of quicksort's time on a million cuts).

    >>> sorted_unique(np.array([5, 0, 5, 2])).tolist()
    [0, 2, 5]
    """
    ordered = np.sort(numbers, kind="stable")
    return ordered[np.append(True, ordered[1:] != ordered[:-1])]


def coupled_dimensions(rank: int, terms: tuple[Term, ...]) -> list[frozenset[int]]:
    """The dimensions in groups such that every term varies along one group only (a constant joins the first)."""
    parent = list(range(rank))

    def find(d: int) -> int:
        while parent[d] != d:
            d = parent[d]
        return d

    for term in terms:
        dimensions = sorted(varying(term))
        for d in dimensions[1:]:
            parent[find(d)] = find(dimensions[0])
    groups: dict[int, set[int]] = {}
    for d in range(rank):
        groups.setdefault(find(d), set()).add(d)
    found = [frozenset(g) for g in groups.values()] or [frozenset()]
    return [found[0] | {-1}, *found[1:]]


def varying(term: Term) -> frozenset[int]:
    """The dimensions along which `term` varies (-1 stands for none: a constant belongs to the first group)."""
    dimensions = term.dimensions if isinstance(term, FlatTerm) else (d for d, n in enumerate(term.shape) if n > 1)
    return frozenset(dimensions) or frozenset({-1})

"""A step's exchange for many layout pairs at once (`facts.pair_exchange.pair_bytes`) against the definition's
own count of each pair (`plan_exchange.step_bytes`, itself checked element by element in test_plan_exchange)."""

from __future__ import annotations

import random
from dataclasses import replace
from itertools import product
from math import prod

import numpy as np
import pytest
from test_plan_exchange import REDUCE, RETILE, WHOLE_COPY, _layout, _slice, _view

from ipuplan.facts import pair_exchange
from ipuplan.facts.exchange_proxy import Placement
from ipuplan.facts.pair_exchange import matched_bytes, meeting_of, pair_bytes, run_boxes
from ipuplan.facts.plan_exchange import INNER, OUTER, TooLarge, replica_offsets, step_bytes
from ipuplan.plan.layout import INTERLEAVED
from ipuplan.plan.operation import parse_operation


def _random_layout(rng: random.Random, shape: tuple[int, ...], flat_share: float = 0.25):
    """An axis tiling of some dimensions (or a flat one), blocks and partitions that fit, strides placed or left to
    the compiler, 1-3 replicas."""
    replicas = rng.choice((1, 1, 2, 3))
    if rng.random() < flat_share:
        return _layout([("Linear", rng.choice((1, 2, 3, 5)), rng.choice((1, 2, 4)), None)], replicas)
    dimensions = rng.sample(range(len(shape)), rng.randint(1, len(shape)))
    axes, radix = [], 1
    for d in dimensions:
        parts, block = rng.choice((1, 2, 3, 4)), rng.choice((1, 2, 3))
        placed = rng.random() < 0.6
        axes.append((d, parts, block, radix if placed else None))
        radix *= parts if placed else 1
    return _layout(axes, replicas)


def _every_pair(operation: str, source_shape, result_shape, sources, results) -> tuple[np.ndarray, np.ndarray]:
    parsed = parse_operation(operation)
    fast = pair_bytes(parsed, source_shape, result_shape, 2, tuple(sources), tuple(results))
    slow = np.array([[0 if isinstance(b := step_bytes(parsed, source_shape, result_shape, 2, s, r), str) else b
                      for r in results] for s in sources])
    return fast, slow


STEPS = [
    (RETILE, (6, 10), (6, 10)),
    (WHOLE_COPY, (2, 5, 12), (2, 5, 12)),
    (WHOLE_COPY, (6, 12), (6, 10)),  # a crop: the source's last two columns are dropped
    (WHOLE_COPY, (6, 10), (6, 12)),  # a pad: the result's last two columns are padding
    (_slice((1, 2)), (7, 12), (6, 10)),
    (REDUCE, (3, 6, 10), (6, 10)),
    (_view(False, 2), (1, 6, 8), (2, 6, 4)),  # a head split: each source box one piece per factor
    (_view(False, 2), (1, 6, 8), (2, 6, 6)),  # the result pads the cut axis: the padding is never sent
    (_view(True, 2), (2, 6, 4), (1, 6, 8)),  # heads merged back
    (_view(True, 2), (4, 6, 5), (2, 6, 8)),  # the source pads its cut axis (dropped), the merge axis longer than 1
    (_view(False, 3), (2, 3, 6), (6, 3, 2)),
    # boxes over several heads, cut inside a head at either end: a run of whole heads is one piece
    (_view(False, 4), (1, 3, 20), (4, 3, 5)),
    (_view(True, 4), (4, 3, 5), (1, 3, 20)),
    (_view(False, 4), (2, 3, 12), (8, 3, 3)),
    (_view(True, 4), (8, 3, 3), (2, 3, 12)),
]


@pytest.mark.parametrize("operation, source_shape, result_shape", STEPS)
def test_every_pair_is_the_definitions_count(operation, source_shape, result_shape):
    rng = random.Random(f"{operation} {source_shape}")  # a str seed: the same in every process
    sources = [_random_layout(rng, source_shape) for _ in range(14)]
    results = [_random_layout(rng, result_shape) for _ in range(14)]
    fast, slow = _every_pair(operation, source_shape, result_shape, sources, results)
    assert fast.tolist() == slow.tolist()
    assert slow.any()


VIEWS = [step for step in STEPS if "AxisFactorView" in step[0]]


@pytest.mark.parametrize("operation, source_shape, result_shape", VIEWS)
def test_every_pair_read_inner_is_the_definitions_count(operation, source_shape, result_shape):
    """A view read with the factor inner (docs/EXCHANGE.md: the format does not say which) is priced in closed form
    too, a reversed one in the source's coordinates."""
    rng = random.Random(f"{operation} {source_shape} inner")  # a str seed: the same in every process
    sources = [_random_layout(rng, source_shape) for _ in range(14)]
    results = [_random_layout(rng, result_shape) for _ in range(14)]
    parsed = parse_operation(operation)
    assert meeting_of(parsed, source_shape, result_shape, INNER) is not None
    fast = pair_bytes(parsed, source_shape, result_shape, 2, tuple(sources), tuple(results), INNER)
    slow = [[step_bytes(parsed, source_shape, result_shape, 2, s, r, INNER) for r in results] for s in sources]
    assert fast.tolist() == slow
    outer = pair_bytes(parsed, source_shape, result_shape, 2, tuple(sources), tuple(results))
    assert (fast != outer).any()


def test_boxes_within_one_head_or_over_several_are_priced_exactly():
    """Through a view, a box is at most three pieces where it spans the other coupled axis whole (a part of its first
    head, its whole heads, a part of its last): a box inside one head, cut at both ends, is one of them."""
    cases = [(_view(False, 2), (1, 3, 20), (2, 3, 10), [(2, 7, 1, 1)], [(2, 3, 1, 1), (0, 2, 1, None)]),
             (_view(True, 4), (12, 3, 5), (3, 3, 20), [(0, 12, 1, 1)], [(2, 6, 1, 1), (2, 3, 2, 3)])]
    rng = random.Random("within one head")
    for operation, source_shape, result_shape, source_axes, more_axes in cases:
        sources = [_layout(source_axes), _layout([*source_axes[:1], (1, 3, 1, 12)]), _layout([(2, 2, 1, 1)])]
        results = [_layout([axes]) for axes in more_axes] + [_random_layout(rng, result_shape) for _ in range(6)]
        fast, slow = _every_pair(operation, source_shape, result_shape, sources, results)
        assert fast.tolist() == slow.tolist(), operation


def test_pieces_read_a_chunk_at_a_time_are_summed_per_side(monkeypatch):
    """A side's pieces read a chunk at a time (a chunk may end inside them): the same bytes as in one pass."""
    operation, source_shape, result_shape = STEPS[1]
    rng = random.Random("chunks")
    sources = tuple(_random_layout(rng, source_shape) for _ in range(9))
    results = tuple(_random_layout(rng, result_shape) for _ in range(9))
    parsed = parse_operation(operation)
    whole = pair_bytes(parsed, source_shape, result_shape, 2, sources, results)
    pair_exchange._distinct_pair_bytes.cache_clear()
    monkeypatch.setattr(pair_exchange, "CHUNK", 400)
    try:
        chunked = pair_bytes(parsed, source_shape, result_shape, 2, sources, results)
    finally:
        pair_exchange._distinct_pair_bytes.cache_clear()
    assert chunked.tolist() == whole.tolist()
    assert whole.any()


@pytest.mark.parametrize("operation, source_shape, result_shape", [STEPS[1], STEPS[5], STEPS[6], STEPS[9]])
def test_matched_pairs_are_every_pairs_diagonal(operation, source_shape, result_shape):
    """A step within one group prices each candidate's own two sides: the diagonal of every pair, read either way,
    layouts that place alike (here: repeated) priced once."""
    rng = random.Random(f"{operation} {source_shape} matched")
    sources = [_random_layout(rng, source_shape) for _ in range(10)]
    results = [_random_layout(rng, result_shape) for _ in range(10)]
    sources, results = tuple(sources + sources[:3]), tuple(results + results[:3])
    parsed = parse_operation(operation)
    for reading in (OUTER, INNER) if "AxisFactorView" in operation else (OUTER,):
        every = pair_bytes(parsed, source_shape, result_shape, 2, sources, results, reading)
        matched = matched_bytes(parsed, source_shape, result_shape, 2, sources, results, reading)
        assert matched.tolist() == np.diagonal(every).tolist()
        assert matched.any()


def test_the_closed_form_covers_movers_slices_reductions_and_views_not_other_moves():
    assert all(meeting_of(parse_operation(op), s, r) is not None for op, s, r in STEPS)
    assert meeting_of(parse_operation(WHOLE_COPY), (6, 10), (60,)) is None  # between ranks without a view
    assert meeting_of(parse_operation(_view(False, 2)), (1, 6, 8), (2, 6, 3)) is None  # not a head split


def test_layouts_that_place_alike_are_priced_once():
    """The memory class and the order do not move an element: such layouts get the same bytes."""
    rows = _layout([(0, 3, 2, 1)])
    interleaved = replace(rows, memory_class=INTERLEAVED)
    flat = _layout([("Linear", 4, 2, None)], replicas=2)
    fast, slow = _every_pair(RETILE, (6, 10), (6, 10), [rows, interleaved, flat], [flat, interleaved, rows])
    assert fast.tolist() == slow.tolist()
    assert fast[0].tolist() == fast[1].tolist()


def test_a_run_is_cut_into_boxes():
    tiles, low, high = run_boxes((2, 3, 4), np.array([5, 6]), np.array([3, 0]), np.array([21, 24]))
    covered = {(t, i, j, k) for t, lo, hi in zip(tiles.tolist(), low.tolist(), high.tolist())
               for i in range(lo[0], hi[0]) for j in range(lo[1], hi[1]) for k in range(lo[2], hi[2])}
    expected = {(t, f // 12, f // 4 % 3, f % 4) for t, a, b in ((5, 3, 21), (6, 0, 24)) for f in range(a, b)}
    assert covered == expected
    assert len(tiles) <= 2 * (2 * 3 - 1)


def test_replicas_and_flat_layouts_meet_exactly():
    """The cases the optimiser leans on: a flat result served to every replica, a flat source of a cropped tensor."""
    rows_on_3 = _layout([(0, 3, 2, 1)], replicas=2)
    flat_on_4 = _layout([("Linear", 4, 2, None)], replicas=3)
    whole_on_1 = _layout([(1, 1, 12, None)], replicas=4)
    for operation, source_shape, result_shape in STEPS[:5]:
        layouts = [rows_on_3, flat_on_4, whole_on_1] if result_shape[0] % 2 == 0 else [flat_on_4, whole_on_1]
        fast, slow = _every_pair(operation, source_shape, result_shape, layouts, layouts)
        assert fast.tolist() == slow.tolist(), operation


def test_the_reference_plans_candidate_pairs_are_the_definitions_count(facts, spaces):
    """Per priced step of the reference plan (scope `full`), sampled pairs of its sides' candidate layouts (views,
    crops, flat layouts, Gemm partials of every pK) against `step_bytes`."""
    plan, space = facts.plan, spaces["full"]
    where = {m: (g, p) for g, group in enumerate(space.free) for p, m in enumerate(group.members)}
    rng = random.Random(24)

    def sides(value_id):
        value = plan.values[value_id]
        if value_id not in where:
            return [(tuple(value.shape), value.parsed_layout)]
        g, p = where[value_id]
        return [(tuple(c.shapes[p]) if c.shapes else tuple(value.shape), c.layouts[p])
                for c in space.free[g].candidates]

    checked = 0
    for step in facts.flow.steps:
        operation = plan.steps[step.index].parsed_operation
        if not (operation.is_mover or operation.kind == "Sum") or len(step.reads) != 1 or len(step.writes) != 1:
            continue
        sources, results = sides(step.reads[0]), sides(step.writes[0])
        for (source_shape, source), (result_shape, result) in zip(rng.choices(sources, k=3), rng.choices(results, k=3)):
            size = plan.values[step.reads[0]].element_size
            fast = pair_bytes(operation, source_shape, result_shape, size, (source,), (result,))
            assert (int(fast[0, 0])
                    == step_bytes(operation, source_shape, result_shape, size, source, result)), step.index
            checked += 1
    assert checked > 150


def test_one_element_tensors_are_held_only_where_a_side_has_them():
    """A tensor of one element: its pieces keep a dimension, so that a tile where the other side has no piece holds
    none of it (with none left, an empty slot counted one element held: -2 bytes)."""
    whole = _layout([(0, 1, 1, None)])
    sources = [whole, _layout([(0, 1, 1, None)], replicas=3), _layout([("Linear", 1, 1, None)], replicas=2)]
    results = [_layout([(0, 1, 1, None)], replicas=2), _layout([(0, 1, 1, None)], replicas=5), whole]
    fast, slow = _every_pair(RETILE, (1, 1), (1, 1), sources, results)
    assert fast.tolist() == slow.tolist()
    assert (fast >= 0).all() and fast.any()


def _naive_held(sources, results) -> np.ndarray:
    """`held_pairs` by its definition, piece by piece."""
    held = np.zeros((len(sources), len(results)), dtype=np.int64)
    for i, s in enumerate(sources):
        for j, r in enumerate(results):
            for t, lo, hi, w in zip(s.tiles.tolist(), s.low.T.tolist(), s.high.T.tolist(), s.weight.tolist()):
                for u, rlo, rhi in zip(r.tiles.tolist(), r.low.T.tolist(), r.high.T.tolist()):
                    if t == u:
                        held[i, j] += w * prod(max(0, min(a, b) - max(c, d)) for a, b, c, d in zip(hi, rhi, lo, rlo))
    return held


def _random_pieces(rng: np.random.Generator, rank: int, crowded: bool, extent: int, partials: int):
    """Boxes about `extent` wide on 6 tiles: one at most on a tile, or up to 5."""
    count = int(rng.integers(1, 6))
    tiles = rng.integers(0, 6, count) if crowded else rng.permutation(6)[:count]
    low = rng.integers(0, extent, (rank, count))
    return pair_exchange.Pieces(tiles, low, low + rng.integers(1, 2 * extent, (rank, count)),
                                rng.integers(1, partials + 1, count))


@pytest.mark.parametrize("extent", [3, 1 << 16])
def test_held_pairs_of_sides_crowded_unlike_is_their_definition(extent):
    """Sides with one piece on a tile and sides with several, weighted by partials, laid out either way (fewer
    sources than results and the reverse); pieces of 2 ** 32 elements counted in 64 bits."""
    rng = np.random.default_rng(7)
    found = []
    for rank, few, many in ((1, 2, 9), (2, 3, 7), (3, 1, 6)):
        sides = [[_random_pieces(rng, rank, bool(rng.integers(0, 2)), extent, partials) for _ in range(count)]
                 for count, partials in ((few, 3), (many, 1))]
        for sources, results in (sides, sides[::-1]):
            found.append(pair_exchange.held_pairs(sources, results))
            assert found[-1].tolist() == _naive_held(sources, results).tolist()
    assert all(held.any() for held in found)
    assert max(held.max() for held in found) > (1 << 32 if extent > 3 else 0)


def test_runs_of_every_rank_are_cut_into_boxes_that_cover_them_once():
    rng = np.random.default_rng(3)
    for shape in ((7,), (3, 5), (2, 3, 4), (2, 1, 3, 5)):
        size = prod(shape)
        start = rng.integers(0, size, 40)
        stop = np.minimum(start + rng.integers(0, size, 40), size)
        tiles, low, high = run_boxes(shape, np.arange(40), start, stop)
        covered = [(t, *i) for t, lo, hi in zip(tiles.tolist(), low.tolist(), high.tolist())
                   for i in product(*(range(a, b) for a, b in zip(lo, hi)))]
        expected = [(t, *np.unravel_index(f, shape)) for t, (a, b) in enumerate(zip(start, stop)) for f in range(a, b)]
        assert sorted(covered) == sorted((t, *map(int, i)) for t, *i in expected)
        assert np.bincount(tiles, minlength=40).max() <= 2 * len(shape) - 1


def test_a_lone_replica_is_placed_as_replica_offsets_places_it():
    rng = random.Random(5)
    for _ in range(2000):
        dimensions = tuple((rng.randint(1, 9), rng.choice((1, 2, 3, 300, 5000)), rng.choice((1, 2, 7, 64, 40000)))
                           for _ in range(rng.randint(1, 3)))
        place = Placement(dimensions, 1, 1)
        try:
            expected = replica_offsets(place).tolist()
        except TooLarge:
            expected = None
        found = pair_exchange._replicas(place)
        assert (None if found is None else found.tolist()) == expected, dimensions

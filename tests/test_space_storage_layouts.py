"""Freedom level `storage` (space/levels/storage.py, storage_layouts.py): partitions and strides by hand, and its
layouts on the reference plan."""

from __future__ import annotations

from itertools import product

import pytest

from ipuplan.facts.check import placement_problem
from ipuplan.facts.estimate import shard_bytes
from ipuplan.plan.layout import INTERLEAVED, STANDARD, parse_layout
from ipuplan.space.levels.storage import retiled_options
from ipuplan.space.levels.storage_layouts import partition_options, partition_vectors, placed_strides


def axis(dimension: int, partitions: int, stride: int | None, block: int = 1) -> str:
    placed = "None" if stride is None else f"Some({stride})"
    return (
        f"AxisTiling {{ axis: FromStart({dimension}), partitions: {partitions}, padding_groups: 1, "
        f"block_size: {block}, padding_multiple: {block}, shard_padding_multiple: 1, padding: Zero, "
        f"tile_stride: {placed} }}"
    )


def layout(*axes: str, tiles: int, memory_class: str = STANDARD):
    text = (
        f"Layout {{ order: RowMajor, tiling: TensorTiling {{ tile_count: {tiles}, replicas: 1, "
        f"axes: [{', '.join(axes)}] }}, "
        f"memory_class: {memory_class} }}"
    )
    return parse_layout(text)


# a 4 x 6 tensor cut 2 x 2 over 4 tiles, the second axis fastest (stride 1)
GRID = layout(axis(0, 2, 2), axis(1, 2, 1), tiles=4)


@pytest.mark.parametrize(
    "blocks, expected",
    [
        (1, [1]),
        (6, [1, 2, 3, 6]),  # 6, 3, 2, 1 blocks per shard; 4 and 5 cannot be reached
        (7, [1, 2, 3, 4, 7]),  # 7, 4, 3, 2, 1 blocks per shard
        (10, [1, 2, 3, 4, 5, 10]),
    ],
)
def test_partition_options_are_the_fewest_shards_per_shard_size(blocks, expected):
    assert partition_options(blocks) == expected


def test_partition_vectors_one_per_shard_size_fewest_tiles_first():
    # axis 0: 4 blocks -> 1, 2, 4 shards; axis 1: 6 blocks -> 1, 2, 3, 6 shards.
    # shard elements 24 (1 tile), 12 (1x2: 2 tiles), 8 (1x3: 3), 6 (2x2: 4), 4 (1x6: 6), 3 (4x2: 8);
    # 2 elements would need 12 tiles.
    assert partition_vectors((4, 6), GRID, 8) == [(1, 1), (1, 2), (1, 3), (2, 2), (1, 6), (4, 2)]
    assert partition_vectors((4, 6), GRID, 4) == [(1, 1), (1, 2), (1, 3), (2, 2)]


def test_partition_vectors_count_whole_blocks():
    # 10 elements in blocks of 2: 5 blocks -> 1, 2, 3, 5 shards (5, 3, 2, 1 blocks each)
    line = layout(axis(0, 1, None, block=2), tiles=1)
    assert partition_vectors((10,), line, 16) == [(1,), (2,), (3,), (5,)]


@pytest.mark.parametrize("partitions, expected", [((2, 3), (3, 1)), ((4, 2), (2, 1)), ((1, 5), (5, 1))])
def test_placed_strides_are_mixed_radix_in_the_input_stride_order(partitions, expected):
    strides = placed_strides(GRID, partitions)
    assert strides == expected
    offsets = {i * strides[0] + j * strides[1] for i, j in product(range(partitions[0]), range(partitions[1]))}
    assert offsets == set(range(partitions[0] * partitions[1]))  # distinct tiles, none beyond the last
    assert placement_problem(GRID.with_tiling(partitions, strides, 1), 16) is None


def test_placed_strides_leave_unplaced_axes_unplaced():
    three = layout(axis(0, 2, 1), axis(1, 1, None), axis(2, 2, 2), tiles=4)
    assert placed_strides(three, (3, 2, 4)) == (1, None, 3)


def test_layout_options_on_a_small_grid():
    # the input shard is 2 x 3 elements; smaller or equal: 2x2 (6), 1x6 (4, as large as the flat layout over 6
    # tiles), 4x2 (3), in each class, less the input itself (2x2 standard)
    options = retiled_options(GRID, (4, 6), 2, 8)
    shards = [(o.memory_class, tuple(a.partitions for a in o.axes)) for o in options]
    assert shards == [
        (STANDARD, (4, 2)), (STANDARD, (1, 6)),
        (INTERLEAVED, (4, 2)), (INTERLEAVED, (1, 6)), (INTERLEAVED, (2, 2)),
    ]
    assert all(placement_problem(o, 8) is None for o in options)


def test_layout_options_never_the_input_never_larger(facts):
    tiles = facts.plan.tile_count
    for value in facts.plan.values:
        original = shard_bytes(value.shape, value.element_size, value.parsed_layout)
        for option in retiled_options(value.parsed_layout, tuple(value.shape), value.element_size, tiles):
            assert option != value.parsed_layout, value.id
            assert shard_bytes(value.shape, value.element_size, option) <= original, value.id


def test_the_cap_on_sizes_keeps_the_smallest_shard_of_each_class(facts, spaces, monkeypatch):
    """MAX_CANDIDATES_PER_CLASS loses nothing for the peak or the budgets: a storage group's bytes at every step
    grow with its shard, and the smallest shard of each class over every size the level allows is kept."""
    from ipuplan.space.levels import storage, storage_layouts

    values, tiles = facts.plan.values, facts.plan.tile_count
    groups = [g for g in spaces["storage"].free if g.kind == "storage"]

    def least(options, value):
        found = {}
        for option in (value.parsed_layout, *options):
            size = shard_bytes(value.shape, value.element_size, option)
            found[option.memory_class] = min(found.get(option.memory_class, size), size)
        return found

    capped = {g.members[0]: retiled_options(values[g.members[0]].parsed_layout, tuple(values[g.members[0]].shape),
                                            values[g.members[0]].element_size, tiles) for g in groups}
    monkeypatch.setattr(storage_layouts, "MAX_CANDIDATES_PER_CLASS", 10**9)
    uncapped_options = storage.retiled_options.__wrapped__
    cut = 0
    for member, options in capped.items():
        value = values[member]
        every = uncapped_options(value.parsed_layout, tuple(value.shape), value.element_size, tiles)
        cut += len(every) - len(options)
        assert least(options, value) == least(every, value), member
    assert cut > 0  # the cap does cut on the reference plan

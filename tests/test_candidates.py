"""The candidate space: partitions and strides by hand, and the free/frozen split of the reference plan."""

from __future__ import annotations

from collections import Counter
from itertools import product

import pytest
from reference import with_step

from ipuplan.errors import IpuplanError
from ipuplan.facts.check import placement_problem
from ipuplan.facts.estimate import shard_bytes
from ipuplan.facts.plan_facts import plan_facts
from ipuplan.plan.layout import INTERLEAVED, STANDARD, parse_layout
from ipuplan.space.levels.storage import layout_options, partition_options, partition_vectors, placed_strides
from ipuplan.space.scopes import UnknownScope, candidate_space
from ipuplan.space.types import Freeze, FreezeReason


def axis(dimension: int, partitions: int, stride: int | None, block: int = 1) -> str:
    placed = "None" if stride is None else f"Some({stride})"
    return (
        f"AxisTiling {{ axis: FromStart({dimension}), partitions: {partitions}, padding_groups: 1, block_size: {block}, "
        f"padding_multiple: {block}, shard_padding_multiple: 1, padding: Zero, tile_stride: {placed} }}"
    )


def layout(*axes: str, tiles: int, memory_class: str = STANDARD):
    text = (
        f"Layout {{ order: RowMajor, tiling: TensorTiling {{ tile_count: {tiles}, replicas: 1, axes: [{', '.join(axes)}] }}, "
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
    # the input shard is 2 x 3 elements; smaller or equal: 2x2 (6), 1x6 (4), 4x2 (3), in each class,
    # less the input itself (2x2 standard)
    options = layout_options(GRID, (4, 6), 2, 8)
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
        for option in layout_options(value.parsed_layout, tuple(value.shape), value.element_size, tiles):
            assert option != value.parsed_layout, value.id
            assert shard_bytes(value.shape, value.element_size, option) <= original, value.id


def test_kernels_scope_adds_kernel_groups(spaces):
    assert {g.kind for g in spaces["storage"].free} == {"storage"}
    assert {g.kind for g in spaces["kernels"].free} == {"kernel", "storage"}
    assert spaces["kernels"].candidate_count > spaces["storage"].candidate_count


@pytest.mark.parametrize("scope", ["storage", "kernels"])
def test_input_candidate_reproduces_the_input(facts, spaces, scope):
    values = facts.plan.values
    for group in spaces[scope].free:
        chosen = group.candidates[group.input_index]
        assert chosen.layouts == tuple(values[m].parsed_layout for m in group.members)
        assert chosen.value_bytes == tuple(facts.estimate.values[m] for m in group.members)
        assert all(tuple(values[m].shape) == shape for m, shape in zip(group.members, chosen.shapes))
        assert all(facts.plan.steps[s].operation == text for s, text in chosen.operations)


@pytest.mark.parametrize("scope", ["storage", "kernels"])
def test_every_value_is_in_exactly_one_group(facts, spaces, scope):
    space = spaces[scope]
    counts = Counter(m for group in (*space.free, *space.frozen) for m in group.members)
    assert counts == Counter(range(len(facts.plan.values)))


@pytest.mark.parametrize("scope", ["storage", "kernels"])
def test_frozen_reasons_are_typed_and_their_labels_carry_no_numbers(spaces, scope):
    for group in spaces[scope].frozen:
        assert isinstance(group.reason, FreezeReason)
        assert isinstance(group.reason.kind, Freeze)
        assert not any(c.isdigit() for c in group.reason.group_label), group.reason.group_label


def test_unknown_scope_is_refused(facts):
    with pytest.raises(UnknownScope) as raised:
        candidate_space(facts, "everything")
    assert isinstance(raised.value, IpuplanError)
    assert "storage" in str(raised.value) and "kernels" in str(raised.value)


def test_an_unknown_operation_freezes_what_is_live_there(reference_plan, spaces):
    step = 19  # a Copy where 13 values of free storage groups are live
    free_before = {m for g in spaces["storage"].free for m in g.members} & set(reference_plan.steps[step].live)
    assert free_before
    mutated = with_step(reference_plan, step, operation="FancyFusedThing { lanes: 4 }")
    reasons = candidate_space(plan_facts(mutated), "storage").reasons()
    assert not [v for v in reference_plan.steps[step].live if reasons.get(v, "absent") is None]
    for value in free_before:
        reason = reasons[value]
        assert (reason.kind, reason.step, reason.operation) == (Freeze.UNKNOWN_OPERATION, step, "FancyFusedThing")


def test_stride_orders_are_legal_placements_and_cheaper_ones_become_candidates(reference_plan):
    from ipuplan.facts.check import placement_problem
    from ipuplan.space.strides import STRIDES_LABEL, radix_orders

    layout = reference_plan.values[8].parsed_layout  # N placed (stride 1), K left to the compiler
    variants = radix_orders(layout)
    assert variants and all(placement_problem(v, 1472) is None for v in variants)
    assert all(v.axes[1].tile_stride == 1 and v.axes[0].tile_stride == layout.axes[1].partitions for v in variants)
    space = candidate_space(plan_facts(reference_plan), "full")
    for group in space.free:
        for choice in (c for c in group.candidates if c.label == STRIDES_LABEL):
            twins = [c for c in group.candidates if c.label != STRIDES_LABEL and c.value_bytes == choice.value_bytes
                     and [a.partitions for a in c.layouts[0].axes] == [a.partitions for a in choice.layouts[0].axes]
                     and c.layouts[0].memory_class == choice.layouts[0].memory_class]
            assert twins and all(choice.exchange_bytes < twin.exchange_bytes for twin in twins)


def _front_one_at_a_time(vectors):
    """The Pareto front by its definition: in lexicographic order, keep what no kept vector is at most."""
    import numpy as np

    kept: list[int] = []
    for index in np.lexsort(vectors.T[::-1]):
        if not any((vectors[k] <= vectors[index]).all() for k in kept):
            kept.append(int(index))
    return kept


@pytest.mark.parametrize("seed", range(6))
def test_pareto_front_in_blocks_is_the_front_one_vector_at_a_time(seed):
    import numpy as np

    from ipuplan.space.levels.gemm import PARETO_BLOCK, pareto_front

    rng = np.random.default_rng(seed)  # few distinct values: many equal and dominated vectors, fronts across blocks
    vectors = rng.integers(0, 6, size=(int(rng.integers(1, 3 * PARETO_BLOCK)), int(rng.integers(1, 7))))
    assert pareto_front(vectors) == _front_one_at_a_time(vectors)


def test_split_grid_is_the_nested_loops_in_their_order():
    from ipuplan.space.levels.gemm import split_grid

    options = [[1, 2, 3, 5], [1, 2, 4, 8], [1, 3, 9]]
    for tiles in (1, 7, 24, 1000):
        loops = [[a, b, c] for a in options[0] for b in options[1] for c in options[2] if a * b * c <= tiles]
        assert split_grid(options, tiles).tolist() == loops


@pytest.mark.parametrize("shape", [(1, 729, 1152), (7, 3)])
def test_flat_sizes_are_the_shard_bytes_of_the_flat_layouts(reference_plan, shape):
    from ipuplan.space.levels.retile import flat_layout, flat_sizes

    layout = reference_plan.values[8].parsed_layout
    sizes = flat_sizes(shape, 2, 1472)
    assert sizes and len({size for _, size in sizes}) == len(sizes)
    assert all(shard_bytes(shape, 2, flat_layout(layout, shape, count)) == size for count, size in sizes)


def _sent_element_by_element(shape, element_size, source, target):
    """Bytes sent, one element and one target replica at a time, from the tile mappings `ipuplan.facts.exchange` describes."""
    from itertools import product as every

    from ipuplan.facts.exchange import placement

    a, b = placement(shape, source), placement(shape, target)

    def base(place, index):
        return sum(min(i // extent, parts - 1) * stride for i, (extent, parts, stride) in zip(index, place.dimensions))

    sent = 0
    for index in every(*(range(size) for size in shape)):
        held = {base(a, index) + r * a.span for r in range(a.replicas)}
        sent += sum(base(b, index) + r * b.span not in held for r in range(b.replicas))
    return sent * element_size


@pytest.mark.parametrize("seed", range(4))
def test_exchange_summed_per_distance_is_the_element_by_element_count(seed):
    import numpy as np

    from ipuplan.facts.exchange import mapped_exchange_bytes
    from ipuplan.plan.debug_syntax import Atom
    from ipuplan.plan.layout import Axis, AxisTiling, Layout

    rng = np.random.default_rng(seed)

    def random_layout(shape):
        axes = tuple(
            AxisTiling(Axis("FromStart", d), int(rng.integers(1, 5)), 1, int(block), int(block), 1, "Zero",
                       None if rng.random() < 0.3 else int(rng.integers(1, 7)))
            for d in range(len(shape)) for block in [rng.integers(1, 4)]
        )
        replicas = int(rng.integers(1, 4))
        return Layout(Atom("RowMajor"), replicas * int(np.prod([a.partitions for a in axes])), replicas, axes, STANDARD)

    for _ in range(40):
        shape = tuple(int(s) for s in rng.integers(1, 13, size=int(rng.integers(1, 4))))
        source, target = random_layout(shape), random_layout(shape)
        assert mapped_exchange_bytes(shape, 2, source, target) == _sent_element_by_element(shape, 2, source, target)

"""Exchange bytes from the tile mappings, on movers of the reference plan."""

from __future__ import annotations

from dataclasses import replace
from itertools import product
from math import prod

import numpy as np
import pytest

from ipuplan.facts.exchange_proxy import mapped_exchange_bytes, placement
from ipuplan.plan.debug_syntax import Atom
from ipuplan.plan.layout import STANDARD, Axis, AxisTiling, Layout


def _bytes(plan, source_id, target_id):
    source, target = plan.values[source_id], plan.values[target_id]
    return mapped_exchange_bytes(tuple(source.shape), source.element_size, source.parsed_layout, target.parsed_layout)


def test_same_layout_sends_nothing(reference_plan):
    assert _bytes(reference_plan, 136, 136) == 0


def test_reuse_local_copy_sends_nothing(reference_plan):
    # step 1: `Copy { .., reuse_local: true }` from 43 to 134, the same placement written two ways
    assert _bytes(reference_plan, 43, 134) == 0


def test_weight_copy_sends_every_replica_but_the_local_one(reference_plan):
    weight = reference_plan.values[51]
    logical = prod(weight.shape) * weight.element_size
    assert reference_plan.values[136].parsed_layout.replicas == 10
    assert _bytes(reference_plan, 51, 136) == 9 * logical


def test_unplaced_axes_get_a_canonical_placement(reference_plan):
    layout = reference_plan.values[51].parsed_layout  # N: Some(1) over 36, K: None over 4
    where = placement(tuple(reference_plan.values[51].shape), layout)
    assert [(parts, stride) for _, parts, stride in where.dimensions] == [(4, 36), (36, 1)]
    assert where.span == 144


def test_swapped_strides_send_all_but_the_shards_that_stay(reference_plan):
    value = reference_plan.values[3]  # [1, 729, 1152]: row r, half h on tile 2r + h (1458 tiles)
    layout = value.parsed_layout
    swapped = replace(layout, axes=(replace(layout.axes[0], tile_stride=1), replace(layout.axes[1], tile_stride=729)))
    # now on tile r + 729h: only (r=0, h=0) and (r=728, h=1) stay, 576 elements each
    total = prod(value.shape) * 2
    assert mapped_exchange_bytes(tuple(value.shape), 2, layout, swapped) == total - 2 * 576 * 2


def _sent_element_by_element(shape, element_size, source, target):
    """Bytes sent, one element and one target replica at a time, from the tile mappings `ipuplan.facts.exchange_proxy`
    describes."""
    a, b = placement(shape, source), placement(shape, target)

    def base(place, index):
        return sum(min(i // extent, parts - 1) * stride for i, (extent, parts, stride) in zip(index, place.dimensions))

    sent = 0
    for index in product(*(range(size) for size in shape)):
        held = {base(a, index) + r * a.span for r in range(a.replicas)}
        sent += sum(base(b, index) + r * b.span not in held for r in range(b.replicas))
    return sent * element_size


@pytest.mark.parametrize("seed", range(4))
def test_exchange_summed_per_distance_is_the_element_by_element_count(seed):
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

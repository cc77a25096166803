"""Exchange bytes from the tile mappings, on movers of the reference plan."""

from __future__ import annotations

from dataclasses import replace
from math import prod

from ipuplan.facts.exchange import mapped_exchange_bytes, placement


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

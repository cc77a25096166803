"""Tile strides as decisions (space/strides.py): other placements of one tiling, kept only where movers send less."""

from __future__ import annotations

from ipuplan.facts.check import placement_problem
from ipuplan.space.strides import STRIDES_LABEL, radix_orders


def test_stride_orders_are_legal_placements_and_cheaper_ones_become_candidates(reference_plan, spaces):
    layout = reference_plan.values[8].parsed_layout  # N placed (stride 1), K left to the compiler
    variants = radix_orders(layout)
    assert variants and all(placement_problem(v, 1472) is None for v in variants)
    assert all(v.axes[1].tile_stride == 1 and v.axes[0].tile_stride == layout.axes[1].partitions for v in variants)
    for group in spaces["full"].free:
        for choice in (c for c in group.candidates if c.label == STRIDES_LABEL):
            twins = [c for c in group.candidates if c.label != STRIDES_LABEL and c.value_bytes == choice.value_bytes
                     and [a.partitions for a in c.layouts[0].axes] == [a.partitions for a in choice.layouts[0].axes]
                     and c.layouts[0].memory_class == choice.layouts[0].memory_class]
            assert twins and all(choice.exchange_bytes < twin.exchange_bytes for twin in twins)

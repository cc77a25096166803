"""Tile strides as decisions (part of scope `full`): the same tiling, its shards placed in another order.

Each candidate gets one canonical placement (mixed radix over the placed axes, in the input's
order). Where another order of the radix puts shards on the tiles that already hold the data a
mover reads or writes, the mover sends fewer bytes: that placement becomes a candidate of its own,
with the same bytes per tile and less exchange, and the secondary objective chooses between them.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import permutations

from ipuplan.facts.plan_facts import PlanFacts
from ipuplan.plan.layout import Layout
from ipuplan.space import rules
from ipuplan.space.types import Candidate

STRIDES_LABEL = "strides"


def radix_orders(layout: Layout) -> list[Layout]:
    """The layout with its partitioned axes all placed, mixed radix, in every order but the canonical one
    (placed axes by stride, then the ones the plan left to the compiler, as `ipuplan.facts.exchange_proxy` places
    them)."""
    split = [i for i, axis in enumerate(layout.axes) if axis.partitions > 1]
    current = tuple(sorted(
        split, key=lambda i: (layout.axes[i].tile_stride is None, layout.axes[i].tile_stride or 0, i)))
    variants = []
    for order in permutations(split):
        if order == current:
            continue
        axes, radix = list(layout.axes), 1
        for i in order:
            axes[i] = replace(axes[i], tile_stride=radix)
            radix *= axes[i].partitions
        variants.append(replace(layout, axes=tuple(axes)))
    return variants


def with_stride_choices(facts: PlanFacts, members: rules.LayoutGroup, moved: tuple[rules.Move, ...],
                        candidates: tuple[Candidate, ...]) -> tuple[Candidate, ...]:
    """The candidates, plus for each the placement its movers send least for, when that is less."""
    if not moved:
        return candidates
    extra = []
    for candidate in candidates:
        best = candidate
        for layout in radix_orders(candidate.layouts[0]):
            layouts = (layout,) * len(members)
            exchange = rules.exchange_cost(facts, members, moved, layouts)
            if exchange < best.exchange_bytes:
                best = replace(candidate, layouts=layouts, exchange_bytes=exchange, label=STRIDES_LABEL)
        if best is not candidate:
            extra.append(best)
    return (*candidates, *extra)

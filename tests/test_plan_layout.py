"""Layout strings (plan/layout.py): every one of models/ round-trips, the fields a layout carries, element sizes."""

from __future__ import annotations

import pytest
from reference import ALL_PLANS

from ipuplan import load_plan
from ipuplan.plan.layout import element_size, format_layout, parse_layout


@pytest.mark.parametrize("path", ALL_PLANS, ids=lambda p: p.name)
def test_every_layout_string_round_trips(path):
    for text in (value.layout for value in load_plan(path).values):
        assert format_layout(parse_layout(text)) == text


def test_layout_fields(reference_plan):
    layout = parse_layout(reference_plan.values[8].layout)
    assert layout.order_kind == "BlockMajor(Matrix)"
    assert (layout.tile_count, layout.replicas, layout.memory_class) == (144, 1, "Ipu21Interleaved")
    assert [(a.axis.kind, a.axis.index, a.partitions, a.block_size, a.tile_stride) for a in layout.axes] == [
        ("FromEnd", 1, 36, 16, 1),
        ("FromEnd", 2, 4, 288, None),
    ]


def test_element_sizes():
    assert [element_size(p) for p in ("F16", "F32", "F8F143 { scale_exponent: -4 }")] == [2, 4, 1]


def test_a_layout_s_hash_is_kept_and_never_pickled(reference_plan):
    import dataclasses
    import pickle

    layout = reference_plan.values[8].parsed_layout
    same = parse_layout(format_layout(layout))
    assert same == layout and hash(same) == hash(layout) == hash(layout)
    moved = dataclasses.replace(layout, replicas=layout.replicas * 2)
    assert moved != layout and hash(moved) != hash(layout)
    assert "_hash" in vars(layout) and "_hash" not in vars(pickle.loads(pickle.dumps(layout)))
    assert pickle.loads(pickle.dumps(layout)) == layout

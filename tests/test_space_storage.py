"""Freedom level `storage` (space/levels/storage.py): flat layouts and their shard sizes."""

from __future__ import annotations

import pytest

from ipuplan.facts.estimate import shard_bytes
from ipuplan.space.levels.storage import flat_layout, flat_sizes


@pytest.mark.parametrize("shape", [(1, 729, 1152), (7, 3)])
def test_flat_sizes_are_the_shard_bytes_of_the_flat_layouts(reference_plan, shape):
    layout = reference_plan.values[8].parsed_layout
    sizes = flat_sizes(shape, 2, 1472)
    assert sizes and len({size for _, size in sizes}) == len(sizes)
    assert all(shard_bytes(shape, 2, flat_layout(layout, shape, count)) == size for count, size in sizes)

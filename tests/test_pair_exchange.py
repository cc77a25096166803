"""A step's exchange for many layout pairs at once (`facts.pair_exchange.pair_bytes`) against the definition's
own count of each pair (`plan_exchange.step_bytes`, itself checked element by element in test_plan_exchange)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from test_plan_exchange import REDUCE, RETILE, WHOLE_COPY, _layout, _slice, _view

from ipuplan.facts.pair_exchange import meeting_of, pair_bytes
from ipuplan.facts.plan_exchange import step_bytes
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
    (_view(False, 2), (1, 6, 8), (2, 6, 4)),  # no closed form: every pair by the definition
]


@pytest.mark.parametrize("operation, source_shape, result_shape", STEPS)
def test_every_pair_is_the_definitions_count(operation, source_shape, result_shape):
    rng = random.Random(hash((operation, source_shape)) % 1000)
    sources = [_random_layout(rng, source_shape, 0.0 if operation == REDUCE else 0.25) for _ in range(14)]
    results = [_random_layout(rng, result_shape) for _ in range(14)]
    fast, slow = _every_pair(operation, source_shape, result_shape, sources, results)
    assert fast.tolist() == slow.tolist()
    assert slow.any()


def test_the_closed_form_covers_movers_slices_and_reductions_not_views():
    shapes = {(op, s, r): meeting_of(parse_operation(op), s, r) is not None for op, s, r in STEPS}
    assert list(shapes.values()) == [True] * 6 + [False]


def test_replicas_and_flat_layouts_meet_exactly():
    """The cases the optimiser leans on: a flat result served to every replica, a flat source of a cropped tensor."""
    rows_on_3 = _layout([(0, 3, 2, 1)], replicas=2)
    flat_on_4 = _layout([("Linear", 4, 2, None)], replicas=3)
    whole_on_1 = _layout([(1, 1, 12, None)], replicas=4)
    for operation, source_shape, result_shape in STEPS[:5]:
        layouts = [rows_on_3, flat_on_4, whole_on_1] if result_shape[0] % 2 == 0 else [flat_on_4, whole_on_1]
        fast, slow = _every_pair(operation, source_shape, result_shape, layouts, layouts)
        assert fast.tolist() == slow.tolist(), operation
